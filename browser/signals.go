package browser

import (
	"strconv"
	"strings"
	"time"
)

// PageSignals is the fixed, value-free set of answers observe_page gives.
// ErrorText is raw page text from validation elements: the caller must scrub
// it before it leaves the process.
type PageSignals struct {
	PasswordField    bool
	IdentifierField  bool
	EmailOrPhone     bool
	CodeSent         bool
	Error            bool
	RefusingAttempts bool
	SignIn           bool // a sign-in step is showing (password field or sign-in heading)
	ErrorText        []string
	// Incomplete is true when a frame did not answer in time.
	Incomplete bool
}

// observeScript runs in one frame and reads only roles, attributes, styles,
// validation state and the text of elements marked as validation output.
const observeScript = `() => {
	const vis = (e) => { if (!e || !e.getBoundingClientRect) return false; const r = e.getBoundingClientRect(); if (r.width <= 0 || r.height <= 0) return false; const st = getComputedStyle(e); return st.visibility !== 'hidden' && st.display !== 'none' && st.opacity !== '0'; };
	const q = (s) => Array.from(document.querySelectorAll(s));
	const out = {password: false, identifier: false, emailPhone: false, codeSent: false, error: false, refusing: false, signIn: false, errors: [], complete: document.readyState === 'complete'};
	const inputs = q('input').filter(vis);
	for (const i of inputs) {
		const t = (i.getAttribute('type') || 'text').toLowerCase();
		const ac = (i.getAttribute('autocomplete') || '').toLowerCase();
		if (t === 'password') out.password = true;
		if (/\b(username|webauthn)\b/.test(ac) || (/\bemail\b/.test(ac) && out.password)) out.identifier = true;
		if (t === 'email' || t === 'tel' || /\b(email|tel|tel-national)\b/.test(ac)) out.emailPhone = true;
	}
	const text = (document.body ? document.body.innerText : '').slice(0, 20000);
	// A code or sign-in link on its way, not any email ("we've sent your
	// receipt" on a confirmation page is not a code step).
	if (/\b(code|passcode|one-time|otp|verification link|sign-?in link|magic link|login link)\b[^.\n]{0,40}\b(sent|texted|emailed)\b/i.test(text) || /\b(sent|texted|emailed)\b[^.\n]{0,40}\b(code|passcode|one-time|otp|verification link|sign-?in link|magic link|login link)\b/i.test(text)) out.codeSent = true;
	if (/(too many (attempts|requests|tries)|try again (later|in \d+)|temporarily (locked|blocked|unavailable)|account (is |has been )?locked|rate limit)/i.test(text)) out.refusing = true;
	if (out.password || q('h1,h2,legend,[role=heading]').some((e) => vis(e) && /^\s*(sign|log) ?in\b/i.test(e.textContent || ''))) out.signIn = true;
	const seen = new Set();
	const add = (e, s) => {
		s = (s || '').replace(/\s+/g, ' ').trim();
		if (!s || seen.has(s) || out.errors.length >= 10) return;
		seen.add(s); out.errors.push(s.slice(0, 400));
	};
	// Live regions announce successes as well as failures (seed 004): their
	// text is reported, but only failure wording makes it an error. An alert
	// is an error whatever it says (below).
	const failWords = /\b(error|failed|failure|declined|invalid|incorrect|not valid|is required|could ?n[o'’]t|unable to|went wrong|rejected|denied)\b/i;
	for (const e of q('[role=alert],[aria-live]:not([aria-live=off]),[role=status]')) {
		if (!vis(e)) continue;
		add(e, e.innerText);
		if (failWords.test(e.innerText || '')) out.error = true;
	}
	for (const e of q('[aria-invalid=true]')) {
		out.error = true;
		for (const a of ['aria-describedby', 'aria-errormessage']) {
			for (const id of (e.getAttribute(a) || '').split(/\s+/)) { const t = id && document.getElementById(id); if (t && vis(t)) add(t, t.innerText); }
		}
	}
	for (const e of q('input,select,textarea')) {
		let bad = false;
		try { bad = e.matches(':user-invalid'); } catch (x) { bad = !e.validity.valid && e.value !== ''; }
		if (bad && vis(e)) { out.error = true; add(e, e.validationMessage); }
	}
	if (q('[role=alert]').some((e) => vis(e) && (e.innerText || '').trim() !== '')) out.error = true;
	return out;
}`

