package httpapi_test

import (
	"net/http"
	"net/url"
	"testing"
)

// FuzzQueriesIDsAndKeys sends arbitrary query strings (feed cursors, limits,
// filters), path ids and Idempotency-Keys to the reads and a command of a
// live instance: no input may make it answer 500.
func FuzzQueriesIDsAndKeys(f *testing.F) {
	e := newEnv(f)
	req := e.register("p1", "req", 1, "turns:dispatch", "projections:read")
	tv := e.dispatch(req, "req", "seed")
	paths := []string{
		"/v3r1/projects/p1/projection/feed", "/v3r1/projects/p1/projection/turns", "/v3r1/projects/p1/projection/agents",
		"/v3r1/projects/p1/projection/turn-offers", "/v3r1/projects/p1/turns/%s/feed", "/v3r1/projects/p1/turns/%s/context",
		"/v3r1/projects/p1/projection/turns/%s/lineage", "/v3r1/projects/p1/agents/%s/feed", "/v3r1/projects/p1/turns/%s",
		"/v3r1/projects/p1/agents/%s/credentials",
	}
	f.Add(uint8(0), "after_ledger_seq=1&limit=2", tv.TurnID, "")
	f.Add(uint8(1), "state=queued&stop_requested_only=true&target_agent_id=req", "x", "k")
	f.Add(uint8(4), "after_ledger_seq=18446744073709551616", tv.TurnID, "\x00")
	f.Add(uint8(5), "after_turn_seq=-1&limit=0", "a.b", "é")
	f.Fuzz(func(t *testing.T, route uint8, query, id, key string) {
		p := paths[int(route)%len(paths)]
		path := p
		for i := 0; i+1 < len(p); i++ {
			if p[i:i+2] == "%s" {
				path = p[:i] + url.PathEscape(id) + p[i+2:]
				break
			}
		}
		u := e.url + path + "?" + query
		if _, err := http.NewRequest("GET", u, nil); err != nil {
			return // not a URL a client could send
		}
		for i := 0; i < len(key); i++ {
			if (key[i] < 0x20 && key[i] != '\t') || key[i] == 0x7f {
				return // not a header value a client could send
			}
		}
		e := *e
		e.t = t
		who := req
		if resp := e.do(who, "GET", path+"?"+query, nil); resp.status >= 500 {
			t.Fatalf("GET %s?%s = %d %s", path, query, resp.status, resp.body)
		}
		if resp := e.do(who.withKey(key), "POST", "/v3r1/projects/p1/management/agents/req:heartbeat-presence", nil); resp.status >= 500 {
			t.Fatalf("heartbeat with Idempotency-Key %q = %d %s", key, resp.status, resp.body)
		}
	})
}
