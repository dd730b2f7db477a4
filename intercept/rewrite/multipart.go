package rewrite

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/textproto"
	"slices"
	"strings"

	agentvault "github.com/agentvault/agentvault"
)

// maxMultipartDepth bounds multipart parts nested inside multipart parts.
const maxMultipartDepth = 4

// Multipart rewrites a multipart body (multipart/form-data and the other
// multipart/* types) split on boundary. Part headers, preamble and epilogue
// are searched as text (a field or file name may hold a token). Each part's body is offered to the
// replacer as one whole field (a JSON part is walked as JSON, a nested
// multipart part recursively), after undoing a base64 or quoted-printable
// Content-Transfer-Encoding. Preamble, part headers, delimiters, line endings
// and epilogue are copied unchanged, so the output differs from the input only
// inside the bodies that changed.
//
// The body is split by hand (mime/multipart hides the raw bytes) following the
// same rules as mime/multipart, and then, because a server that splits the
// body differently from us would see values we never looked at, both the input
// and the output are parsed again with mime/multipart and must yield exactly
// the parts we rewrote. Anything else is refused.
func Multipart(boundary string, body []byte, r Replacer) ([]byte, int, error) {
	r, sr := withScratch(r)
	defer sr.release()
	return rewriteMultipart(boundary, body, r, 0)
}

type mpPart struct {
	hdrStart, bodyStart, bodyEnd int
}

// mpLayout is where things are in a multipart body: the preamble ends at
// the first delimiter line, the epilogue starts after the closing one.
type mpLayout struct {
	parts                      []mpPart
	preambleEnd, epilogueStart int
}

func malformedMultipart(why string) error {
	return agentvault.Errorf(agentvault.CodeMalformedRequest, "multipart body: %s", why)
}

func rewriteMultipart(boundary string, body []byte, r Replacer, depth int) ([]byte, int, error) {
	if depth > maxMultipartDepth {
		return nil, 0, malformedMultipart("nested too deeply")
	}
	if boundary == "" {
		return nil, 0, malformedMultipart("no boundary")
	}
	lay, err := splitMultipart(body, boundary)
	if err != nil {
		return nil, 0, err
	}
	parts := lay.parts
	if err := sameAsStdlib(body, boundary, parts, nil); err != nil {
		return nil, 0, err
	}
	// Edits in increasing position order.
	type edit struct {
		start, end int
		rep        []byte
	}
	var edits []edit
	total := 0
	vis, group := visitor(r), 0
	if vis != nil {
		group = vis.newGroup()
	}
	textEdit := func(start, end int) error {
		if vis != nil {
			vis.emit(Field{Source: SourceText, Group: vis.newGroup(), Value: body[start:end]})
		}
		rep, n, err := text(r, body[start:end])
		if n > 0 {
			edits = append(edits, edit{start, end, rep})
			total += n
		}
		return err
	}
	// Servers ignore the preamble and epilogue, but a token there would
	// still reach the site.
	if err := textEdit(0, lay.preambleEnd); err != nil {
		return nil, 0, err
	}
	newBodies := make([][]byte, len(parts))
	for i, p := range parts {
		// A field name or file name can carry a token too.
		rawHdr := body[p.hdrStart:p.bodyStart]
		if vis != nil {
			vis.emit(Field{Source: SourceText, Group: vis.newGroup(), Value: rawHdr})
		}
		hrep, hn, err := text(r, rawHdr)
		if err != nil {
			return nil, 0, err
		}
		if hn > 0 {
			if bytes.Count(hrep, []byte("\n")) != bytes.Count(rawHdr, []byte("\n")) {
				return nil, 0, agentvault.Errorf(agentvault.CodeSubstitution, "replacement does not fit in a multipart part header")
			}
			edits = append(edits, edit{p.hdrStart, p.bodyStart, hrep})
			total += hn
		}
		hdr, err := readPartHeader(rawHdr)
		if err != nil {
			return nil, 0, err
		}
		raw := body[p.bodyStart:p.bodyEnd]
		rep, n, err := rewritePart(hdr, raw, r, depth, group)
		if err != nil {
			return nil, 0, err
		}
		newBodies[i] = raw
		if n > 0 {
			newBodies[i] = rep
			edits = append(edits, edit{p.bodyStart, p.bodyEnd, rep})
			total += n
		}
	}
	if err := textEdit(lay.epilogueStart, len(body)); err != nil {
		return nil, 0, err
	}
	if total == 0 {
		return body, 0, nil
	}
	out := make([]byte, 0, len(body)+64)
	last := 0
	for _, e := range edits {
		out = append(out, body[last:e.start]...)
		out = append(out, e.rep...)
		last = e.end
	}
	out = append(out, body[last:]...)
	if err := sameAsStdlib(out, boundary, nil, newBodies); err != nil {
		return nil, 0, agentvault.Errorf(agentvault.CodeSubstitution, "rewritten multipart body no longer splits into the same parts")
	}
	return out, total, nil
}

