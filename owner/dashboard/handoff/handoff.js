// The live view of a hand-off: fetch frames one after another, show them,
// and send the owner's clicks and keys, in order, to the dashboard, which
// queues them for the agent's browser. Nothing typed is kept here.
(function () {
  'use strict';
  var live = document.getElementById('live');
  if (!live) return;
  var img = document.getElementById('live-frame');
  var wait = document.getElementById('live-wait');
  var state = document.getElementById('handoff-state');
  var id = live.getAttribute('data-id');
  var csrf = live.getAttribute('data-csrf');
  var seq = 0, vw = 0, vh = 0, url = null, stopped = false;
  // Figures for the owner's own check (and the e2e test's report): frames
  // shown, and the time from a click to the next frame.
  var stats = window.handoffStats = { frames: 0, firstAt: 0, lastAt: 0, clickAt: 0, latencies: [] };

  function show(blob) {
    var next = URL.createObjectURL(blob);
    img.src = next;
    if (url) URL.revokeObjectURL(url);
    url = next;
    wait.hidden = true;
    var now = performance.now();
    stats.frames++;
    if (!stats.firstAt) stats.firstAt = now;
    stats.lastAt = now;
    if (stats.clickAt) { stats.latencies.push(now - stats.clickAt); stats.clickAt = 0; }
  }

  function ended(outcome) {
    stopped = true;
    live.classList.add('ended');
    state.textContent = outcome ? 'The page went back to the agent: ' + outcome + '.' : 'The page went back to the agent.';
    state.setAttribute('data-outcome', outcome || '');
  }

  function loop() {
    if (stopped) return;
    fetch('/handoffs/' + encodeURIComponent(id) + '/frame?after=' + seq, { credentials: 'same-origin', cache: 'no-store' }).then(function (r) {
      if (r.status === 410) { ended(r.headers.get('X-Handoff-Outcome')); return null; }
      if (r.status === 204) return null;
      if (!r.ok) throw new Error('frame ' + r.status);
      seq = parseInt(r.headers.get('X-Handoff-Seq'), 10) || seq;
      vw = parseInt(r.headers.get('X-Viewport-Width'), 10) || vw;
      vh = parseInt(r.headers.get('X-Viewport-Height'), 10) || vh;
      stats.vw = vw; stats.vh = vh;
      return r.blob();
    }).then(function (b) {
      if (b) show(b);
      loop();
    }).catch(function () { setTimeout(loop, 1000); });
  }

  // Input goes out one request at a time, so keys arrive in order.
  var chain = Promise.resolve();
  function send(fields) {
    var body = new URLSearchParams(fields);
    body.set('csrf', csrf);
    chain = chain.then(function () {
      return fetch('/handoffs/' + encodeURIComponent(id) + '/input', { method: 'POST', body: body, credentials: 'same-origin' });
    }).catch(function () {});
  }

  img.addEventListener('click', function (e) {
    if (stopped || !vw || !img.clientWidth) return;
    live.focus();
    var x = e.offsetX / img.clientWidth * vw, y = e.offsetY / img.clientHeight * vh;
    stats.clickAt = performance.now();
    send({ type: 'click', x: x.toFixed(1), y: y.toFixed(1) });
  });

  var named = { Enter: 1, Tab: 1, Backspace: 1, Delete: 1, Escape: 1, ArrowLeft: 1, ArrowRight: 1, ArrowUp: 1, ArrowDown: 1, Home: 1, End: 1 };
  live.addEventListener('keydown', function (e) {
    if (stopped || e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key.length === 1) { send({ type: 'text', text: e.key }); e.preventDefault(); return; }
    if (named[e.key]) { send({ type: 'key', key: e.key }); e.preventDefault(); }
  });

  loop();
})();
