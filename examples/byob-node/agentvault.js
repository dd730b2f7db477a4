'use strict';
// A small client for the calls of proxyd's control API that an agent
// driving its own browser makes with its own API key (docs/byob.md):
// open a session, read the catalog, authorize a token for a page (waiting
// while the owner decides), report an event, read the report, close.
// Node 20's fetch; no other dependency. For an https:// control URL signed
// by the deployment's CA, start node with NODE_EXTRA_CA_CERTS=<data>/ca.pem.

class AgentvaultError extends Error {
  constructor(status, code, message) {
    super(`${code}: ${message}`);
    this.status = status;
    this.code = code;
  }
}

class Agentvault {
  // record, when given, is called with every answer the control API gave
  // (the proxy password left out), so a caller can keep a transcript.
  constructor({ controlURL, apiKey, record }) {
    this.base = controlURL.replace(/\/+$/, '');
    this.apiKey = apiKey;
    this.record = record || (() => {});
  }

  async call(method, path, body) {
    const res = await fetch(this.base + path, {
      method,
      headers: { Authorization: `Bearer ${this.apiKey}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let data;
    try {
      data = text ? JSON.parse(text) : {};
    } catch {
      throw new AgentvaultError(res.status, 'bad_answer', `the control API answered ${res.status} with something that is not JSON`);
    }
    const kept = data.proxyPassword ? { ...data, proxyPassword: '(not kept)' } : data;
    this.record(`${method} ${path.split('?')[0]}`, res.status, kept);
    if (res.status === 202) return { pending: data };
    if (!res.ok) throw new AgentvaultError(res.status, data.code || 'error', data.message || `HTTP ${res.status}`);
    return data;
  }

  // A proxy session: its id, the proxy URL with its own user and password,
  // and the deployment CA the browser must trust inside the tunnel
  // (caSPKI for Chromium's flag, caPEM for anything else).
  openSession() {
    return this.call('POST', '/v1/sessions', {});
  }

  // The owner's items this key may use on pageURL, as tokens (never values).
  catalog(pageURL) {
    return this.call('GET', `/v1/catalog?url=${encodeURIComponent(pageURL)}`);
  }

  // What to type for token on pageURL (frameURL: the frame holding the
  // field, when it is not the page): a stand-in for a secret field. When
  // the owner is asked first, waits for the decision (up to maxWaitMs),
  // then authorizes again; a no or an expiry throws with its code.
  async authorize(sessionID, req, { maxWaitMs = 10 * 60 * 1000, onWait } = {}) {
    const deadline = Date.now() + maxWaitMs;
    for (;;) {
      const a = await this.call('POST', `/v1/sessions/${sessionID}/authorize`, req);
      if (!a.pending) return a;
      if (onWait) onWait(a.pending);
      for (;;) {
        if (Date.now() > deadline) throw new AgentvaultError(408, 'approval_timeout', 'the owner did not decide in time');
        const w = await this.call('GET', `/v1/waits/${a.pending.waitId}?timeout=25s`);
        if (w.status === 'approved') break;
        if (w.status !== 'pending') throw new AgentvaultError(403, w.code || w.status, w.message || `the owner's answer: ${w.status}`);
      }
    }
  }

  // Tells proxyd what the agent saw (a confirmation and its total), for the
  // session's report.
  event(sessionID, ev) {
    return this.call('POST', `/v1/sessions/${sessionID}/events`, ev);
  }

  report(sessionID) {
    return this.call('GET', `/v1/sessions/${sessionID}/report`);
  }

  // Ends the session: its proxy credentials and grants stop working.
  close(sessionID) {
    return this.call('DELETE', `/v1/sessions/${sessionID}`);
  }
}

module.exports = { Agentvault, AgentvaultError };
