package intercept

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"html"
	"io"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/vault"
)

// pair is one needle and what replaces it.
type pair struct {
	from, to []byte
	kind     vault.Kind
	ref      *binding // request side: the binding hit; nil when scrubbing
}

// replacer finds needles leftmost-first, longest at a position. It is the
// proxy's own byte replacer for headers, URLs and bodies; package tokens'
// Aho-Corasick matcher replaces it once wired in.
type replacer struct {
	pairs  []pair
	maxLen int
}

func newReplacer(pairs []pair) *replacer {
	// Longest first so that at one position the longest needle wins.
	sort.SliceStable(pairs, func(i, j int) bool { return len(pairs[i].from) > len(pairs[j].from) })
	r := &replacer{pairs: pairs}
	for _, p := range pairs {
		r.maxLen = max(r.maxLen, len(p.from))
	}
	return r
}

// shortNeedle is the length under which a value (a CVV, a TOTP code) only
// matches between non-alphanumeric bytes: "737" must not be replaced inside
// "17375" or a Content-Length.
const shortNeedle = 6

func isWordByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// next finds the leftmost match in b[from:]. A short needle needs word
// boundaries; when one ends exactly at the end of a non-final buffer its
// boundary is unknown yet, and wait is the position to hold back from
// (-1 when nothing must wait).
//
// prev is the input byte just before b[0] (-1 at the start of the input).
func (r *replacer) next(b []byte, from int, final bool, prev int) (pos int, p *pair, wait int) {
	pos, wait = -1, -1
	for i := range r.pairs {
		q := &r.pairs[i]
		if len(q.from) == 0 {
			continue
		}
		for k := from; k < len(b); {
			j := bytes.Index(b[k:], q.from)
			if j < 0 {
				break
			}
			j += k
			if pos >= 0 && j >= pos {
				break
			}
			end := j + len(q.from)
			if len(q.from) < shortNeedle {
				if j > 0 && isWordByte(b[j-1]) || j == 0 && prev >= 0 && isWordByte(byte(prev)) {
					k = j + 1
					continue
				}
				if end == len(b) && !final {
					if wait < 0 || j < wait {
						wait = j
					}
					break
				}
				if end < len(b) && isWordByte(b[end]) {
					k = j + 1
					continue
				}
			}
			pos, p = j, q
			break
		}
	}
	if wait >= 0 && pos >= 0 && pos < wait {
		wait = -1
	}
	if wait >= 0 {
		pos, p = -1, nil
	}
	return pos, p, wait
}

// apply replaces every needle in b. hit is called for each match and
// returns the replacement, or refuses it (the whole rewrite then fails); a
// nil hit uses each pair's own replacement.
func (r *replacer) apply(b []byte, hit func(*pair) ([]byte, error)) ([]byte, int, error) {
	if r == nil || len(r.pairs) == 0 {
		return b, 0, nil
	}
	var out []byte
	n, i := 0, 0
	for i < len(b) {
		pos, p, _ := r.next(b, i, true, -1)
		if pos < 0 {
			break
		}
		pos -= i
		to := p.to
		if hit != nil {
			var err error
			if to, err = hit(p); err != nil {
				return nil, n, err
			}
		}
		out = append(out, b[i:i+pos]...)
		out = append(out, to...)
		i += pos + len(p.from)
		n++
	}
	if n == 0 {
		return b, 0, nil
	}
	return append(out, b[i:]...), n, nil
}

// reader scrubs a stream, holding back just enough bytes that a needle split
// across reads is still found.
type replaceReader struct {
	src     io.Reader
	r       *replacer
	hit     func(*pair)
	pending []byte
	prev    int // the input byte before pending[0], -1 at the start
	out     []byte
	buf     []byte
	eof     bool
	err     error
}

// reader scrubs src; hit (optional) observes each replacement.
func (r *replacer) reader(src io.Reader, hit func(*pair)) io.Reader {
	if r == nil || len(r.pairs) == 0 {
		return src
	}
	return &replaceReader{src: src, r: r, hit: hit, prev: -1}
}

func (rr *replaceReader) Read(p []byte) (int, error) {
	for len(rr.out) == 0 {
		if rr.err != nil {
			return 0, rr.err
		}
		if rr.eof {
			return 0, io.EOF
		}
		if rr.buf == nil {
			rr.buf = make([]byte, 32<<10)
		}
		n, err := rr.src.Read(rr.buf)
		rr.pending = append(rr.pending, rr.buf[:n]...)
		if err == io.EOF {
			rr.eof = true
		} else if err != nil {
			rr.err = err
			return 0, err
		}
		rr.process()
	}
	n := copy(p, rr.out)
	rr.out = rr.out[n:]
	return n, nil
}