func readPartHeader(b []byte) (textproto.MIMEHeader, error) {
	h, err := textproto.NewReader(bufio.NewReader(bytes.NewReader(b))).ReadMIMEHeader()
	if err != nil {
		return nil, malformedMultipart("unreadable part header")
	}
	return h, nil
}

func rewritePart(h textproto.MIMEHeader, raw []byte, r Replacer, depth, group int) ([]byte, int, error) {
	cte := strings.ToLower(strings.TrimSpace(h.Get("Content-Transfer-Encoding")))
	var decoded []byte
	switch cte {
	case "", "7bit", "8bit", "binary":
		decoded = raw
	case "base64":
		clean := bytes.Map(func(c rune) rune {
			if c == '\r' || c == '\n' || c == ' ' || c == '\t' {
				return -1
			}
			return c
		}, raw)
		d := make([]byte, base64.StdEncoding.DecodedLen(len(clean)))
		n, err := base64.StdEncoding.Decode(d, clean)
		if err != nil {
			return nil, 0, malformedMultipart("invalid base64 part")
		}
		decoded = d[:n]
	case "quoted-printable":
		d, err := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(raw)))
		if err != nil {
			return nil, 0, malformedMultipart("invalid quoted-printable part")
		}
		decoded = d
	default:
		return nil, 0, agentvault.Errorf(agentvault.CodeSubstitution, "multipart part has an unsupported Content-Transfer-Encoding")
	}

	var rep []byte
	var n int
	var err error
	if vis := visitor(r); vis != nil {
		// The part's name leads the path of whatever it holds.
		name := ""
		if _, params, perr := mime.ParseMediaType(h.Get("Content-Disposition")); perr == nil {
			name = params["name"]
		}
		saved := vis.prefix
		vis.prefix = append(slices.Clip(saved), name)
		rep, n, err = rewritePartBody(h.Get("Content-Type"), decoded, r, depth, group)
		vis.prefix = saved
	} else {
		rep, n, err = rewritePartBody(h.Get("Content-Type"), decoded, r, depth, group)
	}
	if err != nil || n == 0 {
		return nil, 0, err
	}
	switch cte {
	case "base64":
		rep = encodeBase64Lines(rep, lineEnding(raw))
	case "quoted-printable":
		var buf bytes.Buffer
		w := quotedprintable.NewWriter(&buf)
		w.Write(rep)
		w.Close()
		rep = buf.Bytes()
	}
	return rep, n, nil
}

func rewritePartBody(contentType string, b []byte, r Replacer, depth, group int) ([]byte, int, error) {
	if contentType != "" {
		mt, params, err := mime.ParseMediaType(contentType)
		if err == nil {
			switch {
			case isJSONType(mt):
				return JSON(b, r)
			case strings.HasPrefix(mt, "multipart/"):
				return rewriteMultipart(params["boundary"], b, r, depth+1)
			}
		}
	}
	if vis := visitor(r); vis != nil {
		vis.emit(Field{Source: SourceMultipart, Group: group, Value: b})
	}
	return field(r, b)
}

func lineEnding(raw []byte) string {
	if bytes.Contains(raw, []byte("\r\n")) || !bytes.Contains(raw, []byte("\n")) {
		return "\r\n"
	}
	return "\n"
}

func encodeBase64Lines(b []byte, nl string) []byte {
	enc := base64.StdEncoding.EncodeToString(b)
	var out []byte
	for len(enc) > 76 {
		out = append(out, enc[:76]...)
		out = append(out, nl...)
		enc = enc[76:]
	}
	return append(out, enc...)
}

