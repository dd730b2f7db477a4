// The Approvals page, live: poll /approvals/live, reload the page when what
// waits for the owner changed (unless they are typing a security code), and
// show the browser's own notification for each new request when the owner
// turned them on. Without script the page falls back to a meta refresh.
(function () {
  'use strict';
  var root = document.getElementById('approvals-live');
  if (!root) return;
  var every = 3000;
  var known = null;
  var askBtn = document.getElementById('notify-permission');
  var note = document.getElementById('live-note');
  var canNotify = typeof Notification !== 'undefined';
  if (askBtn && canNotify && Notification.permission === 'default') {
    askBtn.hidden = false;
    askBtn.addEventListener('click', function () {
      Notification.requestPermission().then(function () { askBtn.hidden = true; });
    });
  }
  if (note) note.textContent = 'This page updates itself as requests arrive.';

  function label(it) {
    switch (it.kind) {
      case 'challenge_handoff': return 'A checkout needs you to clear a bank or verification step';
      case 'new_destination': return 'New site to approve';
      case 'purchase': return 'Purchase to approve';
      case 'cvv_entry': return 'Security code to enter';
      case 'signup': return 'Signup to approve';
    }
    return 'A request waits for you';
  }

  function typing() {
    var a = document.activeElement;
    if (a && a.tagName === 'INPUT' && a.type !== 'hidden') return true;
    var fields = document.querySelectorAll('input[name="cvv"]');
    for (var i = 0; i < fields.length; i++) if (fields[i].value) return true;
    return false;
  }

  function poll() {
    fetch('/approvals/live', { credentials: 'same-origin', cache: 'no-store' })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
      .then(function (st) {
        var ids = {}, sig = [];
        st.pending.forEach(function (it) { ids[it.id] = it; sig.push(it.id); });
        sig = sig.sort().join(',');
        if (known !== null) {
          st.pending.forEach(function (it) {
            if (known.ids[it.id]) return;
            if (!st.browser || !canNotify || Notification.permission !== 'granted') return;
            if (it.kind === 'challenge_handoff' && !st.challenges) return;
            var n = new Notification('agentvault: ' + label(it), { body: it.site, tag: it.id });
            n.onclick = function () { window.focus(); location.href = it.url; };
          });
          if (sig !== known.sig) {
            if (typing()) {
              if (note) note.textContent = 'New requests arrived: reload the page when you are done.';
            } else {
              location.reload();
              return;
            }
          }
        }
        known = { ids: ids, sig: sig };
        root.setAttribute('data-live', sig);
        setTimeout(poll, every);
      })
      .catch(function () { setTimeout(poll, every * 3); });
  }
  poll();
})();