// frameTimeout bounds how long one frame may take to answer a scan.
const frameTimeout = 3 * time.Second

// Observe scans every frame of the current page.
func (s *Session) Observe() (PageSignals, error) {
	res, err := s.evaluateFrames(observeScript, nil, frameTimeout)
	if err != nil {
		return PageSignals{}, err
	}
	var ps PageSignals
	for _, r := range res {
		m, ok := r.(map[string]any)
		if !ok {
			ps.Incomplete = true
			continue
		}
		ps.PasswordField = ps.PasswordField || b(m["password"])
		ps.IdentifierField = ps.IdentifierField || b(m["identifier"])
		ps.EmailOrPhone = ps.EmailOrPhone || b(m["emailPhone"])
		ps.CodeSent = ps.CodeSent || b(m["codeSent"])
		ps.Error = ps.Error || b(m["error"])
		ps.RefusingAttempts = ps.RefusingAttempts || b(m["refusing"])
		ps.SignIn = ps.SignIn || b(m["signIn"])
		if !b(m["complete"]) {
			ps.Incomplete = true
		}
		if errs, ok := m["errors"].([]any); ok {
			for _, e := range errs {
				if str, ok := e.(string); ok {
					ps.ErrorText = append(ps.ErrorText, str)
				}
			}
		}
	}
	// A live region's text alone does not make the page an error page
	// (a confirmation announces itself too): alerts, invalid fields and
	// failure wording do (observeScript).
	return ps, nil
}

func b(v any) bool { x, _ := v.(bool); return x }

// Challenge is what DetectChallenge found. No page text is in it.
type Challenge struct {
	Types         []string // three_ds, captcha, otp, blocked in that priority
	Reason        string
	Signature     string
	DeliveredCode bool
	// OTPWeak is true when the only otp evidence is a field that might be a
	// code input (no autocomplete=one-time-code, no code wording).
	OTPWeak    bool
	Incomplete bool
}

