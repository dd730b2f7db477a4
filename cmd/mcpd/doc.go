// Command mcpd serves agentvault's MCP tools on stdio. It is a few lines over
// mcpserver.Main; it never reads the vault and never logs to stdout.
package main
