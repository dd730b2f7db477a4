package leakcheck

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// findIn reports the first form of cn found in data read as kind.
func findIn(kind Kind, cn Canary, data []byte) (Finding, bool) {
	if !cn.Short() {
		return findLong(kind, cn, data)
	}
	switch kind {
	case Logs:
		return eachLine(data, func(line []byte) (Finding, bool) { return shortInLogLine(cn, line) })
	case Answer:
		return shortInAnswer(cn, data)
	case Text:
		return shortDelimited(cn, data)
	case Metrics:
		return eachLine(data, func(line []byte) (Finding, bool) { return shortInMetricLine(cn, line) })
	}
	return Finding{}, false
}

// findLong looks for every form of a long canary in the raw bytes, and in
// the decoded strings of structured output (a logfmt or JSON escape may
// hide a value that is plainly there once read).
func findLong(kind Kind, cn Canary, data []byte) (Finding, bool) {
	for _, f := range cn.forms {
		if at := bytes.Index(data, f.b); at >= 0 {
			return Finding{Form: f.how, At: at}, true
		}
	}
	var strs func(line []byte) []string
	switch kind {
	case Logs:
		strs = func(line []byte) []string {
			vals, _ := logValues(line)
			var out []string
			for _, v := range vals {
				out = append(out, v.s)
			}
			return out
		}
	case Answer:
		if v, ok := jsonDoc(data); ok {
			var out []string
			walkStrings(v, "", func(_, s string) { out = append(out, s) })
			return longInStrings(cn, out, 0)
		}
		return Finding{}, false
	default:
		return Finding{}, false
	}
	return eachLine(data, func(line []byte) (Finding, bool) { return longInStrings(cn, strs(line), 0) })
}

func longInStrings(cn Canary, strs []string, at int) (Finding, bool) {
	for _, s := range strs {
		for _, f := range cn.forms {
			if strings.Contains(s, string(f.b)) {
				return Finding{Form: f.how + " (decoded)", At: at}, true
			}
		}
	}
	return Finding{}, false
}

// eachLine runs fn on each line of data and fixes up the offset.
func eachLine(data []byte, fn func(line []byte) (Finding, bool)) (Finding, bool) {
	off := 0
	for len(data) > 0 {
		line, rest, _ := bytes.Cut(data, []byte("\n"))
		if f, ok := fn(line); ok {
			f.At += off
			return f, true
		}
		off += len(line) + 1
		data = rest
	}
	return Finding{}, false
}