func (rr *replaceReader) process() {
	i, waitAt := 0, -1
	for {
		pos, p, wait := rr.r.next(rr.pending, i, rr.eof, rr.prev)
		if wait >= 0 {
			rr.out = append(rr.out, rr.pending[i:wait]...)
			i, waitAt = wait, wait
			break
		}
		if pos < 0 {
			break
		}
		pos -= i
		if rr.hit != nil {
			rr.hit(p)
		}
		rr.out = append(rr.out, rr.pending[i:i+pos]...)
		rr.out = append(rr.out, p.to...)
		i += pos + len(p.from)
	}
	keep := 0
	if !rr.eof {
		keep = min(max(rr.r.maxLen-1, 1), len(rr.pending)-i)
		if waitAt >= 0 {
			keep = len(rr.pending) - waitAt
		}
	}
	rr.out = append(rr.out, rr.pending[i:len(rr.pending)-keep]...)
	if cut := len(rr.pending) - keep; cut > 0 {
		rr.prev = int(rr.pending[cut-1])
	}
	rr.pending = append(rr.pending[:0:0], rr.pending[len(rr.pending)-keep:]...)
}

// jsonEscape is s as it appears inside a JSON string.
func jsonEscape(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	out := strings.TrimSuffix(b.String(), "\n")
	return out[1 : len(out)-1]
}

// jsonEscapeHTML is s as encoding/json writes it by default (<, >, & as \u escapes).
func jsonEscapeHTML(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// jsonUEscape is s with every byte outside [A-Za-z] written as \u00XX, the
// way some clients escape digits and symbols.
func jsonUEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x80 && !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&15])
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// encodings lists the forms a value takes on the wire, each with the same
// transformation applied to its replacement.
var encodings = []func(string) string{
	func(s string) string { return s },
	url.QueryEscape,
	url.PathEscape,
	jsonEscape,
	jsonEscapeHTML,
	jsonUEscape,
	strings.ToUpper, // hex-ish or upper-cased forms of alphanumeric tokens
	html.EscapeString,
	func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) },
	func(s string) string { return base64.RawStdEncoding.EncodeToString([]byte(s)) },
	func(s string) string { return base64.URLEncoding.EncodeToString([]byte(s)) },
	func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) },
}

// grouped returns the card number in the groups people and pages print it
// in, joined by sep.
func grouped(s, sep string) string {
	if len(s) < 12 || !allDigits([]byte(s)) {
		return ""
	}
	var sizes []int
	if len(s) == 15 {
		sizes = []int{4, 6, 5}
	} else {
		for n := len(s); n > 0; n -= 4 {
			sizes = append(sizes, min(4, n))
		}
	}
	var parts []string
	i := 0
	for _, n := range sizes {
		parts = append(parts, s[i:i+n])
		i += n
	}
	return strings.Join(parts, sep)
}

// variantPairs expands from→to into every encoded form. Forms identical to
// one already listed, and forms whose needle would be ambiguous (shorter than
// 4 bytes in free text), are skipped.
func variantPairs(from, to string, kind vault.Kind, ref *binding) []pair {
	seen := map[string]bool{}
	var out []pair
	add := func(f, t string) {
		if f == "" || seen[f] || f == t {
			return
		}
		seen[f] = true
		out = append(out, pair{from: []byte(f), to: []byte(t), kind: kind, ref: ref})
	}
	for _, enc := range encodings {
		add(enc(from), enc(to))
	}
	for _, sep := range []string{" ", "-", "%20", "+", "&nbsp;", "\u00a0"} {
		if g := grouped(from, sep); g != "" {
			add(g, grouped(to, sep))
		}
	}
	return out
}

// tokenShape finds anything that looks like a mock token. Any left in a
// request after substitution is refused: a mock token never goes upstream.
var tokenShape = regexp.MustCompile(`(?i)av_(card|login|identity|address)_[a-z0-9._-]{1,64}?_(number|cvv|holder|email|username|password|totp|name|phone|line1|line2|city|region|postal_code|country)_[a-z0-9]{5}`)

// containsTokenShape reports whether b holds a token-shaped string. A cheap
// scan for the "av_" prefix in any letter case keeps the regexp off bodies
// that cannot match.
func containsTokenShape(b []byte) bool {
	for _, p := range [][]byte{[]byte("av_"), []byte("AV_"), []byte("Av_"), []byte("aV_")} {
		if bytes.Contains(b, p) {
			return tokenShape.Match(b)
		}
	}
	return false
}

func errTokenNotAllowed() error {
	return agentvault.Errorf(agentvault.CodeTokenNotAllowed, "the request carries a token this session has not authorized")
}
