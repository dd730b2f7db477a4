package intercept

import (
	"net/http"
	"strconv"

	"github.com/agentvault/agentvault"
)

func httpStatus(code agentvault.Code) int { return agentvault.HTTPStatus(code) }

func errorBody(err error) []byte { return agentvault.ErrorJSON(err) }

// writeError answers an h2 stream (or any handler) with the coded error,
// as errorResponse does on the raw HTTP/1.1 paths.
func writeError(w http.ResponseWriter, err error) {
	body := errorBody(err)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set(agentvault.CodeHeader, string(agentvault.ErrorCode(err)))
	w.WriteHeader(httpStatus(agentvault.ErrorCode(err)))
	_, _ = w.Write(body)
}

// errorResponse builds a refusal as an *http.Response for the raw HTTP/1.1
// paths (CONNECT refusals, the tunnel loop). It always closes the connection.
func errorResponse(req *http.Request, err error) *http.Response {
	body := errorBody(err)
	status := httpStatus(agentvault.ErrorCode(err))
	resp := &http.Response{
		StatusCode:    status,
		Status:        strconv.Itoa(status) + " " + http.StatusText(status),
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{},
		ContentLength: int64(len(body)),
		Body:          nopBody(body),
		Close:         true,
		Request:       req,
	}
	resp.Header.Set("Content-Type", "application/json")
	resp.Header.Set(agentvault.CodeHeader, string(agentvault.ErrorCode(err)))
	resp.Header.Set("Connection", "close")
	return resp
}
