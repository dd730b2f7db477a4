package mcpserver

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// get_network_log (seed 004): off unless the deployment enables it
// (--network-log), typically on staging. The current page's last 25
// document, xhr and fetch requests: method, host, path cut to 200
// characters, status and how long ago. Never a body, header or query. Once
// a vault value was filled in the session, hosts are only "this site" or
// "another site" and no path is shown: a path can carry what the page did
// with the value.

const descNetworkLog = "Diagnostic, off unless the deployment enables it: the current page's last 25 document, xhr and fetch requests, oldest first, one line each (method, host, path, status, how long ago). " +
	"No bodies, headers or query strings. After a vault value has been filled, the host is only 'this site' or 'another site' and no path is shown. Use it when a submit appears to do nothing: a silent server refusal shows as a 4xx on the form's request."

const maxNetPath = 200

func (s *Server) registerNetworkLogTool() {
	addTool(s, "get_network_log", descNetworkLog, true, s.getNetworkLog)
}

func (s *Server) getNetworkLog(ctx context.Context, in noIn) (*mcp.CallToolResult, error) {
	if !s.cfg.NetworkLog {
		return prose(okStatus(), "get_network_log is not available on this deployment (it is a diagnostic the operator turns on, typically on staging)."), nil
	}
	ss, err := s.pageSession("get_network_log", in.Session)
	if err != nil {
		return nil, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	entries, ok := ss.page.NetworkLog()
	if !ok {
		return prose(okStatus(), "No network log was recorded for this page."), nil
	}
	if len(entries) == 0 {
		return prose(okStatus(), "No document, xhr or fetch request recorded on this page yet."), nil
	}
	reduced := len(ss.filled) > 0
	pageHost := ""
	if u, err := url.Parse(ss.page.URL()); err == nil {
		pageHost = u.Host
	}
	now := time.Now()
	var b strings.Builder
	for i, e := range entries {
		if i > 0 {
			b.WriteByte('\n')
		}
		status := "failed"
		if e.Status > 0 {
			status = fmt.Sprint(e.Status)
		}
		ago := now.Sub(e.At).Round(100 * time.Millisecond)
		if reduced {
			site := "another site"
			if strings.EqualFold(e.Host, pageHost) {
				site = "this site"
			}
			fmt.Fprintf(&b, "%s %s %s %s ago", e.Method, site, status, ago)
			continue
		}
		p := e.Path
		if r := []rune(p); len(r) > maxNetPath {
			p = string(r[:maxNetPath])
		}
		fmt.Fprintf(&b, "%s %s%s %s %s ago", e.Method, e.Host, p, status, ago)
	}
	if reduced {
		b.WriteString("\n(a vault value was filled in this session: hosts are reduced to this site / another site and paths are withheld)")
	}
	return prose(okStatus(), b.String()), nil
}
