package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"
	"github.com/turnledger/turnledger/authn/authntest"
)

// TestRuntimeServesAValidTokenDuringAFlood: a hosted-mode runtime, a real
// client at 127.0.0.2 with a valid token, and a flood of wrong tokens
// (garbage, and tokens signed with a key the runtime does not know) from the
// same address. Every one of the client's requests during the flood is
// served (GET /me, POST ws-ticket, a websocket dial with the ticket, and a
// valid token it had not used before), while the flood is answered 401 for
// the burst and 429 with Retry-After after it.
func TestRuntimeServesAValidTokenDuringAFlood(t *testing.T) {
	db := filepath.Join(t.TempDir(), "rt.db")
	var out, errb bytes.Buffer
	if err := tenantsMain(context.Background(), []string{"add", "--idp-tenant-id", "acme", "--plan", "team", "--db", db}, rtEnv(nil), time.Now, &out, &errb); err != nil {
		t.Fatalf("tenants add: %v %s", err, errb.String())
	}
	jwks := authntest.NewJWKS(t)
	key := authntest.Ed25519Key(t)
	jwks.PutEd25519("k1", key)
	base := rtStart(t, []string{"--addr", "127.0.0.1:0", "--db", db, "--auth-failure-burst", "5", "--auth-failure-every", "1m"},
		map[string]string{"AUTH_MODE": "hosted", "HOSTED_AUTH_URL": jwks.URL() + "/auth", "HOSTED_TENANT_CLAIM": "acme"})

	now := time.Now()
	claims := jwt.MapClaims{"iss": jwks.URL(), "aud": jwks.URL(), "sub": "user-1", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	good := authntest.Sign(t, jwt.SigningMethodEdDSA, key, "k1", claims, nil)
	forged := authntest.Sign(t, jwt.SigningMethodEdDSA, authntest.Ed25519Key(t), "k1", claims, nil)
	wrong := []string{"not-a-token", forged}

	client, flooder := fromAddr("127.0.0.2"), fromAddr("127.0.0.2")
	send := func(c *http.Client, method, path, tok string) (int, string, []byte, error) {
		req, _ := http.NewRequest(method, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", nil, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), b, nil
	}
	if status, _, body, err := send(client, "GET", "/api/v1/auth/me", good); err != nil || status != http.StatusOK {
		t.Fatalf("GET /me before the flood = %d %s %v, want 200", status, body, err)
	}

	ctx, stop := context.WithTimeout(context.Background(), 2*time.Second)
	defer stop()
	var (
		wg                   sync.WaitGroup
		n401, n429, nOther   atomic.Int64
		noRetryAfter, errors atomic.Int64
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				status, retry, _, err := send(flooder, "GET", "/api/v1/auth/me", wrong[(w+i)%2])
				switch {
				case err != nil:
					if ctx.Err() == nil {
						errors.Add(1)
					}
				case status == http.StatusUnauthorized:
					n401.Add(1)
				case status == http.StatusTooManyRequests:
					n429.Add(1)
					if retry == "" {
						noRetryAfter.Add(1)
					}
				default:
					nOther.Add(1)
				}
			}
		}()
	}

	// The real client, at the same address, all through the flood.
	served := 0
	for ctx.Err() == nil {
		status, _, body, err := send(client, "GET", "/api/v1/auth/me", good)
		if err != nil || status != http.StatusOK {
			t.Errorf("GET /me of the real client during the flood = %d %s %v, want 200", status, body, err)
			break
		}
		status, _, body, err = send(client, "POST", "/api/v1/auth/ws-ticket", good)
		if err != nil || status != http.StatusOK {
			t.Errorf("POST ws-ticket of the real client during the flood = %d %s %v, want 200", status, body, err)
			break
		}
		served += 2
		if served == 10 {
			// A valid token this runtime has never seen, first sent from
			// the flooded address: its signature holds, so it is served.
			fresh := authntest.Sign(t, jwt.SigningMethodEdDSA, key, "k1", jwt.MapClaims{"iss": jwks.URL(), "aud": jwks.URL(), "sub": "user-2", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}, nil)
			if status, _, body, err := send(client, "GET", "/api/v1/auth/me", fresh); err != nil || status != http.StatusOK {
				t.Errorf("GET /me with a valid token never seen before, during the flood = %d %s %v, want 200", status, body, err)
			}
		}
		if served == 20 {
			var tr struct{ Ticket string }
			json.Unmarshal(body, &tr)
			u := "ws" + strings.TrimPrefix(base, "http") + "/api/v1/ws/execution?session_id=s1&ticket=" + url.QueryEscape(tr.Ticket)
			ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: client})
			if err != nil {
				status := 0
				if resp != nil {
					status = resp.StatusCode
				}
				t.Errorf("websocket dial with a ticket during the flood = %d %v, want 101", status, err)
			} else {
				ws.CloseNow()
			}
		}
	}
	wg.Wait()

	if served < 20 {
		t.Errorf("the real client was served %d requests in 2 s of flood, want at least 20", served)
	}
	// The four flooders' requests are checked at once, each before the
	// failures of the others are counted: the burst of 5, and up to 3 more.
	if n := n401.Load(); n < 5 || n > 5+4-1 || n429.Load() == 0 || nOther.Load() != 0 || noRetryAfter.Load() != 0 || errors.Load() != 0 {
		t.Errorf("the flood got %d 401, %d 429 (%d without Retry-After), %d other answers, %d transport errors; want the burst of 5 401 (up to 3 more checked at the same time), the rest 429 with Retry-After",
			n401.Load(), n429.Load(), noRetryAfter.Load(), nOther.Load(), errors.Load())
	}
	t.Logf("in 2 s: the real client was served %d requests, the flood got %d 401 and %d 429", served, n401.Load(), n429.Load())
}
