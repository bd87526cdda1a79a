package httpapi_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/turnledger/turnledger/httpapi"
	"github.com/turnledger/turnledger/kernel"
)

type observed struct {
	mu   sync.Mutex
	seen []string
}

func (o *observed) ObserveRequest(operation, method string, status int, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, operation+" "+http.StatusText(status))
}

// TestMetricsRoute: /metrics serves the configured handler to loopback
// clients only unless FromAnywhere, and the observer sees each request with
// its operationId and status.
func TestMetricsRoute(t *testing.T) {
	e := newEnv(t)
	obs := &observed{}
	for _, anywhere := range []bool{false, true} {
		hcfg := httpapi.DefaultConfig()
		hcfg.AdminTokenHash = kernel.HashSecret(adminToken)
		hcfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		hcfg.Metrics = httpapi.MetricsConfig{
			Handler:      http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "metric 1\n") }),
			FromAnywhere: anywhere,
			Observer:     obs,
		}
		api, err := httpapi.New(e.engine, e.store, hcfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			remote string
			want   int
		}{{"127.0.0.1:5000", 200}, {"[::1]:5000", 200}, {"192.0.2.7:5000", map[bool]int{false: 403, true: 200}[anywhere]}} {
			req := httptest.NewRequest("GET", "/metrics", nil)
			req.RemoteAddr = tc.remote
			rec := httptest.NewRecorder()
			api.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Errorf("FromAnywhere %v: GET /metrics from %s = %d %s, want %d", anywhere, tc.remote, rec.Code, rec.Body, tc.want)
			}
		}
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, httptest.NewRequest("GET", "/v3r1/projects/p/turns/t1", nil))
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	want := []string{"metrics OK", "metrics OK", "metrics Forbidden", "getTurn Unauthorized"}
	for i, w := range want {
		if i >= len(obs.seen) || obs.seen[i] != w {
			t.Fatalf("observed %q, want it to start with %q", obs.seen, want)
		}
	}
}
