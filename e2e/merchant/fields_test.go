package merchant

import (
	"net/http"
	"testing"
)

func TestSawFieldMatchesWholeFieldsOnly(t *testing.T) {
	const cvv = "417"
	cases := []struct {
		name string
		req  Request
		want bool
	}{
		{"form value", Request{Body: []byte("a=1&cvc=417"), Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}}, true},
		{"inside a postcode", Request{Body: []byte("postcode=94170&port=54173"), Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}}, false},
		{"json string", Request{Body: []byte(`{"card":{"cvc":"417"}}`), Header: http.Header{"Content-Type": {"application/json"}}}, true},
		{"json number", Request{Body: []byte(`{"cvc":417}`), Header: http.Header{"Content-Type": {"application/json"}}}, true},
		{"json inside a longer number", Request{Body: []byte(`{"amount":41700}`)}, false},
		{"query", Request{RawQuery: "x=1&cvc=417"}, true},
		{"header", Request{Header: http.Header{"X-Card-Cvc": {"417"}}}, true},
		{"the body's length", Request{Body: []byte("a=1"), Header: http.Header{"Content-Length": {"417"}}}, false},
		{"multipart boundary", Request{Body: []byte("--b417x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n9\r\n--b417x--\r\n"), Header: http.Header{"Content-Type": {"multipart/form-data; boundary=b417x"}}}, false},
		{"multipart part", Request{Body: []byte("--bx\r\nContent-Disposition: form-data; name=\"cvc\"\r\n\r\n417\r\n--bx--\r\n"), Header: http.Header{"Content-Type": {"multipart/form-data; boundary=bx"}}}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.req.Header == nil {
				c.req.Header = http.Header{}
			}
			if got := c.req.hasField(cvv); got != c.want {
				t.Fatalf("hasField = %v, want %v", got, c.want)
			}
		})
	}
}
