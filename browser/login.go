package browser

import (
	"time"

	"github.com/agentvault/agentvault"
	"github.com/mxschmitt/playwright-go"
)

// browser_login's page helpers (seed 000): find the sign-in fields when the
// agent named none, and tell whether a sign-in step is still showing. The
// heuristics read attributes and button labels, never a field's value.

// LoginFields are the selectors browser_login types into and clicks;
// "" where none was named and none was found.
type LoginFields struct {
	Username, Password, Submit string
}

// loginMark tags the elements the heuristics found, so a plain selector
// reaches exactly that element.
const loginMark = "data-av-login"

const loginFieldsScript = `(arg) => {
	const vis = (e) => { if (!e || !e.getBoundingClientRect) return false; const r = e.getBoundingClientRect(); if (r.width <= 0 || r.height <= 0) return false; const st = getComputedStyle(e); return st.visibility !== 'hidden' && st.display !== 'none'; };
	const all = (s) => Array.from(document.querySelectorAll(s)).filter(vis);
	for (const e of document.querySelectorAll('[data-av-login]')) e.removeAttribute('data-av-login');
	const out = {};
	const pws = all('input[type=password]');
	const pw = pws.find((e) => (e.getAttribute('autocomplete') || '') !== 'new-password') || pws[0] || null;
	if (!arg.pass && pw) { pw.setAttribute('data-av-login', 'password'); out.password = true; }
	let user = null;
	if (!arg.user) {
		const score = (e) => {
			const ac = (e.getAttribute('autocomplete') || '').toLowerCase();
			const t = (e.getAttribute('type') || 'text').toLowerCase();
			const n = ((e.name || '') + ' ' + (e.id || '')).toLowerCase();
			if (/\busername\b/.test(ac)) return 5;
			if (t === 'email' || /\bemail\b/.test(ac)) return 4;
			if (/user|login|email|identifier|account|cpf/.test(n)) return 3;
			if (pw && e.form && e.form === pw.form && (t === 'text' || t === 'tel')) return 2;
			return 0;
		};
		let bs = 0;
		for (const e of all('input:not([type=hidden]):not([type=password]):not([type=checkbox]):not([type=radio]):not([type=submit]):not([type=button])')) {
			const s = score(e);
			if (s > bs) { bs = s; user = e; }
		}
		if (user) { user.setAttribute('data-av-login', 'username'); out.username = true; }
	}
	if (!arg.submit) {
		const anchor = pw || user;
		let btn = null;
		if (anchor && anchor.form) btn = Array.from(anchor.form.querySelectorAll('button[type=submit],input[type=submit],button:not([type])')).filter(vis)[0] || null;
		if (!btn) btn = all('button,input[type=submit],[role=button]').find((e) => /^(sign ?in|log ?in|continue|next|submit|entrar|acessar|continuar)\b/i.test(((e.innerText || e.value || '') + '').trim())) || null;
		if (btn) { btn.setAttribute('data-av-login', 'submit'); out.submit = true; }
	}
	return out;
}`

// FindLoginFields keeps each selector the agent named and finds the others
// on the current page's main document.
func (s *Session) FindLoginFields(named LoginFields) (LoginFields, error) {
	p, err := s.page()
	if err != nil {
		return LoginFields{}, err
	}
	v, err := p.Evaluate(loginFieldsScript, map[string]any{"user": named.Username != "", "pass": named.Password != "", "submit": named.Submit != ""})
	if err != nil {
		return LoginFields{}, agentvault.Wrap(agentvault.CodeTimeout, err, "the page could not be read for its sign-in fields")
	}
	m, _ := v.(map[string]any)
	out := named
	mark := func(have *string, key string) {
		if *have == "" {
			if ok, _ := m[key].(bool); ok {
				*have = "[" + loginMark + "=" + key + "]"
			}
		}
	}
	mark(&out.Username, "username")
	mark(&out.Password, "password")
	mark(&out.Submit, "submit")
	return out, nil
}

// Visible reports whether t shows now (no wait).
func (s *Session) Visible(t Target) bool {
	loc, _, err := s.locator(t)
	if err != nil {
		return false
	}
	ok, err := loc.First().IsVisible()
	return err == nil && ok
}

// WaitLoaded waits up to timeout for the current page's load event.
func (s *Session) WaitLoaded(timeout time.Duration) {
	p, err := s.page()
	if err != nil {
		return
	}
	_ = p.WaitForLoadState(playwright.PageWaitForLoadStateOptions{State: playwright.LoadStateLoad, Timeout: ms(timeout)})
}
