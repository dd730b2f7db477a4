package mcpserver

import (
	"context"
	"time"

	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/skills"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Portal credentials and skills (seed 003, docs/portal-credentials.md).
// These tools live in mcpd behind a switch (Config.Credentials,
// Config.Skills) because they act for the same agent, under the same API
// key, over the same control API: a second MCP server would need its own
// key handling and transport for five calls. mcpd never sees a value: the
// control API's answers name credentials, fields and one-time URLs only,
// and the values go from proxyd's credential-use listener straight to the
// skill's runtime.

// CredentialControl is the control API's credential part
// (control.Client implements it).
type CredentialControl interface {
	CredentialRequest(ctx context.Context, in control.CredentialRequestIn) (control.CredentialRequestOut, error)
	CredentialList(ctx context.Context, apiKey string) (control.CredentialListOut, error)
	CredentialUse(ctx context.Context, in control.CredentialUseIn) (control.CredentialUseOut, error)
	CredentialDelete(ctx context.Context, in control.CredentialDeleteIn) (control.DoneOut, error)
	GrantSet(ctx context.Context, in control.GrantSetIn) (control.GrantSetOut, error)
}

var _ CredentialControl = (*control.Client)(nil)

type credentialRequestIn struct {
	SessionArg
	Name       string   `json:"name" jsonschema:"The credential's name, e.g. sankhya (lower case letters, digits, '.', '_' or '-')."`
	Fields     []string `json:"fields" jsonschema:"The fields to type, e.g. [\"username\", \"password\"]."`
	Visibility string   `json:"visibility,omitempty" jsonschema:"personal (default: yours only) or org (the organisation's, owners and admins only)."`
}

type credentialUseIn struct {
	SessionArg
	Name string `json:"name" jsonschema:"The credential's name: yours if you have one, else the organisation's."`
}

type credentialIDIn struct {
	SessionArg
	CredentialID string `json:"credentialId" jsonschema:"The credentialId credential_list shows (cred_...)."`
}

type grantSetIn struct {
	SessionArg
	CredentialID string `json:"credentialId" jsonschema:"The organisation credential's credentialId (cred_...)."`
	Subject      string `json:"subject" jsonschema:"user:<email> or team:<name>."`
	Write        bool   `json:"write" jsonschema:"true lets the subject change the values; false takes that back."`
}

type skillFindIn struct {
	SessionArg
	Query string `json:"query,omitempty" jsonschema:"Words in the skill's name or description; empty lists every skill."`
}

type fileWriteIn struct {
	SessionArg
	Path    string `json:"path" jsonschema:"Path under the skills directory, e.g. my-skill/SKILL.md."`
	Content string `json:"content" jsonschema:"The file's text. A SKILL.md is validated first (its frontmatter credentials must be a list of credential names)."`
}

func (s *Server) registerCredentials() {
	if s.cfg.Credentials != nil {
		addTool(s, "credential_request", "Ask a person to store a portal login or API key: answers a one-time link for them to open and type the values in (valid once, for one hour, only for the person this agent acts for). Asking again with the same name replaces the values. visibility org (owners and admins) makes the organisation's shared credential. Never ask for values in the chat. Answers JSON.", false, s.credentialRequest)
		addTool(s, "credential_list", "The credentials you may see: name, fields, owner, whether values are set, and isSelected (the one credential_use gives you for that name). Never the values. Answers JSON.", true, s.credentialList)
		addTool(s, "credential_use", "A one-time URL (about 60 seconds, one POST) for a script to fetch a credential's values: hand the whole URL to the script, which POSTs {\"token\": <the part after #>} to the URL without the # part and gets {name, values}. Do not open it yourself or show what it returns. Your own credential of that name first, else the organisation's; neither is not_found: then ask with credential_request. Answers JSON.", false, s.credentialUse)
		addTool(s, "credential_delete", "Delete a credential by credentialId, with its values, open links and grants. Owners and admins may delete members' personal credentials (e.g. when someone leaves) but never use them. Answers JSON.", false, s.credentialDelete)
		addTool(s, "grant_set", "Let a member (user:<email>) or a team (team:<name>) change an organisation credential's values (write true), or take it back (write false). Owners and admins only; personal credentials cannot be shared. Answers JSON.", false, s.grantSet)
	}
	if s.cfg.Skills != nil {
		addTool(s, "skill_find", "Find skills by name or description. Each answer lists the credentials the skill needs: check them with credential_list and send a credential_request link for each one missing before running the skill. Answers JSON.", true, s.skillFind)
		addTool(s, "file_write", "Write a file in the skills directory (e.g. my-skill/SKILL.md). A SKILL.md is validated first: its frontmatter credentials must be a list of credential names, and a bad one is refused naming the field. Answers JSON.", false, s.fileWrite)
	}
}

func (s *Server) credentialRequest(ctx context.Context, in credentialRequestIn) (*mcp.CallToolResult, error) {
	out, err := s.cfg.Credentials.CredentialRequest(ctx, control.CredentialRequestIn{APIKey: s.apiKeyOf(ctx), Name: in.Name, Fields: in.Fields, Visibility: in.Visibility})
	if err != nil {
		return nil, err
	}
	return jsonAnswer(okStatus(), struct {
		control.CredentialRequestOut
		Note string `json:"note"`
	}{out, "Send this link to the person to open and type the values. It works once, for one hour, only for them; if the dashboard asks them to sign in, they sign in and open the link again."})
}

func (s *Server) credentialList(ctx context.Context, in noIn) (*mcp.CallToolResult, error) {
	out, err := s.cfg.Credentials.CredentialList(ctx, s.apiKeyOf(ctx))
	if err != nil {
		return nil, err
	}
	return jsonAnswer(okStatus(), out)
}

func (s *Server) credentialUse(ctx context.Context, in credentialUseIn) (*mcp.CallToolResult, error) {
	out, err := s.cfg.Credentials.CredentialUse(ctx, control.CredentialUseIn{APIKey: s.apiKeyOf(ctx), Name: in.Name})
	if err != nil {
		return nil, err
	}
	return jsonAnswer(okStatus(), struct {
		control.CredentialUseOut
		ExpiresInSeconds int    `json:"expiresInSeconds"`
		Note             string `json:"note"`
	}{out, max(0, int(time.Until(out.ExpiresAt).Seconds())), "Hand the URL to the script now. Do not open it or show what it returns."})
}

func (s *Server) credentialDelete(ctx context.Context, in credentialIDIn) (*mcp.CallToolResult, error) {
	out, err := s.cfg.Credentials.CredentialDelete(ctx, control.CredentialDeleteIn{APIKey: s.apiKeyOf(ctx), CredentialID: in.CredentialID})
	if err != nil {
		return nil, err
	}
	return jsonAnswer(okStatus(), out)
}

func (s *Server) grantSet(ctx context.Context, in grantSetIn) (*mcp.CallToolResult, error) {
	out, err := s.cfg.Credentials.GrantSet(ctx, control.GrantSetIn{APIKey: s.apiKeyOf(ctx), CredentialID: in.CredentialID, Subject: in.Subject, Write: in.Write})
	if err != nil {
		return nil, err
	}
	return jsonAnswer(okStatus(), out)
}

func (s *Server) skillFind(ctx context.Context, in skillFindIn) (*mcp.CallToolResult, error) {
	list, err := s.cfg.Skills.Find(in.Query)
	if err != nil {
		return nil, err
	}
	return jsonAnswer(okStatus(), struct {
		Skills []skills.Skill `json:"skills"`
	}{list})
}

func (s *Server) fileWrite(ctx context.Context, in fileWriteIn) (*mcp.CallToolResult, error) {
	sk, err := s.cfg.Skills.WriteFile(in.Path, []byte(in.Content))
	if err != nil {
		return nil, err
	}
	if sk == nil {
		return jsonAnswer(okStatus(), map[string]any{"path": in.Path})
	}
	return jsonAnswer(okStatus(), map[string]any{"path": in.Path, "skill": sk})
}