// splitMultipart finds the parts of body the way mime/multipart's Reader
// does: the preamble is skipped up to the first delimiter line (whose line
// ending, CRLF or a bare LF, sets the mode), a part's header ends at its first
// empty line, and its body ends before the next line ending followed by
// "--boundary" and then a space, tab, CR, LF, "--" or the end of input.
func splitMultipart(b []byte, boundary string) (mpLayout, error) {
	dash := []byte("--" + boundary)
	nl := []byte("\r\n")
	pos := 0
	var lay mpLayout
	// The first delimiter line.
	for {
		line, next, ok := nextLine(b, pos)
		if isFinalLine(line, dash, nl) {
			lay.preambleEnd, lay.epilogueStart = pos, next
			return lay, nil
		}
		if !ok {
			return lay, malformedMultipart("no delimiter line")
		}
		if bytes.HasPrefix(line, dash) {
			rest := skipLWSP(line[len(dash):])
			if len(rest) == 1 && rest[0] == '\n' {
				nl = nl[1:]
			}
			if bytes.Equal(rest, nl) {
				lay.preambleEnd = pos
				pos = next
				break
			}
		}
		pos = next
	}
	nlDash := append(append([]byte{}, nl...), dash...)
	for {
		p := mpPart{hdrStart: pos}
		// Header: lines up to the first empty one.
		for {
			line, next, ok := nextLine(b, pos)
			if !ok {
				return lay, malformedMultipart("part header not terminated")
			}
			pos = next
			if len(line) == 1 || (len(line) == 2 && line[0] == '\r') {
				break
			}
		}
		p.bodyStart = pos
		// Body.
		if bytes.HasPrefix(b[pos:], dash) && matchAfter(b[pos:], len(dash)) {
			p.bodyEnd = pos
		} else {
			from := pos
			for {
				i := bytes.Index(b[from:], nlDash)
				if i < 0 {
					return lay, malformedMultipart("part not terminated")
				}
				i += from
				if matchAfter(b[i:], len(nlDash)) {
					p.bodyEnd = i
					break
				}
				from = i + len(nlDash)
			}
			// The line ending before the delimiter belongs to it.
			pos = p.bodyEnd + len(nl)
		}
		lay.parts = append(lay.parts, p)
		line, next, ok := nextLine(b, pos)
		if isFinalLine(line, dash, nl) {
			lay.epilogueStart = next
			return lay, nil
		}
		if !ok || !bytes.HasPrefix(line, dash) || !bytes.Equal(skipLWSP(line[len(dash):]), nl) {
			return lay, malformedMultipart("bad delimiter line")
		}
		pos = next
	}
}

// nextLine returns the line at pos including its LF, the position after it,
// and false when the input ends before an LF (line is then the remainder).
func nextLine(b []byte, pos int) (line []byte, next int, ok bool) {
	i := bytes.IndexByte(b[pos:], '\n')
	if i < 0 {
		return b[pos:], len(b), false
	}
	return b[pos : pos+i+1], pos + i + 1, true
}

func isFinalLine(line, dash, nl []byte) bool {
	if !bytes.HasPrefix(line, dash) || !bytes.HasPrefix(line[len(dash):], []byte("--")) {
		return false
	}
	rest := skipLWSP(line[len(dash)+2:])
	return len(rest) == 0 || bytes.Equal(rest, nl)
}

// matchAfter mirrors mime/multipart's matchAfterPrefix at the end of input.
func matchAfter(buf []byte, n int) bool {
	if len(buf) == n {
		return true
	}
	switch c := buf[n]; c {
	case ' ', '\t', '\r', '\n':
		return true
	case '-':
		return len(buf) > n+1 && buf[n+1] == '-'
	}
	return false
}

func skipLWSP(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

// sameAsStdlib checks that mime/multipart splits body into exactly the given
// part bodies (from parts, or bodies when parts is nil).
func sameAsStdlib(body []byte, boundary string, parts []mpPart, bodies [][]byte) error {
	if bodies == nil {
		bodies = make([][]byte, len(parts))
		for i, p := range parts {
			bodies[i] = body[p.bodyStart:p.bodyEnd]
		}
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	for _, want := range bodies {
		p, err := mr.NextRawPart()
		if err != nil {
			return malformedMultipart("parts do not split unambiguously")
		}
		got, err := io.ReadAll(p)
		if err != nil || !bytes.Equal(got, want) {
			return malformedMultipart("parts do not split unambiguously")
		}
	}
	if _, err := mr.NextRawPart(); err != io.EOF {
		return malformedMultipart("parts do not split unambiguously")
	}
	return nil
}