// bounded reports whether form occurs in s as a whole field: not glued to a
// letter or digit, nor joined to one by '.', '-' or '_' (an identifier, a
// host name, a decimal, a date, an id), nor by ',' or ':' between digits (a
// thousands separator, a clock time). "1.737ms", "41737", "s_737x",
// "2026-07-37" and "1,737" hold no whole "737"; "cvc=737&", `"737"`,
// "code 737." and "737" alone do.
func bounded(s, form string) int {
	if form == "" {
		return -1
	}
	for i := 0; ; {
		j := strings.Index(s[i:], form)
		if j < 0 {
			return -1
		}
		j += i
		end := j + len(form)
		if leftFree(s, j, form[0]) && rightFree(s, end, form[len(form)-1]) {
			return j
		}
		i = j + 1
	}
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// joins reports whether sep between a and b makes one token of them.
func joins(a, sep, b byte) bool {
	switch sep {
	case '.', '-', '_':
		return isAlnum(a) && isAlnum(b)
	case ',', ':':
		return isDigit(a) && isDigit(b)
	}
	return false
}

func leftFree(s string, j int, first byte) bool {
	if j == 0 || !isAlnum(first) {
		return true
	}
	if isAlnum(s[j-1]) {
		return false
	}
	return !(j >= 2 && joins(s[j-2], s[j-1], first))
}

func rightFree(s string, end int, last byte) bool {
	if end == len(s) || !isAlnum(last) {
		return true
	}
	if isAlnum(s[end]) {
		return false
	}
	return !(end+1 < len(s) && joins(last, s[end], s[end+1]))
}

func shortInString(cn Canary, s string) (string, bool) {
	for _, f := range cn.forms {
		if bounded(s, string(f.b)) >= 0 {
			return f.how, true
		}
	}
	return "", false
}

// delimiters are the contexts a short value has as a whole field in free
// text: quoted, an element's text, a form or query value, a snapshot's
// "textbox: value", a line of its own (rendered text, a multipart part).
var delimiters = [][2]string{
	{`"`, `"`}, {`'`, `'`}, {`\"`, `\"`}, {`>`, `<`}, {`=`, `&`}, {`=`, "\n"}, {`=`, "\r"}, {`: `, "\n"},
	{"\n", "\n"}, {"\n", "\r"},
}

// quotes are the delimiters left for a log line that is not structured: in
// one, "ms=737" at the end of a line is a measurement.
var quotes = delimiters[:4]

// shortDelimited finds a short canary in free text only in a delimited form.
func shortDelimited(cn Canary, data []byte) (Finding, bool) {
	for _, f := range cn.forms {
		for _, d := range delimiters {
			if at := bytes.Index(data, []byte(d[0]+string(f.b)+d[1])); at >= 0 {
				return Finding{Form: f.how + " " + d[0] + "…" + d[1], At: at}, true
			}
		}
		// At the very end, after '=' or ": ".
		for _, pre := range []string{"=", ": "} {
			if bytes.HasSuffix(data, []byte(pre+string(f.b))) {
				return Finding{Form: f.how + " " + pre + "… at the end", At: len(data) - len(f.b)}, true
			}
		}
	}
	return Finding{}, false
}

// logValue is one attribute of a structured log line.
type logValue struct {
	key, s string
	// measured: a number the program wrote (a JSON number, an unquoted
	// numeric logfmt value), never read for short canaries.
	measured bool
}

// handlerKeys are the attributes the slog handler itself writes.
var handlerKeys = map[string]bool{"time": true, "level": true, "source": true}

// logValues reads a slog JSON or logfmt line; ok is false for anything else.
func logValues(line []byte) ([]logValue, bool) {
	t := bytes.TrimSpace(line)
	if len(t) == 0 {
		return nil, false
	}
	if t[0] == '{' {
		v, ok := jsonDoc(t)
		if !ok {
			return nil, false
		}
		var out []logValue
		walkStrings(v, "", func(key, s string) {
			if !handlerKeys[key] {
				out = append(out, logValue{key: key, s: s})
			}
		})
		return out, true
	}
	return logfmt(string(t))
}

// measuredRe is an unquoted logfmt value slog writes for an int, a float
// or a time.Duration (ms=737, dur=1.5ms, d=2m3.5s).
var measuredRe = regexp.MustCompile(`^[-+]?[0-9][0-9.eE+-]*([a-zµ]+[0-9.]*)*$`)

// logfmt parses key=value pairs as slog's TextHandler writes them: values
// that need quoting are Go-quoted.
func logfmt(s string) ([]logValue, bool) {
	var out []logValue
	for len(s) > 0 {
		s = strings.TrimLeft(s, " ")
		if s == "" {
			break
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 || strings.ContainsAny(s[:eq], " \"") {
			return nil, false
		}
		key := s[:eq]
		s = s[eq+1:]
		var val string
		quoted := strings.HasPrefix(s, `"`)
		if quoted {
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return nil, false
			}
			val, _ = strconv.Unquote(q)
			s = s[len(q):]
			if s != "" && s[0] != ' ' {
				return nil, false
			}
		} else {
			end := strings.IndexByte(s, ' ')
			if end < 0 {
				end = len(s)
			}
			val, s = s[:end], s[end:]
		}
		if handlerKeys[key] {
			continue
		}
		out = append(out, logValue{key: key, s: val, measured: !quoted && measuredRe.MatchString(val)})
	}
	return out, len(out) > 0
}

func shortInLogLine(cn Canary, line []byte) (Finding, bool) {
	vals, ok := logValues(line)
	if !ok {
		for _, f := range cn.forms {
			for _, d := range quotes {
				if at := bytes.Index(line, []byte(d[0]+string(f.b)+d[1])); at >= 0 {
					return Finding{Form: f.how + " " + d[0] + "…" + d[1] + " in an unstructured line", At: at}, true
				}
			}
		}
		return Finding{}, false
	}
	for _, v := range vals {
		if v.measured {
			continue
		}
		if how, ok := shortInString(cn, v.s); ok {
			return Finding{Form: how + " in attribute " + v.key}, true
		}
	}
	return Finding{}, false
}

// jsonDoc decodes data as one JSON object or array, numbers kept as numbers.
func jsonDoc(data []byte) (any, bool) {
	t := bytes.TrimSpace(data)
	if len(t) == 0 || t[0] != '{' && t[0] != '[' {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, false
	}
	return v, true
}

// walkStrings calls fn with every string value in v and the key it sits
// under (a top-level key for the handler's own attributes).
func walkStrings(v any, key string, fn func(key, s string)) {
	switch v := v.(type) {
	case string:
		fn(key, v)
	case map[string]any:
		for k, x := range v {
			if key != "" {
				k = key + "." + k
			}
			walkStrings(x, k, fn)
		}
	case []any:
		for _, x := range v {
			walkStrings(x, key, fn)
		}
	}
}

// blobRe is a string that is an encoding of bytes (an image's base64), not
// text: a short value inside it is noise, and a long one is found by its
// base64 forms.
var blobRe = regexp.MustCompile(`^[A-Za-z0-9+/_-]{64,}={0,2}$`)

func shortInAnswer(cn Canary, data []byte) (Finding, bool) {
	if v, ok := jsonDoc(data); ok {
		var f Finding
		found := false
		walkStrings(v, "", func(key, s string) {
			if found || blobRe.MatchString(s) {
				return
			}
			if how, ok := shortInString(cn, s); ok {
				f, found = Finding{Form: how + " in field " + key}, true
			}
		})
		return f, found
	}
	if blobRe.Match(bytes.TrimSpace(data)) {
		return Finding{}, false
	}
	for _, fm := range cn.forms {
		if at := bounded(string(data), string(fm.b)); at >= 0 {
			return Finding{Form: fm.how + " as a whole word", At: at}, true
		}
	}
	return Finding{}, false
}

// shortInMetricLine reads one line of the Prometheus text format: label
// values are data; bucket bounds (le, quantile) and sample values are
// numbers of the code.
func shortInMetricLine(cn Canary, line []byte) (Finding, bool) {
	s := string(bytes.TrimSpace(line))
	if s == "" || s[0] == '#' {
		return Finding{}, false
	}
	open := strings.IndexByte(s, '{')
	if open < 0 {
		return Finding{}, false
	}
	s = s[open+1:]
	for {
		s = strings.TrimLeft(s, ", ")
		eq := strings.IndexByte(s, '=')
		if eq <= 0 || len(s) < eq+2 || s[eq+1] != '"' {
			return Finding{}, false
		}
		name := s[:eq]
		q, err := strconv.QuotedPrefix(s[eq+1:])
		if err != nil {
			// Prometheus escapes only \\, \" and \n: a Go-quoted prefix
			// fails only on a malformed line.
			return shortDelimited(cn, line)
		}
		val, _ := strconv.Unquote(q)
		if name != "le" && name != "quantile" {
			if how, ok := shortInString(cn, val); ok {
				return Finding{Form: how + " in label " + name}, true
			}
		}
		s = s[eq+1+len(q):]
		if strings.HasPrefix(s, "}") || s == "" {
			return Finding{}, false
		}
	}
}
