package intercept

import (
	"net/http"
	"strconv"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
)

func httpStatus(code agentvault.Code) int { return control.HTTPStatus(code) }

func errorBody(err error) []byte { return control.ErrorJSON(err) }

func writeError(w http.ResponseWriter, err error) { control.WriteError(w, err) }

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
	resp.Header.Set("X-Agentvault-Code", string(agentvault.ErrorCode(err)))
	resp.Header.Set("Connection", "close")
	return resp
}
