package vault

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base32"
	"encoding/binary"
	"hash"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// TOTP (RFC 6238) parameters a login may store in its metadata. The zero
// value of each means the RFC's and the authenticator apps' default.
const (
	TOTPDefaultAlgorithm = "SHA1"
	TOTPDefaultDigits    = 6
	TOTPDefaultPeriod    = 30 // seconds

	// Bounds on what a seed may ask for. RFC 4226 (section 5.3) allows 6 to
	// 8 digits; a key shorter than 80 bits (the common 16-character base32
	// seed) is refused, 128 bits or more are recommended (section 4, R6).
	totpMinDigits  = 6
	totpMaxDigits  = 8
	totpMinPeriod  = 1
	totpMaxPeriod  = 3600
	totpMinKeyLen  = 10
	totpMaxSeedLen = 512
)

// totpParams are the generator's settings, defaults filled in.
type totpParams struct {
	Algorithm string // "SHA1", "SHA256" or "SHA512"
	Digits    int
	Period    int // seconds
}

func defaultTOTPParams() totpParams {
	return totpParams{Algorithm: TOTPDefaultAlgorithm, Digits: TOTPDefaultDigits, Period: TOTPDefaultPeriod}
}

// withMeta applies the non-zero settings a login's metadata names.
func (p totpParams) withMeta(m *LoginMeta) totpParams {
	if m == nil {
		return p
	}
	return p.with(m.TOTPAlgorithm, m.TOTPDigits, m.TOTPPeriod)
}

// withSeed applies the non-zero settings an otpauth URI seed named.
func (p totpParams) withSeed(s parsedSeed) totpParams { return p.with(s.alg, s.digits, s.period) }

// with is the one rule for settings that override the defaults: each
// non-zero one replaces its default.
func (p totpParams) with(alg string, digits, period int) totpParams {
	if alg != "" {
		p.Algorithm = alg
	}
	if digits != 0 {
		p.Digits = digits
	}
	if period != 0 {
		p.Period = period
	}
	return p
}

func (p totpParams) valid() bool {
	return totpHash(p.Algorithm) != nil && p.Digits >= totpMinDigits && p.Digits <= totpMaxDigits &&
		p.Period >= totpMinPeriod && p.Period <= totpMaxPeriod
}

func totpHash(alg string) func() hash.Hash {
	switch alg {
	case "SHA1":
		return sha1.New
	case "SHA256":
		return sha256.New
	case "SHA512":
		return sha512.New
	}
	return nil
}

// errTOTPSeed is the one refusal of a seed; it never holds the seed (a
// url.Parse error would: its message quotes the URL, secret and all).
func errTOTPSeed() error {
	return invalid("TOTP seed must be a base32 key of at least 16 characters or an otpauth://totp/ URI")
}

// parsedSeed is a TOTP seed taken apart: the raw key, the base32 text to
// store, and the settings an otpauth URI named (zero when it named none).
type parsedSeed struct {
	key    []byte
	base32 []byte
	alg    string
	digits int
	period int
}

func (s parsedSeed) wipe() {
	wipe(s.key)
	wipe(s.base32)
}

// parseTOTPSeed accepts what authenticator set-up screens show: a base32
// key (any case, spaces, dashes and '=' padding ignored) or an
// otpauth://totp/LABEL?secret=...&algorithm=...&digits=...&period=... URI
// (the Key Uri Format of Google Authenticator). Counter-based otpauth://hotp
// is refused: the vault keeps no counter.
func parseTOTPSeed(raw []byte) (parsedSeed, error) {
	if len(raw) == 0 || len(raw) > totpMaxSeedLen {
		return parsedSeed{}, errTOTPSeed()
	}
	text := strings.TrimSpace(string(raw))
	if len(text) >= 10 && strings.EqualFold(text[:10], "otpauth://") {
		return parseOTPAuthURI(text)
	}
	return parseBase32Seed(text)
}

func parseBase32Seed(text string) (parsedSeed, error) {
	b := make([]byte, 0, len(text))
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c == ' ' || c == '-' || c == '=' || c == '\t':
		case c >= 'a' && c <= 'z':
			b = append(b, c-'a'+'A')
		default:
			b = append(b, c)
		}
	}
	key, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(string(b))
	if err != nil || len(key) < totpMinKeyLen {
		wipe(b)
		wipe(key)
		return parsedSeed{}, errTOTPSeed()
	}
	return parsedSeed{key: key, base32: b}, nil
}

func parseOTPAuthURI(text string) (parsedSeed, error) {
	u, err := url.Parse(text)
	if err != nil || !strings.EqualFold(u.Scheme, "otpauth") || !strings.EqualFold(u.Host, "totp") {
		return parsedSeed{}, errTOTPSeed()
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return parsedSeed{}, errTOTPSeed()
	}
	s, err := parseBase32Seed(q.Get("secret"))
	if err != nil {
		return parsedSeed{}, err
	}
	// Each setting the URI names is checked as given: an explicit 0 is
	// refused, not read as "the default".
	p := defaultTOTPParams()
	if a := q.Get("algorithm"); a != "" {
		s.alg = strings.ToUpper(a)
		p.Algorithm = s.alg
	}
	if d := q.Get("digits"); d != "" {
		if s.digits, err = strconv.Atoi(d); err != nil {
			s.wipe()
			return parsedSeed{}, errTOTPSeed()
		}
		p.Digits = s.digits
	}
	if d := q.Get("period"); d != "" {
		if s.period, err = strconv.Atoi(d); err != nil {
			s.wipe()
			return parsedSeed{}, errTOTPSeed()
		}
		p.Period = s.period
	}
	if !p.valid() {
		s.wipe()
		return parsedSeed{}, invalid("TOTP settings must be SHA1, SHA256 or SHA512, 6 to 8 digits and a period of 1 to 3600 seconds")
	}
	return s, nil
}

// totpCode is RFC 6238: HOTP (RFC 4226, section 5) over the number of
// periods since the Unix epoch, as p.Digits decimal digits.
func totpCode(key []byte, t time.Time, p totpParams) []byte {
	counter := uint64(t.Unix()) / uint64(p.Period)
	if t.Unix() < 0 {
		counter = 0
	}
	var msg [8]byte
	binary.BigEndian.PutUint64(msg[:], counter)
	mac := hmac.New(totpHash(p.Algorithm), key)
	mac.Write(msg[:])
	sum := mac.Sum(nil)
	off := sum[len(sum)-1] & 0x0f
	bin := binary.BigEndian.Uint32(sum[off:off+4]) & 0x7fffffff
	wipe(sum)
	mod := uint32(1)
	for range p.Digits {
		mod *= 10
	}
	code := []byte(strconv.FormatUint(uint64(bin%mod), 10))
	for len(code) < p.Digits {
		code = append([]byte{'0'}, code...)
	}
	return code
}

// TOTPCode is the RFC 6238 code of seed (a base32 key or an otpauth://totp/
// URI, as AddLogin accepts) at t. It is for checking a seed the caller
// already holds, e.g. in tests: the vault itself never hands a stored seed
// out, only Release's code of the moment.
func TOTPCode(seed Secret, t time.Time) (Secret, error) {
	s, err := parseTOTPSeed(seed.InsecureRawBytes())
	if err != nil {
		return Secret{}, err
	}
	defer s.wipe()
	return takeSecret(totpCode(s.key, t, defaultTOTPParams().withSeed(s))), nil
}
