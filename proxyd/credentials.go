package proxyd

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/authz"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/credentials"
	"github.com/agentvault/agentvault/vault"
)

// Portal credentials (seed 003, docs/portal-credentials.md): the
// credentials service over the same store and vault, its control API calls
// for mcpd, and the credential-use listener where a skill's runtime POSTs
// its one-time token and gets the values, once.

// credentialAPI is the control API's credential part.
type credentialAPI struct {
	svc       *credentials.Service
	lookupKey func(ctx context.Context, apiKey string) (keyID string, err error)
	entryBase func() string // https://<dashboard>
	useURL    func() string // http://<credentials listener>/v1/credential-use, "" when off
}

func (m *Main) openCredentials(ctx context.Context, st appStore, v *vault.Vault) error {
	now := m.Now
	if now == nil {
		now = time.Now
	}
	// The dashboard accounts are the organisation's owners unless a
	// membership says otherwise, and the api-key file's key (in the data
	// directory, beside the master key) is the owner's: with one owner it
	// acts for them with no binding (P24, docs/portal-credentials.md).
	svc, err := credentials.New(credentials.Config{Store: st, Values: v, Now: now,
		Accounts: func(ctx context.Context, org string) ([]string, error) {
			if org != m.Owner.Org() {
				return nil, nil
			}
			all, err := st.ListAccounts(ctx)
			if err != nil {
				return nil, err
			}
			var out []string
			for _, a := range all {
				if a.Org == "" || a.Org == org {
					out = append(out, a.Email)
				}
			}
			return out, nil
		},
		DefaultKeyID: DefaultKeyID, DefaultKeyOrg: m.Owner.Org()})
	if err != nil {
		return err
	}
	m.Credentials = svc
	// listen bound it with the others, before anything was written.
	if m.credL != nil {
		m.CredentialsAddr = m.credL.Addr()
		m.credSrv = &http.Server{Handler: credentialUseHandler(svc, m.Logger), ReadHeaderTimeout: 5 * time.Second,
			ErrorLog: slog.NewLogLogger(m.Logger.Handler(), slog.LevelDebug)}
	}
	return nil
}

func (m *Main) credentialAPI() *credentialAPI {
	return &credentialAPI{
		svc: m.Credentials,
		lookupKey: func(ctx context.Context, apiKey string) (string, error) {
			k, err := m.lookupKey(ctx, apiKey)
			return k.ID, err
		},
		entryBase: func() string {
			if d := m.Config.Dashboard.Domain; d != "" {
				return "https://" + d
			}
			if m.DashboardAddr != nil {
				return "https://" + m.DashboardAddr.String()
			}
			return ""
		},
		useURL: func() string {
			if m.CredentialsAddr == nil {
				return ""
			}
			return "http://" + m.CredentialsAddr.String() + control.CredentialUsePath
		},
	}
}

// credentialUseRoute is the credential-use listener's one route.
const credentialUseRoute = "POST " + control.CredentialUsePath

// maxUseBody bounds the runtime's POST: a token and nothing else.
const maxUseBody = 4 << 10

// credentialUseHandler answers POST {"token"} with {name, values}, once.
// The token never travels in a URL (the use URL carries it after '#', which
// no client sends). Only JSON is accepted, so a web page cannot spend a
// token with a plain form post; no CORS header is ever sent, so no page can
// read an answer.
func credentialUseHandler(svc *credentials.Service, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	authz.MustLookup(authz.Control, credentialUseRoute) // the one-time token is the proof (Public)
	mux.HandleFunc(credentialUseRoute, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
			control.WriteError(w, agentvault.Errorf(agentvault.CodeInvalidInput, "POST {\"token\": \"...\"} as application/json"))
			return
		}
		var in control.CredentialUseRequest
		dec := json.NewDecoder(io.LimitReader(r.Body, maxUseBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			control.WriteError(w, agentvault.Errorf(agentvault.CodeInvalidInput, "POST {\"token\": \"...\"} as application/json"))
			return
		}
		red, err := svc.Redeem(r.Context(), in.Token)
		if err != nil {
			log.LogAttrs(r.Context(), slog.LevelWarn, "credential use refused", slog.String("code", string(agentvault.ErrorCode(err))))
			control.WriteError(w, err)
			return
		}
		defer func() {
			for _, cv := range red.Values {
				cv.Value.Wipe()
			}
		}()
		// The one place a value is written out: the runtime's answer.
		ans := control.CredentialUseAnswer{Name: red.Name, Values: make(map[string]string, len(red.Values))}
		for _, cv := range red.Values {
			ans.Values[string(cv.Field)] = string(cv.Value.InsecureRawBytes())
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ans)
		log.LogAttrs(r.Context(), slog.LevelInfo, "credential used", slog.Int("fields", len(red.Values)))
	})
	return mux
}

