package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestServeMCPAllowedOriginFlag: --mcp-allowed-origin lets that browser
// origin reach the MCP endpoint (then it must authenticate: 401), while
// another origin is refused before anything else (403).
func TestServeMCPAllowedOriginFlag(t *testing.T) {
	base, stop := startEngine(t, t.TempDir(), "127.0.0.1:0", "--mcp-allowed-origin", "https://app.example")
	defer stop()
	post := func(origin string) int {
		req, _ := http.NewRequest("POST", base+"/mcp/projects/p1/agents/a1", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post("https://app.example"); got != http.StatusUnauthorized {
		t.Errorf("the allowed origin without a token = %d, want 401", got)
	}
	if got := post("https://evil.example"); got != http.StatusForbidden {
		t.Errorf("another origin = %d, want 403", got)
	}
}
