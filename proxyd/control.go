package proxyd

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/apps"
	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/hostname"
	"github.com/agentvault/agentvault/intercept"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/recipes"
	"github.com/agentvault/agentvault/tokens"
)

// controlService is the control API (control.Service) over the broker, the
// MITM CA and the owner's approvals: the one place the broker's and the
// owner's answers become wire types.
type controlService struct {
	broker   *broker.Broker
	vault    broker.Vault // the items the catalog lists
	ca       *intercept.CA
	owner    *owner.Service
	recipes  *recipes.Registry
	proxyURL string
	creds    *credentialAPI // portal credentials (credentials.go)
	metrics  *daemonMetrics
	accounts *owner.Accounts // signups and login writes (accounts.go)
	// HandoffService serves the challenge hand-offs: the hub of package
	// handoff (wired in handoff.go).
	control.HandoffService
	apps  *apps.Registry // hosted sessions for the dashboard (apps.go)
	ended *endedReports  // final reports of ended sessions (apps.go)
	// emails reports whether the owner is emailed about approvals (nil:
	// never).
	emails func() bool
	// integrations is the shipped list merged with the owner's
	// (policy.payment_integrations).
	integrations *policy.Integrations
	// egress is the proxy's upstream egress (intercept.Server): whether
	// there is one, and which sessions lost it. nil: none.
	egress sessionEgress
	// egressGate refuses a new session while a required residential
	// egress is missing or not answering (egress.go); nil: never.
	egressGate *egressGate
}

// sessionEgress is what the control API reports of the proxy's upstream
// egress; the proxy (intercept) is the one home of both answers.
type sessionEgress interface {
	ResidentialEgress() bool
	EgressLost(sessionID string) bool
}

// PaymentIntegrations lists the integrations the proxy recognises, the
// owner's entries first, so mcpd refuses the same client-side-encryption
// frames (control.IntegrationsService).
func (c *controlService) PaymentIntegrations(context.Context) (json.RawMessage, error) {
	list := policy.ShippedIntegrations()
	if c.integrations != nil {
		list = c.integrations
	}
	b, err := json.Marshal(list.List())
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "payment integrations")
	}
	return b, nil
}

func (c *controlService) CreateSession(ctx context.Context, apiKey string) (control.CreateSessionResponse, error) {
	if err := c.egressGate.check(ctx); err != nil {
		// A key that is not valid hears that, not the deployment's state.
		if _, kerr := c.broker.LookupKey(ctx, apiKey); kerr != nil {
			return control.CreateSessionResponse{}, kerr
		}
		return control.CreateSessionResponse{}, err
	}
	s, pw, err := c.broker.Create(ctx, apiKey)
	if err != nil {
		return control.CreateSessionResponse{}, err
	}
	resp := control.CreateSessionResponse{ID: s.ID, ProxyURL: c.proxyURL, ProxyUser: s.ID, ProxyPassword: pw,
		CASPKI: c.ca.SPKIHash(), CAPEM: string(c.ca.CertPEM())}
	resp.ExpiresAt = time.Now().Add(c.broker.SessionMaxAge()).UTC()
	resp.ResidentialEgress = c.egress != nil && c.egress.ResidentialEgress()
	return resp, nil
}

// AuthenticateKey checks an agent's API key for the hosted MCP server, the
// way a session's key is checked (the api-key file's key or an owner's
// key, owner.Service.AuthenticateKey).
func (c *controlService) AuthenticateKey(ctx context.Context, apiKey string) (control.KeyInfo, error) {
	k, err := c.broker.LookupKey(ctx, apiKey)
	if err != nil {
		return control.KeyInfo{}, err
	}
	info := control.KeyInfo{ID: k.ID, Name: k.ID, AllCards: k.Scope.AllCards, CardIDs: k.Scope.CardIDs,
		AllLogins: k.Scope.AllLogins, LoginIDs: k.Scope.LoginIDs}
	info.AppUses, info.AppChosen = c.appUses(k.ID)
	return info, nil
}

func (c *controlService) Catalog(ctx context.Context, apiKey, pageURL string) (json.RawMessage, error) {
	key, err := c.broker.LookupKey(ctx, apiKey)
	if err != nil {
		return nil, err
	}
	items, err := c.vault.List(ctx, key.Org)
	if err != nil {
		return nil, err
	}
	return json.Marshal(tokens.BuildCatalog(items, tokens.CatalogArgs{Suffix: key.Suffix, URL: pageURL, Sees: key.Scope.Sees}))
}

