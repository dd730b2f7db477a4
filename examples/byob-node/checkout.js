#!/usr/bin/env node
'use strict';
// Bring your own browser (docs/byob.md): this script drives its own
// Chromium through agentvault's proxy and buys from the test merchant
// (e2e/merchant) without ever holding the card. It asks proxyd's control
// API, with its own API key, for a session, the catalog and a stand-in per
// field; it types the stand-ins; the proxy puts the real values on the wire
// to the sites the owner allowed, and scrubs them from every answer.
//
// Settings (environment):
//   AGENTVAULT_CONTROL_URL   the control API (default http://127.0.0.1:7701)
//   AGENTVAULT_API_KEY       the agent's API key, or
//   AGENTVAULT_API_KEY_FILE  a file holding it (default ~/.agentvault/api-key)
//   SHOP_URL                 a product page of the test merchant
//   CHROMIUM_PATH            the browser (default /usr/bin/chromium)
//   BYOB_TRANSCRIPT          optional: a JSON file of everything the script
//                            was told and read (control answers, page texts)
// The selectors below are the test merchant's; a real shop has its own.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { chromium } = require('playwright-core');
const { Agentvault } = require('./agentvault');

const transcript = [];
const keep = (what, data) => transcript.push({ what, data });
const say = (line) => console.log(line);

function settings() {
  const keyFile = process.env.AGENTVAULT_API_KEY_FILE || path.join(os.homedir(), '.agentvault', 'api-key');
  const apiKey = (process.env.AGENTVAULT_API_KEY || fs.readFileSync(keyFile, 'utf8')).trim();
  if (!process.env.SHOP_URL) throw new Error('set SHOP_URL to a product page of the test merchant');
  return {
    controlURL: process.env.AGENTVAULT_CONTROL_URL || 'http://127.0.0.1:7701',
    apiKey,
    shopURL: process.env.SHOP_URL,
    chromium: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
    transcript: process.env.BYOB_TRANSCRIPT || '',
  };
}

// "EUR 42.50" (the page's data-total) as the control API's order total.
function orderTotal(text) {
  const [currency, amount] = (text || '').trim().split(/\s+/);
  if (!/^[A-Z]{3}$/.test(currency || '') || !/^\d+(\.\d+)?$/.test(amount || '')) {
    throw new Error(`the page shows no total this script can read (${JSON.stringify(text)})`);
  }
  return { amount, currency };
}

// Answer the proxy's challenge with the session's credential, and nothing
// else. Playwright given proxy.username/password answers every challenge
// with them, a site's 401 too (the site would be sent the credential), and
// pauses every request of the context in its driver. Instead: a CDP
// session that intercepts only until a response came through the proxy
// (Chromium then keeps the accepted credential for the context's next
// tunnels), gives the credential to the proxy once per request, and
// cancels any other challenge.
async function answerProxyChallenge(context, page, s) {
  const proxyHost = new URL(s.proxyURL).host;
  const cdp = await context.newCDPSession(page);
  const answered = new Set();
  cdp.on('Fetch.requestPaused', (ev) => cdp.send('Fetch.continueRequest', { requestId: ev.requestId }).catch(() => {}));
  cdp.on('Fetch.authRequired', (ev) => {
    const ch = ev.authChallenge;
    let resp = { response: 'CancelAuth' };
    if (ch.source === 'Proxy' && new URL(ch.origin).host === proxyHost && !answered.has(ev.requestId)) {
      answered.add(ev.requestId);
      resp = { response: 'ProvideCredentials', username: s.proxyUser, password: s.proxyPassword };
    }
    cdp.send('Fetch.continueWithAuth', { requestId: ev.requestId, authChallengeResponse: resp }).catch(() => {});
  });
  await cdp.send('Fetch.enable', { handleAuthRequests: true, patterns: [{ urlPattern: '*', requestStage: 'Request' }] });
  const done = (res) => {
    if (!res.url().startsWith('https://')) return;
    context.off('response', done);
    // Narrowed to a URL no request has rather than disabled: a request paused
    // just now is still this session's to continue.
    cdp.send('Fetch.enable', { handleAuthRequests: true, patterns: [{ urlPattern: 'about:agentvault-no-request', requestStage: 'Request' }] }).catch(() => {});
  };
  context.on('response', done);
}

