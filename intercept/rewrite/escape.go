package rewrite

// unhex reports the value of one hex digit.
func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// percentDecode decodes %XX escapes (and '+' as a space when plus is set).
// Unlike url.QueryUnescape it never fails: a '%' not followed by two hex
// digits stays as it is. Servers differ on such input, and a token hidden
// behind one valid escape must still be found, so decoding is lenient and the
// value is re-encoded canonically only if it changes. It returns s itself when
// there is nothing to decode.
func percentDecode(s []byte, plus bool) []byte {
	needs := false
	for _, c := range s {
		if c == '%' || (plus && c == '+') {
			needs = true
			break
		}
	}
	if !needs {
		return s
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%' && i+2 < len(s):
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				out = append(out, hi<<4|lo)
				i += 2
				continue
			}
			out = append(out, c)
		case c == '+' && plus:
			out = append(out, ' ')
		default:
			out = append(out, c)
		}
	}
	return out
}