const challengeScript = `() => {
	const vis = (e) => { const r = e.getBoundingClientRect(); if (r.width <= 0 || r.height <= 0) return false; const st = getComputedStyle(e); return st.visibility !== 'hidden' && st.display !== 'none'; };
	const q = (s) => Array.from(document.querySelectorAll(s));
	const text = (document.body ? document.body.innerText : '').slice(0, 20000);
	const frames = q('iframe').map((f) => ((f.getAttribute('src') || '') + ' ' + (f.getAttribute('name') || '') + ' ' + (f.getAttribute('title') || '')).toLowerCase());
	const out = {threeDS: false, captcha: false, otpStrong: false, otpWeak: false, delivered: false, blocked: false, signature: '', complete: document.readyState !== 'loading'};
	if (frames.some((f) => /3ds|three-?d-?secure|acs[./_-]|cardinal|challenge-?frame|authentication/.test(f)) || /\b(3-?d secure|verified by visa|mastercard (id check|securecode)|secure ?code|authenticate (this|your) (payment|purchase))\b/i.test(text)) out.threeDS = true;
	if (frames.some((f) => /recaptcha|hcaptcha|turnstile|challenges\.cloudflare|arkoselabs|funcaptcha|geetest|captcha/.test(f)) || q('.g-recaptcha,.h-captcha,.cf-turnstile,[data-sitekey]').length > 0 || /\b(verify (that )?you are (a )?human|are you a robot|press (and|&) hold|complete the security check)\b/i.test(text)) out.captcha = true;
	const codeInputs = q('input').filter(vis);
	if (codeInputs.some((i) => (i.getAttribute('autocomplete') || '').toLowerCase() === 'one-time-code')) out.otpStrong = true;
	const codeWords = /\b(verification code|one-?time (pass)?code|security code (was )?sent|enter (the|your) (\d+-digit )?code|authenticator app|two-?factor|2fa)\b/i.test(text);
	const codeish = codeInputs.some((i) => /\b(otp|code|passcode|verification|2fa|mfa|totp|token)\b/i.test([i.name, i.id, i.getAttribute('aria-label'), i.getAttribute('placeholder')].join(' ')) && (i.getAttribute('type') || 'text') !== 'password');
	if (codeish && codeWords) out.otpStrong = true; else if (codeish || (codeWords && codeInputs.length > 0)) out.otpWeak = true;
	if (/\b(code|passcode|one-time|otp)\b[^.\n]{0,40}\b(sent|texted|emailed)\b/i.test(text) || /\b(sent|texted|emailed)\b[^.\n]{0,40}\b(code|passcode|one-time|otp)\b/i.test(text) || /\b(text message|sms)\b/i.test(text)) out.delivered = true;
	if (/\b(error reference|reference (number|#|id)|incident id)\b/i.test(text) && /\b(error|denied|blocked)\b/i.test(text)) { out.blocked = true; out.signature = 'error_reference'; }
	else if (/\b(access denied|request (was )?blocked|you have been blocked|unusual traffic|forbidden)\b/i.test(text)) out.blocked = true;
	// Silent blocks on a search (seed 004 signatures). stalled_search: a
	// search whose results still show a busy indicator long after the
	// document loaded. search_bounce: a search or click that came back to
	// the page it left (same path, or through a redirect) with a generic
	// failure message.
	const searchCtx = q('input[type=search],[role=search],form[action*="search" i]').length > 0 || /[?&](q|query|search|keyword|k)=|\/search\b/i.test(location.href);
	if (!out.blocked && searchCtx && document.readyState === 'complete') {
		const genericFail = /\b(something went wrong|please try again|try again later|unable to (complete|process|load)|we couldn'?t (complete|process|load)|an error (has )?occurred)\b/i.test(text);
		const path = (u) => { try { const x = new URL(u); return x.origin + x.pathname; } catch (e) { return ''; } };
		const nav = (performance.getEntriesByType ? performance.getEntriesByType('navigation')[0] : null) || null;
		const bounced = (document.referrer !== '' && path(document.referrer) === path(location.href)) || (nav !== null && nav.redirectCount > 0);
		const busy = q('[aria-busy="true"],[role=progressbar],.spinner,.loader,.loading,[class*="spinner"]').some(vis);
		if (genericFail && bounced) { out.blocked = true; out.signature = 'search_bounce'; }
		else if (busy && !genericFail && performance.now() > STALL_MS) { out.blocked = true; out.signature = 'stalled_search'; }
	}
	return out;
}`

// stalledSearchAfter is how long after a document loaded a search may still
// show its busy indicator before detect_challenge calls it stalled_search.
const stalledSearchAfter = 4 * time.Second

// DetectChallenge looks for 3-D Secure, captcha, one-time code and block
// pages in every frame of the current page.
func (s *Session) DetectChallenge() (Challenge, error) {
	res, err := s.evaluateFrames(strings.Replace(challengeScript, "STALL_MS", strconv.Itoa(int(stalledSearchAfter.Milliseconds())), 1), nil, frameTimeout)
	if err != nil {
		return Challenge{}, err
	}
	return challengeOf(res), nil
}