async function main() {
  const cfg = settings();
  const av = new Agentvault({ controlURL: cfg.controlURL, apiKey: cfg.apiKey, record: (call, status, data) => keep(call, { status, data }) });

  // 1. A session: proxy credentials of its own, and the CA to trust.
  const s = await av.openSession();
  say(`session ${s.id}: proxy ${s.proxyURL}`);
  let browser;
  try {
    const proxy = new URL(s.proxyURL);
    browser = await chromium.launch({
      executablePath: cfg.chromium,
      headless: true,
      // The server only: the credential goes to the proxy's challenge alone
      // (answerProxyChallenge).
      proxy: { server: `${proxy.protocol}//${proxy.host}` },
      args: [
        // Trust the deployment's CA: its leaves inside the tunnel (and the
        // proxy's own certificate, when the proxy speaks TLS).
        `--ignore-certificate-errors-spki-list=${s.caSPKI}`,
        // Chromium's sandbox needs namespaces a container or root lacks.
        '--no-sandbox',
        // Keep Chromium's own calls to Google (form hints, translation) off the
        // proxy: they are not the agent's, and proxyd would count them refused.
        '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync',
        '--disable-features=AutofillServerCommunication,OptimizationHints,MediaRouter,Translate',
      ],
    });
    const context = await browser.newContext();
    const page = await context.newPage();
    await answerProxyChallenge(context, page, s);

    // 2. To the checkout, as any script would.
    await page.goto(cfg.shopURL);
    await page.click('#add-to-cart');
    await page.click('#checkout');
    await page.locator('#place-order').waitFor();
    const pageURL = page.url();
    const total = orderTotal(await page.locator('#order-total').getAttribute('data-total'));
    say(`checkout at ${new URL(pageURL).host}: ${total.currency} ${total.amount}`);

    // 3. The catalog: which of the owner's items this key may use here.
    const cat = await av.catalog(pageURL);
    const card = (cat.cards || [])[0];
    const who = cat.identity;
    const where = (cat.addresses || [])[0];
    if (!card || !who || !where) throw new Error('the catalog offers no card, identity or address for this page');
    say(`catalog: card ${card.label} (${card.brand || 'card'} ending ${card.last4}), identity ${who.label}, address ${where.label}`);

    // 4. Authorize each token for the page (or the frame) it is typed on,
    //    and type what comes back: the owner's identity and address as they
    //    are, a stand-in for each secret field of the card.
    const value = async (token, extra = {}) => {
      const a = await av.authorize(s.id, { token, pageURL, ...extra }, {
        onWait: (p) => say(`waiting for the owner to approve ${p.site} (${p.reason})`),
      });
      return a.value;
    };
    const t = who.tokens;
    const [first, ...rest] = (await value(t.name)).split(' ');
    await page.fill('#first-name', first);
    await page.fill('#last-name', rest.join(' '));
    await page.fill('#email', await value(t.email));
    await page.fill('#phone', await value(t.phone));
    await page.fill('#address-line1', await value(where.tokens.line1));
    await page.fill('#postal-code', await value(where.tokens.postal_code));
    await page.fill('#city', await value(where.tokens.city));
    await page.selectOption('#country', await value(where.tokens.country));
    say('shipping details typed');

    const frame = await (await page.locator('iframe[title="Secure payment input frame"]').elementHandle()).contentFrame();
    const frameURL = frame.url();
    await frame.selectOption('#exp-month', String(card.expiryMonth));
    await frame.selectOption('#exp-year', String(card.expiryYear));
    const number = await value(card.tokens.number, { frameURL, orderTotal: total });
    const cvv = await value(card.tokens.cvv, { frameURL, orderTotal: total });
    await frame.fill("input[name='number']", number);
    await frame.fill("input[name='cvc']", cvv);
    say(`card typed as its stand-in (ending ${number.slice(-4)}) into the frame of ${new URL(frameURL).host}`);

    // 5. Submit; the proxy swaps the stand-ins for the real card on the way
    //    to the processor, and back in every answer.
    await page.click('#place-order');
    await page.locator('#order-success').waitFor({ timeout: 60_000 });
    const charged = await page.locator('#confirmed-total').getAttribute('data-total');
    keep('confirmation page', { url: page.url(), html: await page.content() });
    for (const f of page.frames()) keep('frame', { url: f.url(), html: await f.content().catch(() => '') });
    say(`order confirmed: ${charged}`);
    await av.event(s.id, { type: 'confirmation', orderTotal: orderTotal(charged) });

    // 6. The outcome, as proxyd saw it.
    const rep = await av.report(s.id);
    say(`report: filled ${(rep.filledFieldKinds || []).join(', ')}; refused ${rep.deniedCount}; confirmation ${rep.confirmationDetected}`);
  } finally {
    // 7. Close the browser first (it would retry the proxy with the ended
    //    session's credentials), then the session.
    try {
      if (browser) await browser.close();
      const end = await av.close(s.id);
      say(`session closed (${(end.report.filledFieldKinds || []).join(', ') || 'nothing filled'})`);
    } finally {
      if (cfg.transcript) fs.writeFileSync(cfg.transcript, JSON.stringify(transcript, null, 2));
    }
  }
}

main().catch((err) => {
  console.error(`checkout failed: ${err.message}`);
  process.exitCode = 1;
});
