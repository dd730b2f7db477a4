package control_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
)

// fakeControl is a tiny real HTTP server answering the control API so the
// client's encoding, paths and error decoding are exercised end to end.
func fakeControl(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	auth := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer tok" {
				w.WriteHeader(http.StatusUnauthorized)
				_ = json.NewEncoder(w).Encode(control.ErrorBody{Code: "unauthorized", Message: "bad control token"})
				return
			}
			h(w, r)
		}
	}
	mux.HandleFunc("POST /v1/sessions", auth(func(w http.ResponseWriter, r *http.Request) {
		var req control.CreateSessionRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.APIKey != "avk_good" {
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(control.ErrorBody{Code: "invalid_api_key", Message: "unknown API key"})
			return
		}
		_ = json.NewEncoder(w).Encode(control.CreateSessionResponse{ID: "s_1", ProxyUser: "s_1", ProxyPassword: "pw"})
	}))
	mux.HandleFunc("GET /v1/catalog", auth(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"url":` + jsonString(r.URL.Query().Get("url")) + `}`))
	}))
	mux.HandleFunc("POST /v1/sessions/{id}/authorize", auth(func(w http.ResponseWriter, r *http.Request) {
		var req control.AuthorizeRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.OrderTotal == nil || req.OrderTotal.Amount != "12.34" {
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(control.ErrorBody{Code: "amount_unknown", Message: "no total"})
			return
		}
		_ = json.NewEncoder(w).Encode(control.AuthorizeResponse{Value: "4111", Kind: "card", Field: "number", StandIn: true})
	}))
	mux.HandleFunc("POST /v1/sessions/{id}/events", auth(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{}`))
	}))
	mux.HandleFunc("GET /v1/sessions/{id}/report", auth(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(control.Report{DeniedCount: 2, FilledFieldKinds: []string{"card"}})
	}))
	mux.HandleFunc("DELETE /v1/sessions/{id}", auth(func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "s_1" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte("not json"))
			return
		}
		_ = json.NewEncoder(w).Encode(control.CloseResponse{Status: "Session closed", Report: control.Report{DeniedCount: 2}})
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

func TestClientRoundTrips(t *testing.T) {
	srv := fakeControl(t)
	ctx := context.Background()
	c := control.NewClient(srv.URL+"/", "tok", nil)

	s, err := c.CreateSession(ctx, "avk_good")
	if err != nil || s.ID != "s_1" || s.ProxyPassword != "pw" {
		t.Fatalf("CreateSession = %+v, %v", s.ID, err)
	}
	cat, err := c.Catalog(ctx, "avk_good", "https://shop.example/a?b=c")
	if err != nil || string(cat) != `{"url":"https://shop.example/a?b=c"}` {
		t.Fatalf("Catalog = %s, %v", cat, err)
	}
	a, err := c.Authorize(ctx, "s_1", control.AuthorizeRequest{Token: "av_card_1_number_abcde", PageURL: "https://shop.example/",
		OrderTotal: &control.OrderTotal{Amount: "12.34", Currency: "EUR"}})
	if err != nil || !a.StandIn || a.Kind != "card" {
		t.Fatalf("Authorize = %+v, %v", a.Kind, err)
	}
	if err := c.Event(ctx, "s_1", control.EventRequest{Type: control.EventFill, Kinds: []string{"address"}}); err != nil {
		t.Fatal(err)
	}
	r, err := c.Report(ctx, "s_1")
	if err != nil || r.DeniedCount != 2 {
		t.Fatalf("Report = %+v, %v", r, err)
	}
	cl, err := c.CloseSession(ctx, "s_1")
	if err != nil || cl.Status != "Session closed" || cl.Report.DeniedCount != 2 {
		t.Fatalf("CloseSession = %+v, %v", cl, err)
	}
}

func TestClientDecodesErrors(t *testing.T) {
	srv := fakeControl(t)
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
		code agentvault.Code
	}{
		{"bad bearer", func() error {
			_, err := control.NewClient(srv.URL, "nope", nil).Report(ctx, "s_1")
			return err
		}, agentvault.CodeUnauthorized},
		{"bad api key", func() error {
			_, err := control.NewClient(srv.URL, "tok", nil).CreateSession(ctx, "avk_bad")
			return err
		}, agentvault.CodeInvalidAPIKey},
		{"coded 403", func() error {
			_, err := control.NewClient(srv.URL, "tok", nil).Authorize(ctx, "s_1", control.AuthorizeRequest{Token: "x"})
			return err
		}, agentvault.CodeAmountUnknown},
		{"non-json 404", func() error {
			_, err := control.NewClient(srv.URL, "tok", nil).CloseSession(ctx, "s_2")
			return err
		}, agentvault.CodeNotFound},
		{"unreachable", func() error {
			_, err := control.NewClient("http://127.0.0.1:1", "tok", nil).Report(ctx, "s_1")
			return err
		}, agentvault.CodeUpstream},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var ae *agentvault.Error
			if !errors.As(err, &ae) || ae.Code != tt.code {
				t.Fatalf("err = %v, want code %s", err, tt.code)
			}
		})
	}
}

func TestClientPendingAndWait(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sessions/{id}/authorize", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"pending":true,"waitId":"apr_1","kind":"new_destination","reason":"new_destination","site":"shop.example","expiresAt":"2026-01-01T00:00:00Z"}`))
	})
	mux.HandleFunc("GET /v1/waits/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "apr_1" || r.URL.Query().Get("timeout") != "25s" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte(`{"status":"denied","waitId":"apr_1","code":"approval_denied","message":"the owner said no"}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := control.NewClient(srv.URL, "tok", nil)
	_, err := c.Authorize(context.Background(), "s_1", control.AuthorizeRequest{Token: "x", PageURL: "https://shop.example/"})
	p, ok := control.PendingOf(err)
	if agentvault.ErrorCode(err) != agentvault.CodeApprovalPending || !ok || p.WaitID != "apr_1" || p.Site != "shop.example" {
		t.Fatalf("pending: %v", err)
	}
	a, err := c.Wait(context.Background(), p.WaitID, 25*time.Second)
	if err != nil || a.Status != "denied" || a.Code != "approval_denied" {
		t.Fatalf("wait: %+v %v", a, err)
	}
}
