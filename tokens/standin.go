package tokens

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"io"
	"slices"
	"sync"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/vault/item"
)

// maxAttempts bounds the retries for a stand-in that must differ from the
// real value and from every other stand-in of the session. With the
// smallest space (a 13-digit card: 100 middles) the chance of running out
// is negligible.
const maxAttempts = 200

// StandIn makes a format-preserving stand-in for a secret field, the value
// the browser types instead of the real one:
//
//   - card number: same length, same first 6 and last 4 digits, a random
//     middle with one digit fixed so the number passes Luhn;
//   - CVV: as many random digits as the real one;
//   - TOTP: 6 random digits (the real value is a seed, not a code);
//   - password: same length, and at every position a random character of
//     the same class (lower, upper, digit, symbol), symbols drawn from those
//     the real password uses, so a site that accepted the real one accepts
//     the stand-in's shape.
//
// The stand-in never equals the real value. rnd defaults to crypto/rand.
// Errors never carry the value, only its length.
func StandIn(field item.Field, real item.Secret, rnd io.Reader) ([]byte, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	r := &randBytes{r: rnd}
	raw := real.InsecureRawBytes()
	var gen func() ([]byte, error)
	switch field {
	case item.FieldNumber:
		if len(raw) < 13 || len(raw) > 19 || !allDigits(raw) {
			return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "card number must be 13 to 19 digits (got %d bytes)", len(raw))
		}
		gen = func() ([]byte, error) { return cardStandIn(raw, r) }
	case item.FieldCVV:
		if len(raw) < 3 || len(raw) > 4 || !allDigits(raw) {
			return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "CVV must be 3 or 4 digits (got %d bytes)", len(raw))
		}
		gen = func() ([]byte, error) { return r.digits(len(raw)) }
	case item.FieldTOTP:
		return r.digits(6)
	case item.FieldPassword:
		classes, symbols, err := passwordShape(raw)
		if err != nil {
			return nil, err
		}
		gen = func() ([]byte, error) { return passwordStandIn(classes, symbols, r) }
	default:
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "field %q has no stand-in: it is typed as itself", field)
	}
	for range maxAttempts {
		v, err := gen()
		if err != nil {
			return nil, err
		}
		if subtle.ConstantTimeCompare(v, raw) != 1 {
			return v, nil
		}
	}
	return nil, agentvault.Errorf(agentvault.CodeSubstitution, "no stand-in distinct from the real %s exists (%d bytes)", field, len(raw))
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// LuhnValid reports whether a digit string passes the Luhn check.
func LuhnValid(b []byte) bool {
	if len(b) == 0 || !allDigits(b) {
		return false
	}
	sum := 0
	for i := len(b) - 1; i >= 0; i-- {
		sum += luhnDigit(int(b[i]-'0'), (len(b)-1-i)%2 == 1)
	}
	return sum%10 == 0
}

func luhnDigit(d int, double bool) int {
	if !double {
		return d
	}
	d *= 2
	if d > 9 {
		d -= 9
	}
	return d
}

func cardStandIn(real []byte, r *randBytes) ([]byte, error) {
	n := len(real)
	out := slices.Clone(real)
	mid, err := r.digits(n - 10)
	if err != nil {
		return nil, err
	}
	copy(out[6:], mid)
	// out[6] is the fixer: choose it so the whole number passes Luhn.
	// Doubling is a bijection on digits mod 10, so exactly one works.
	double := (n-1-6)%2 == 1
	sum := 0
	for i := n - 1; i >= 0; i-- {
		if i != 6 {
			sum += luhnDigit(int(out[i]-'0'), (n-1-i)%2 == 1)
		}
	}
	for d := range 10 {
		if (sum+luhnDigit(d, double))%10 == 0 {
			out[6] = byte('0' + d)
			break
		}
	}
	return out, nil
}

const (
	classLower = iota
	classUpper
	classDigit
	classSymbol
)

func passwordShape(raw []byte) (classes []byte, symbols []byte, err error) {
	if len(raw) == 0 {
		return nil, nil, agentvault.Errorf(agentvault.CodeInvalidInput, "empty password")
	}
	classes = make([]byte, len(raw))
	var seen [128]bool
	for i, c := range raw {
		switch {
		case c >= 'a' && c <= 'z':
			classes[i] = classLower
		case c >= 'A' && c <= 'Z':
			classes[i] = classUpper
		case c >= '0' && c <= '9':
			classes[i] = classDigit
		case c >= 0x20 && c < 0x7f:
			classes[i] = classSymbol
			if !seen[c] {
				seen[c] = true
				symbols = append(symbols, c)
			}
		default:
			// Bytes outside printable ASCII (UTF-8, controls) have no class
			// to draw from without copying real bytes into the stand-in.
			return nil, nil, agentvault.Errorf(agentvault.CodeInvalidInput, "password has bytes outside printable ASCII (%d bytes); no stand-in", len(raw))
		}
	}
	return classes, symbols, nil
}

func passwordStandIn(classes, symbols []byte, r *randBytes) ([]byte, error) {
	out := make([]byte, len(classes))
	for i, c := range classes {
		var set string
		switch c {
		case classLower:
			set = "abcdefghijklmnopqrstuvwxyz"
		case classUpper:
			set = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		case classDigit:
			set = "0123456789"
		default:
			set = string(symbols)
		}
		k, err := r.intn(len(set))
		if err != nil {
			return nil, err
		}
		out[i] = set[k]
	}
	return out, nil
}

