package httpapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/turnledger/turnledger/httpapi"
)

// heapMiB is the live heap after a collection.
func heapMiB() float64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

// TestFloodsOfMadeUpKeysLeaveNothingBehind: a flood of requests each naming
// a project, an agent and a token nobody has (unauthenticated), and one of
// the admin naming made-up projects (authenticated), take the Go heap back
// within a few MiB of where it was: nothing is kept per key a client
// invents. 10k keys of each kind by default; TURNLEDGER_FLOOD_KEYS sets
// another number (a million takes about 12 minutes here).
func TestFloodsOfMadeUpKeysLeaveNothingBehind(t *testing.T) {
	e := newEnvWith(t, func(c *httpapi.Config) { c.AuthFailures = httpapi.Rate{Burst: 20, Every: time.Second} })
	serve := func(r *http.Request) int {
		rec := httptest.NewRecorder()
		e.api.ServeHTTP(rec, r)
		return rec.Code
	}
	warm := func(i int) {
		r := httptest.NewRequest("GET", fmt.Sprintf("/v3r1/projects/warm%d/projection/turns", i), nil)
		r.Header.Set("Authorization", "Bearer "+adminToken)
		serve(r)
	}
	flood := func(prefix string, i int) int {
		r := httptest.NewRequest("GET", fmt.Sprintf("/v3r1/projects/%s%d/projection/turns", prefix, i), nil)
		r.RemoteAddr = fmt.Sprintf("127.0.%d.%d:1234", i/250%250, i%250)
		r.Header.Set(httpapi.HeaderProject, fmt.Sprintf("%s%d", prefix, i))
		r.Header.Set(httpapi.HeaderAgent, fmt.Sprintf("a%d", i))
		r.Header.Set("Authorization", fmt.Sprintf("Bearer tla_made_up_%d", i))
		return serve(r)
	}
	// Warm up: what every request allocates once (pools, buffers).
	for i := range 2000 {
		warm(i)
		flood("w", i)
	}
	before := heapMiB()
	n := 10_000
	if v, err := strconv.Atoi(os.Getenv("TURNLEDGER_FLOOD_KEYS")); err == nil && v > 0 {
		n = v // the long variant: TURNLEDGER_FLOOD_KEYS=1000000 (docs/limits.md)
	}
	codes := map[int]int{}
	for i := range n {
		codes[flood("p", i)]++
	}
	for i := range n {
		r := httptest.NewRequest("GET", fmt.Sprintf("/v3r1/projects/q%d/projection/turns", i), nil)
		r.Header.Set("Authorization", "Bearer "+adminToken)
		codes[serve(r)]++
	}
	if codes[401]+codes[429] != n || codes[200] != n {
		t.Fatalf("answers = %v, want %d refusals and %d pages", codes, n, n)
	}
	// The failures' buckets fill up again with time and are swept.
	e.clock.Advance(time.Hour)
	for i := range 2 * 4096 {
		r := httptest.NewRequest("GET", "/v3r1/projects/p1/projection/turns", nil)
		r.RemoteAddr = fmt.Sprintf("127.1.%d.%d:1", i/250%250, i%250)
		r.Header.Set(httpapi.HeaderProject, "p1")
		r.Header.Set(httpapi.HeaderAgent, "a1")
		r.Header.Set("Authorization", "Bearer tla_again")
		serve(r)
		e.clock.Advance(time.Second)
	}
	after := heapMiB()
	if after-before > 2 {
		t.Errorf("the heap went from %.1f MiB to %.1f MiB after %d made-up keys, want within 2 MiB", before, after, 2*n)
	}
	t.Logf("heap %.1f MiB before, %.1f MiB after the floods (answers %v)", before, after, codes)
}