// challengeOf merges the challenge scans of a page's frames.
func challengeOf(res []any) Challenge {
	var threeDS, captcha, otpStrong, otpWeak, blocked bool
	var c Challenge
	for _, r := range res {
		m, ok := r.(map[string]any)
		if !ok {
			c.Incomplete = true
			continue
		}
		threeDS = threeDS || b(m["threeDS"])
		captcha = captcha || b(m["captcha"])
		otpStrong = otpStrong || b(m["otpStrong"])
		otpWeak = otpWeak || b(m["otpWeak"])
		blocked = blocked || b(m["blocked"])
		c.DeliveredCode = c.DeliveredCode || b(m["delivered"])
		if sig, _ := m["signature"].(string); sig != "" {
			c.Signature = sig
		}
		if !b(m["complete"]) {
			c.Incomplete = true
		}
	}
	if threeDS {
		c.Types = append(c.Types, "three_ds")
	}
	if captcha {
		c.Types = append(c.Types, "captcha")
	}
	if otpStrong || otpWeak {
		c.Types = append(c.Types, "otp")
		c.OTPWeak = !otpStrong
	}
	if blocked {
		c.Types = append(c.Types, "blocked")
	}
	switch {
	case threeDS:
		c.Reason = "a 3-D Secure step is on the page"
	case captcha:
		c.Reason = "a CAPTCHA or bot check is on the page"
	case otpStrong:
		c.Reason = "the page asks for a one-time code"
	case otpWeak:
		c.Reason = "a field might be a code input"
	case blocked:
		c.Reason = "the site appears to be blocking this browser"
	}
	return c
}

// evaluateFrames runs script in every frame of the current page, in
// parallel, giving each frame at most timeout. A frame that fails or times
// out answers nil.
func (s *Session) evaluateFrames(script string, arg any, timeout time.Duration) ([]any, error) {
	p, err := s.page()
	if err != nil {
		return nil, err
	}
	frames := p.Frames()
	type ans struct {
		i int
		v any
	}
	ch := make(chan ans, len(frames))
	for i, f := range frames {
		go func() {
			v, err := f.Evaluate(script, arg)
			if err != nil {
				v = nil
			}
			ch <- ans{i, v}
		}()
	}
	out := make([]any, len(frames))
	t := time.NewTimer(timeout)
	defer t.Stop()
	for range frames {
		select {
		case a := <-ch:
			out[a.i] = a.v
		case <-t.C:
			return out, nil
		}
	}
	return out, nil
}

// OrderTotal is an amount the page shows as its total, with its currency
// (ISO code, or "" when the page shows none).
type OrderTotal struct {
	Amount   string
	Currency string
}

// totalScript finds the element the page presents as its order total and
// reads amount and currency from it. Only the top document is read: a card
// frame holds no total.
const totalScript = `() => {
	const cands = Array.from(document.querySelectorAll('[data-total],[id*=total i],[class*=total i],[itemprop=price],[data-testid*=total i]'));
	const sym = {'€': 'EUR', '$': 'USD', '£': 'GBP', '¥': 'JPY', 'CHF': 'CHF'};
	for (let i = cands.length - 1; i >= 0; i--) {
		const e = cands[i];
		if (e.querySelector('[data-total],[id*=total i],[class*=total i]')) continue;
		const t = (e.getAttribute('data-total') || e.innerText || '').trim();
		const m = t.match(/([A-Z]{3}|[€$£¥])?\s*(\d{1,3}(?:[ ,.]\d{3})*(?:[.,]\d{2})|\d+(?:[.,]\d{2})?)\s*([A-Z]{3}|[€$£¥])?/);
		if (!m) continue;
		let cur = m[1] || m[3] || '';
		cur = sym[cur] || cur;
		let a = m[2].replace(/[ ]/g, '');
		if (/,\d{2}$/.test(a)) a = a.replace(/\./g, '').replace(',', '.'); else a = a.replace(/,/g, '');
		return {amount: a, currency: cur};
	}
	return null;
}`

// ReadOrderTotal returns the total the current page shows, if it shows one.
func (s *Session) ReadOrderTotal() (OrderTotal, bool) {
	p, err := s.page()
	if err != nil {
		return OrderTotal{}, false
	}
	v, err := p.Evaluate(totalScript)
	if err != nil {
		return OrderTotal{}, false
	}
	m, ok := v.(map[string]any)
	if !ok {
		return OrderTotal{}, false
	}
	a, _ := m["amount"].(string)
	c, _ := m["currency"].(string)
	if a == "" {
		return OrderTotal{}, false
	}
	return OrderTotal{Amount: a, Currency: c}, true
}