func (a *credentialAPI) principal(ctx context.Context, apiKey string) (credentials.Principal, error) {
	if a == nil || a.svc == nil {
		return credentials.Principal{}, agentvault.Errorf(agentvault.CodeNotFound, "credentials are not enabled on this appliance")
	}
	id, err := a.lookupKey(ctx, apiKey)
	if err != nil {
		return credentials.Principal{}, err
	}
	return a.svc.KeyPrincipal(ctx, id)
}

func (c *controlService) CredentialRequest(ctx context.Context, in control.CredentialRequestIn) (control.CredentialRequestOut, error) {
	p, err := c.creds.principal(ctx, in.APIKey)
	if err != nil {
		return control.CredentialRequestOut{}, err
	}
	base := c.creds.entryBase()
	if base == "" {
		return control.CredentialRequestOut{}, agentvault.Errorf(agentvault.CodeNotFound, "the dashboard is off (listen.dashboard), so there is no page to type values on")
	}
	iss, err := c.creds.svc.Request(ctx, p, credentials.RequestArgs{Name: in.Name, Fields: in.Fields, Visibility: credentials.Visibility(in.Visibility)})
	if err != nil {
		return control.CredentialRequestOut{}, err
	}
	return control.CredentialRequestOut{CredentialID: iss.Credential.ID, Name: iss.Credential.Name, Visibility: string(iss.Credential.Visibility),
		URL: base + "/credentials/enter/" + url.PathEscape(iss.Token), ExpiresAt: iss.Expires}, nil
}

func (c *controlService) CredentialList(ctx context.Context, apiKey string) (control.CredentialListOut, error) {
	p, err := c.creds.principal(ctx, apiKey)
	if err != nil {
		return control.CredentialListOut{}, err
	}
	list, err := c.creds.svc.List(ctx, p)
	if err != nil {
		return control.CredentialListOut{}, err
	}
	out := control.CredentialListOut{Credentials: []control.CredentialInfo{}}
	for _, l := range list {
		out.Credentials = append(out.Credentials, control.CredentialInfo{CredentialID: l.ID, Name: l.Name, Visibility: string(l.Visibility),
			Owner: l.Owner, Fields: l.Fields, HasValues: l.HasValues(), IsSelected: l.IsSelected})
	}
	return out, nil
}

func (c *controlService) CredentialUse(ctx context.Context, in control.CredentialUseIn) (control.CredentialUseOut, error) {
	p, err := c.creds.principal(ctx, in.APIKey)
	if err != nil {
		return control.CredentialUseOut{}, err
	}
	u := c.creds.useURL()
	if u == "" {
		return control.CredentialUseOut{}, agentvault.Errorf(agentvault.CodeNotFound, "the credential-use listener is off (listen.credentials)")
	}
	iss, err := c.creds.svc.Use(ctx, p, in.Name)
	if err != nil {
		return control.CredentialUseOut{}, err
	}
	return control.CredentialUseOut{CredentialID: iss.Credential.ID, Name: iss.Credential.Name,
		URL: u + "#" + iss.Token, ExpiresAt: iss.Expires}, nil
}

func (c *controlService) CredentialDelete(ctx context.Context, in control.CredentialDeleteIn) (control.DoneOut, error) {
	p, err := c.creds.principal(ctx, in.APIKey)
	if err != nil {
		return control.DoneOut{}, err
	}
	if err := c.creds.svc.Delete(ctx, p, strings.TrimSpace(in.CredentialID)); err != nil {
		return control.DoneOut{}, err
	}
	return control.DoneOut{Done: true}, nil
}

func (c *controlService) GrantSet(ctx context.Context, in control.GrantSetIn) (control.GrantSetOut, error) {
	p, err := c.creds.principal(ctx, in.APIKey)
	if err != nil {
		return control.GrantSetOut{}, err
	}
	g, err := c.creds.svc.SetGrant(ctx, p, in.CredentialID, in.Subject, in.Write)
	if err != nil {
		return control.GrantSetOut{}, err
	}
	return control.GrantSetOut{CredentialID: g.CredentialID, Subject: g.Subject, Write: g.Write}, nil
}