// randBytes draws uniform small integers from a byte stream by rejection.
type randBytes struct {
	r   io.Reader
	buf [64]byte
	n   int // unread bytes at the end of buf
}

func (r *randBytes) byte() (byte, error) {
	if r.n == 0 {
		if _, err := io.ReadFull(r.r, r.buf[:]); err != nil {
			return 0, agentvault.Wrap(agentvault.CodeInternal, err, "random source failed")
		}
		r.n = len(r.buf)
	}
	r.n--
	return r.buf[r.n], nil
}

func (r *randBytes) intn(n int) (int, error) {
	if n <= 0 || n > 256 {
		return 0, agentvault.Errorf(agentvault.CodeInternal, "intn(%d) out of range", n)
	}
	limit := 256 - 256%n
	for {
		b, err := r.byte()
		if err != nil {
			return 0, err
		}
		if int(b) < limit {
			return int(b) % n, nil
		}
	}
}

func (r *randBytes) digits(n int) ([]byte, error) {
	out := make([]byte, n)
	for i := range out {
		d, err := r.intn(10)
		if err != nil {
			return nil, err
		}
		out[i] = byte('0' + d)
	}
	return out, nil
}

// WholeFieldMaxLen is the longest value a Session marks WholeField: shorter
// values (CVVs, TOTP codes, short PINs) occur by chance inside unrelated
// numbers and are only trusted as a whole field.
const WholeFieldMaxLen = 7

// Session tracks what one browser session was given: the token strings and
// stand-ins the proxy must recognise on the way out, each mapped to the
// caller's binding id (an item and field the proxy resolves). Stand-ins are
// stable per binding, unique within the session, and never equal a real
// value the session has seen. Safe for concurrent use.
type Session struct {
	mu      sync.Mutex
	rnd     io.Reader
	macKey  [32]byte
	byValue map[string]int    // token or stand-in bytes → binding
	issued  map[int][]byte    // binding → its stand-in
	reals   map[[32]byte]bool // HMAC of each real value seen, never the value
}

// NewSession starts an empty session. rnd defaults to crypto/rand.
func NewSession(rnd io.Reader) (*Session, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	s := &Session{rnd: rnd, byValue: map[string]int{}, issued: map[int][]byte{}, reals: map[[32]byte]bool{}}
	if _, err := io.ReadFull(rand.Reader, s.macKey[:]); err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "random source failed")
	}
	return s, nil
}

func (s *Session) realMAC(b []byte) [32]byte {
	m := hmac.New(sha256.New, s.macKey[:])
	m.Write(b)
	var out [32]byte
	m.Sum(out[:0])
	return out
}

// Bind records that value (a token string) names binding. Binding the same
// value to another binding is a conflict.
func (s *Session) Bind(value []byte, binding int) error {
	if len(value) == 0 {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "empty value")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.byValue[string(value)]; ok && b != binding {
		return agentvault.Errorf(agentvault.CodeConflict, "value already bound in this session")
	}
	s.byValue[string(value)] = binding
	return nil
}

// Issue returns the stand-in for binding, making one for field from real the
// first time. The stand-in differs from real, from every real value given to
// this session before, and from every other token or stand-in of the session.
func (s *Session) Issue(binding int, field item.Field, real item.Secret) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.issued[binding]; ok {
		return slices.Clone(v), nil
	}
	s.reals[s.realMAC(real.InsecureRawBytes())] = true
	v, err := StandInUnlike(field, real, s.rnd, func(v []byte) bool {
		_, taken := s.byValue[string(v)]
		return taken || s.reals[s.realMAC(v)]
	})
	if err != nil {
		return nil, err
	}
	s.byValue[string(v)] = binding
	s.issued[binding] = v
	return slices.Clone(v), nil
}

// StandInUnlike is StandIn drawn again while taken reports the candidate
// in use (another stand-in or token of the caller's session), up to a
// bound. Session.Issue uses it; a caller keeping its own session table
// passes its own taken.
func StandInUnlike(field item.Field, real item.Secret, rnd io.Reader, taken func([]byte) bool) ([]byte, error) {
	for range maxAttempts {
		v, err := StandIn(field, real, rnd)
		if err != nil {
			return nil, err
		}
		if taken == nil || !taken(v) {
			return v, nil
		}
	}
	return nil, agentvault.Errorf(agentvault.CodeSubstitution, "no unique %s stand-in left in this session", field)
}

// Lookup returns the binding a token or stand-in names.
func (s *Session) Lookup(value []byte) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.byValue[string(value)]
	return b, ok
}

// Patterns returns every token and stand-in of the session as matcher
// patterns, ID = binding, sorted by value; values of at most
// WholeFieldMaxLen bytes are WholeField.
func (s *Session) Patterns() []Pattern {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := make([]Pattern, 0, len(s.byValue))
	for v, b := range s.byValue {
		ps = append(ps, Pattern{Value: []byte(v), ID: b, WholeField: len(v) <= WholeFieldMaxLen})
	}
	slices.SortFunc(ps, func(a, b Pattern) int { return slices.Compare(a.Value, b.Value) })
	return ps
}
