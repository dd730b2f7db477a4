package intercept

import (
	"bytes"
	"net/http"
	"net/url"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/intercept/rewrite"
)

// The wire amount check (P18) is the broker's: broker.Release compares the
// amounts a request carries next to a card number with the total the
// number was authorized for, before the vault audits the number
// (policy/wireamount.go has the reading rules). The proxy's part is to hand
// it the request's fields as package rewrite visits them: the same walk of
// the same query and body bytes, with the same Content-Type and
// Content-Encoding, as the substitution, so both read one parse (issue 8: a
// second parser dropped every amount of a form holding "%zz" or ";" while
// the substitution went on). The walk runs only when a card number with an
// approved total is released (broker.WireFields), at most once a request.

func init() {
	for _, c := range []agentvault.Code{agentvault.CodeAmountMismatch, agentvault.CodeAmountUnknown, agentvault.CodeAmountUnconvertible} {
		knownCodes[c] = true
	}
}

// wireFields collects the fields package rewrite visits, as the broker's
// wire amount check reads them. It is a Replacer that replaces nothing.
type wireFields struct {
	fields []broker.WireField
	wants  func(broker.WireField) bool // nil: keep every field
}

func (w *wireFields) ReplaceField(dst, _ []byte) ([]byte, int, error) { return dst, 0, nil }
func (w *wireFields) ReplaceText(dst, _ []byte) ([]byte, int, error)  { return dst, 0, nil }

// VisitField keeps a copy (the walk reuses its buffers) of each field the
// check can read: free text, and the named values of a query, a form, a
// JSON document or a multipart part. With wants set it keeps only those
// the check can read anything from (broker.Broker.WireWants), which gives
// the same answer without copying a large field that cannot be an amount.
func (w *wireFields) VisitField(f rewrite.Field) {
	wf, ok := wireField(f)
	if !ok || w.wants != nil && !w.wants(wf) {
		return
	}
	wf.Value = bytes.Clone(wf.Value)
	w.fields = append(w.fields, wf)
}

// wireField is f as the wire amount check sees it; false for a field it
// never reads (a name, a path segment).
func wireField(f rewrite.Field) (broker.WireField, bool) {
	switch f.Source {
	case rewrite.SourceText:
		return broker.WireField{Value: f.Value, Group: f.Group, Text: true}, true
	case rewrite.SourceForm, rewrite.SourceQuery, rewrite.SourceJSON, rewrite.SourceMultipart:
	default:
		return broker.WireField{}, false
	}
	if f.Name || len(f.Path) == 0 {
		return broker.WireField{}, false
	}
	return broker.WireField{Key: f.Path[len(f.Path)-1], Value: f.Value, Group: f.Group,
		Pairs:  f.Source == rewrite.SourceForm || f.Source == rewrite.SourceQuery,
		Number: f.Source == rewrite.SourceJSON && f.Number}, true
}

var (
	_ rewrite.Replacer     = (*wireFields)(nil)
	_ rewrite.FieldVisitor = (*wireFields)(nil)
)

// wireRequest reads the fields of one request for the broker's wire
// amount check: its URL, its Content-Type and Content-Encoding as they were
// before substitution (requestWire), and body, its body as received. The
// walk runs once, on the first call of fields; a body rewrite cannot parse
// is an error, as it is for the substitution. It lives inside the
// request's substitution (one allocation for both): fields becomes a
// broker.WireFields only when a value is released.
type wireRequest struct {
	srv    *Server
	u      url.URL
	ct, ce string
	body   []byte
	done   bool
	fields []broker.WireField
	err    error
}

// requestWire takes the parts of req that fields reads, as they are now.
func (s *Server) requestWire(req *http.Request, body []byte) wireRequest {
	return wireRequest{srv: s, u: *req.URL, ct: req.Header.Get("Content-Type"), ce: req.Header.Get("Content-Encoding"), body: body}
}

// read is the request's broker.WireFields.
func (w *wireRequest) read() ([]broker.WireField, error) {
	if !w.done {
		w.done = true
		w.fields, w.err = walkWire(w.u, w.ct, w.ce, w.body, w.srv.cfg.MaxBodyBytes, w.srv.broker.WireWants)
	}
	return w.fields, w.err
}

// walkWire walks u's query and the body (of type ct, encoded ce) with
// package rewrite and returns the fields wants keeps (nil: every field the
// check reads).
func walkWire(u url.URL, ct, ce string, body []byte, limit int64, wants func(broker.WireField) bool) ([]broker.WireField, error) {
	wf := &wireFields{wants: wants}
	if _, err := rewrite.URL(&u, wf); err != nil {
		return nil, err
	}
	if len(body) > 0 {
		if _, _, err := rewrite.Body(ct, ce, body, wf, limit); err != nil {
			return nil, err
		}
	}
	return wf.fields, nil
}