func (c *controlService) Authorize(ctx context.Context, id string, req control.AuthorizeRequest) (control.AuthorizeResponse, error) {
	s, err := c.broker.Get(id)
	if err != nil {
		return control.AuthorizeResponse{}, err
	}
	breq, err := authorizeRequest(req)
	if err != nil {
		s.Denied()
		c.metrics.authorizeOutcome(err)
		return control.AuthorizeResponse{}, err
	}
	a, err := c.broker.Authorize(ctx, s, breq)
	resp := control.AuthorizeResponse{Value: a.Value, Kind: string(a.Kind), Field: string(a.Field), StandIn: a.StandIn}
	if ap, ok := owner.PendingOf(err); ok {
		p := &control.Pending{Pending: true, WaitID: ap.ID, Kind: string(ap.Kind), Reason: ap.Reason, Site: ap.Site,
			Amount: orderTotal(ap.Amount), ExpiresAt: ap.Expires, Email: c.emails != nil && c.emails()}
		err = agentvault.Wrap(agentvault.CodeApprovalPending, p, "waiting for the owner (%s)", ap.Reason)
		c.metrics.authorizeOutcome(err)
		return control.AuthorizeResponse{}, err
	}
	c.metrics.authorizeOutcome(err)
	return resp, err
}

func (c *controlService) Event(ctx context.Context, id string, ev control.EventRequest) error {
	s, err := c.broker.Get(id)
	if err != nil {
		return err
	}
	switch ev.Type {
	case control.EventConfirmation:
		if ev.Receipt != "" {
			if err := c.receipt(s, ev); err != nil {
				return err
			}
		}
		var total *broker.ShownTotal
		if ev.OrderTotal != nil {
			total = &broker.ShownTotal{Amount: ev.OrderTotal.Amount, Currency: ev.OrderTotal.Currency}
		}
		s.Confirmed(total)
	case control.EventFill:
		return s.Filled(ev.Kinds)
	case control.EventCredential:
		s.CredentialWritten(ev.Site)
	case control.EventLoginDiagnostic:
		return c.loginDiagnostic(s, ev)
	default:
		return agentvault.Errorf(agentvault.CodeInvalidInput, "unknown event type")
	}
	return nil
}

// loginDiagnostic hands the owner the reference of a capture browser_login
// kept (seed 000): the owner's Activity page lists it, and the log keeps
// it. Only a reference, a label and a host pass.
func (c *controlService) loginDiagnostic(s *broker.Session, ev control.EventRequest) error {
	if err := control.CheckLoginDiagnostic(ev); err != nil {
		return err
	}
	if ev.Login != "" && !tokens.ValidLabel(ev.Login) {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "a login diagnostic's login must be a catalog label")
	}
	site, err := hostname.Bare(ev.Site)
	if err != nil {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "a login diagnostic's site must be the sign-in page's host")
	}
	c.owner.RecordLoginDiagnostic(owner.LoginDiagnostic{APIKeyID: s.Key.ID, Session: s.ID, Login: ev.Login, Site: site,
		Outcome: ev.Outcome, Artifact: ev.Artifact})
	return nil
}

// receipt hands the owner the reference of the masked receipt image mcpd
// kept of a confirmation (seed 004): the Activity page lists it, the log
// keeps it. Only a reference and a host pass; a bad one refuses the whole
// event, so nothing of it is recorded.
func (c *controlService) receipt(s *broker.Session, ev control.EventRequest) error {
	if err := control.CheckReceipt(ev); err != nil {
		return err
	}
	site, err := hostname.Bare(ev.Site)
	if err != nil {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "a receipt's site must be the confirmation page's host")
	}
	c.owner.RecordReceipt(owner.Receipt{APIKeyID: s.Key.ID, Session: s.ID, Site: site, Artifact: ev.Receipt})
	return nil
}

func (c *controlService) Report(ctx context.Context, id string) (control.Report, error) {
	s, err := c.broker.Get(id)
	if err != nil {
		if rep, ok := c.ended.get(id); ok {
			// An ended session's final report, marked so mcpd knows its
			// connection is gone (open_page replaces it).
			out := reportOf(rep)
			out.Ended = true
			return out, nil
		}
		return control.Report{}, err
	}
	out := reportOf(s.Report())
	out.EgressLost = c.egress != nil && c.egress.EgressLost(s.ID)
	return out, nil
}

func (c *controlService) CloseSession(ctx context.Context, id string) (control.CloseResponse, error) {
	rep, err := c.broker.Close(id)
	if err != nil {
		// Already ended (expired, or the owner ended it): its final report.
		if kept, ok := c.ended.get(id); ok {
			return control.CloseResponse{Status: "Session closed", Report: reportOf(kept)}, nil
		}
		return control.CloseResponse{}, err
	}
	return control.CloseResponse{Status: "Session closed", Report: reportOf(rep)}, nil
}

// SessionKeyID is the API key that opened a session, live or ended (while
// its final report is kept), for the control API's calls an agent makes
// with its own key (docs/byob.md).
func (c *controlService) SessionKeyID(ctx context.Context, id string) (string, error) {
	if s, err := c.broker.Get(id); err == nil {
		return s.Key.ID, nil
	}
	if k, ok := c.ended.keyOf(id); ok {
		return k, nil
	}
	return "", agentvault.Errorf(agentvault.CodeNotFound, "no such session")
}

// WaitKeyID is the API key whose fill waits on an approval.
func (c *controlService) WaitKeyID(ctx context.Context, id string) (string, error) {
	a, err := c.owner.Approval(ctx, id)
	if err != nil || a.APIKeyID == "" {
		return "", agentvault.Errorf(agentvault.CodeNotFound, "no such wait")
	}
	return a.APIKeyID, nil
}

// authorizeRequest reads the control API's authorize into the broker's:
// the one translation, the checkout total parsed once (policy.ParseDecimal,
// the wire form's strict decimal).
func authorizeRequest(req control.AuthorizeRequest) (broker.AuthorizeRequest, error) {
	out := broker.AuthorizeRequest{Token: req.Token, PageURL: req.PageURL, FrameURL: req.FrameURL, CVVSpent: req.CVVSpent}
	if req.OrderTotal != nil {
		t, err := policy.ParseDecimal(req.OrderTotal.Amount, req.OrderTotal.Currency)
		if err != nil {
			return broker.AuthorizeRequest{}, err
		}
		out.Total = &t
	}
	return out, nil
}

// reportOf is a session's report in the control API's form.
func reportOf(r broker.Report) control.Report {
	out := control.Report{FilledFieldKinds: r.FilledFieldKinds, DeniedCount: r.DeniedCount,
		ConfirmationDetected: r.ConfirmationDetected, CredentialWrites: r.CredentialWrites}
	if r.OrderTotal != nil {
		out.OrderTotal = &control.OrderTotal{Amount: r.OrderTotal.Amount, Currency: r.OrderTotal.Currency}
	}
	return out
}

// Wait long-polls an approval; once it ends without a yes, the fill that
// waited is refused, and the session's report counts it once.
func (c *controlService) Wait(ctx context.Context, id string, timeout time.Duration) (control.WaitAnswer, error) {
	a, err := c.owner.WaitApproval(ctx, id, timeout)
	if err != nil && a.ID == "" {
		return control.WaitAnswer{}, err
	}
	c.metrics.decision(a, time.Now())
	if a.Done() && a.Status != owner.StatusApproved && a.Session != "" {
		c.broker.DeniedOnce(a.Session, a.ID)
	}
	w := control.WaitAnswer{Status: string(a.Status), WaitID: a.ID, Kind: string(a.Kind), Reason: a.Reason, Site: a.Site,
		Amount: orderTotal(a.Amount), ExpiresAt: a.Expires}
	if a.Status != owner.StatusPending {
		if err := a.Outcome(); err != nil {
			w.Code, w.Message = string(agentvault.ErrorCode(err)), agentvault.ErrorMessage(err)
		}
	}
	return w, nil
}

func orderTotal(a *policy.Amount) *control.OrderTotal {
	if a == nil {
		return nil
	}
	return &control.OrderTotal{Amount: a.Decimal(), Currency: a.Currency}
}

// recipeScreenWait is how long a submission waits for its screening inside
// one control call: below mcpd's 20 s per registry call.
const recipeScreenWait = 15 * time.Second

// Recipes is the registry lookup. The URL is stripped here too (mcpd
// already did): only its host is looked up, and nothing of it is kept.
func (c *controlService) Recipes(ctx context.Context, pageURL string) (json.RawMessage, error) {
	l, err := c.recipes.Lookup(ctx, recipes.StripURL(pageURL))
	if err != nil {
		return nil, err
	}
	return json.Marshal(l)
}

// SubmitRecipe counts the submission against the API key that sent it.
func (c *controlService) SubmitRecipe(ctx context.Context, req control.SubmitRecipeRequest) (control.RecipeSubmission, error) {
	key, err := c.broker.LookupKey(ctx, req.APIKey)
	if err != nil {
		return control.RecipeSubmission{}, err
	}
	s, err := c.recipes.Submit(ctx, recipes.SubmitArgs{Recipe: req.Recipe, Note: req.Note,
		VerificationRequested: req.VerificationRequested, Submitter: key.ID})
	if err != nil {
		return control.RecipeSubmission{}, err
	}
	return submissionOf(s), nil
}

// RecipeSubmission answers only the key that made the submission; another
// key's id reads as unknown.
func (c *controlService) RecipeSubmission(ctx context.Context, apiKey, id string, wait time.Duration) (control.RecipeSubmission, error) {
	key, err := c.broker.LookupKey(ctx, apiKey)
	if err != nil {
		return control.RecipeSubmission{}, err
	}
	s, err := c.recipes.Submission(ctx, id, wait)
	if err == nil && s.Submitter != key.ID {
		err = recipes.ErrNotFound
	}
	if err != nil {
		if agentvault.ErrorCode(err) == agentvault.CodeNotFound {
			err = agentvault.Errorf(agentvault.CodeNotFound, "no recipe submission has this id")
		}
		return control.RecipeSubmission{}, err
	}
	return submissionOf(s), nil
}

func submissionOf(s recipes.Submission) control.RecipeSubmission {
	v := s.Verdict
	if s.Status == recipes.SubmissionPending {
		v = ""
	}
	return control.RecipeSubmission{ID: s.ID, Status: string(s.Status), Verdict: v}
}

var _ control.Service = (*controlService)(nil)
var (
	_ control.Service          = (*controlService)(nil)
	_ control.KeyAuthenticator = (*controlService)(nil)
	_ control.OwnKeyService    = (*controlService)(nil)
)
