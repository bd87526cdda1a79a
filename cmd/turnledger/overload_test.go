//go:build overload

// The overload figures of the README's reliability section:
//
//	go test -tags overload -run Overload -v ./cmd/turnledger
//
// Each scenario runs against a real `serve` twice, with the protections off
// ("before") and with the defaults ("after"), and logs what a user sees.
package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type loadResult struct {
	ok, shed, other int64
	latencies       []time.Duration // of the 200s
}

func (r *loadResult) String() string {
	slices.Sort(r.latencies)
	q := func(p float64) time.Duration {
		if len(r.latencies) == 0 {
			return 0
		}
		return r.latencies[int(p*float64(len(r.latencies)-1))].Round(100 * time.Microsecond)
	}
	return fmt.Sprintf("200: %d, 503: %d, other: %d; accepted p50 %v p99 %v", r.ok, r.shed, r.other, q(0.5), q(0.99))
}

// openLoop sends dispatches at rate per second for d, each on its own
// goroutine (an open loop: nobody waits for an answer before sending more).
func openLoop(t *testing.T, planner client, rate int, d time.Duration) *loadResult {
	res := &loadResult{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	tr := &http.Transport{MaxIdleConnsPerHost: 4096}
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	tick := time.Second / time.Duration(rate)
	start := time.Now()
	var n atomic.Int64
	for next := start; time.Since(start) < d; next = next.Add(tick) {
		time.Sleep(time.Until(next))
		i := n.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"requested_by":{"project_id":"p","agent_id":"planner"},"target_agent":{"project_id":"p","agent_id":"w"},"input":{},"turn_kind":"k","dispatch_key":"k%d","authority":{"mode":"root_request","request_id":"r%d"},"meta":null,"trace":null}`, i, i)
			req, _ := http.NewRequest("POST", planner.base+"/v3r1/projects/p/turns:dispatch", bytes.NewReader([]byte(body)))
			for k, v := range planner.headers {
				req.Header.Set(k, v)
			}
			t0 := time.Now()
			resp, err := hc.Do(req)
			took := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.other++
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			switch resp.StatusCode {
			case 200:
				res.ok++
				res.latencies = append(res.latencies, took)
			case 503:
				res.shed++
			default:
				res.other++
			}
		}()
	}
	wg.Wait()
	tr.CloseIdleConnections()
	return res
}

func TestOverloadOpenLoop(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
	}{
		{"before (no bounds)", []string{"--max-in-flight", "0", "--max-project-in-flight", "0"}},
		{"after (defaults)", nil},
		{"after (--max-project-in-flight 32)", []string{"--max-project-in-flight", "32"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			base, _ := startEngine(t, dir, "127.0.0.1:0", append([]string{"--reap-interval", "0"}, c.args...)...)
			admin := adminClient(t, base, dir)
			planner := agentClient(t, admin, "p", "planner", 0, "turns:dispatch")
			agentClient(t, admin, "p", "w", 1)
			for _, rate := range []int{1000, 3000, 6000} {
				r := openLoop(t, planner, rate, 3*time.Second)
				t.Logf("%s, open loop %d dispatches/s for 3 s: %v", c.name, rate, r)
			}
		})
	}
}

// TestOverloadAuthFlood: a legitimate agent's latency while another address
// floods the server with wrong tokens for the same agent.
func TestOverloadAuthFlood(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
	}{
		{"before (no throttle)", []string{"--auth-failure-burst", "0"}},
		{"after (defaults)", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			base, _ := startEngine(t, dir, "127.0.0.1:0", append([]string{"--reap-interval", "0"}, c.args...)...)
			admin := adminClient(t, base, dir)
			real := agentClient(t, admin, "p", "w", 1)
			stop := make(chan struct{})
			var flood, refused atomic.Int64
			var wg sync.WaitGroup
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
			hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64}}
			for range 32 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						req, _ := http.NewRequest("GET", base+"/v3r1/projects/p/agents/w", nil)
						req.Header.Set("X-Svc-Project-Id", "p")
						req.Header.Set("X-Svc-Agent-Id", "w")
						req.Header.Set("Authorization", "Bearer tla_wrong")
						resp, err := hc.Do(req)
						if err != nil {
							continue
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						flood.Add(1)
						if resp.StatusCode == 429 {
							refused.Add(1)
						}
					}
				}()
			}
			res := &loadResult{}
			start := time.Now()
			for time.Since(start) < 3*time.Second {
				t0 := time.Now()
				req, _ := http.NewRequest("GET", base+"/v3r1/projects/p/agents/w", nil)
				for k, v := range real.headers {
					req.Header.Set(k, v)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					res.other++
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					res.ok++
					res.latencies = append(res.latencies, time.Since(t0))
				} else {
					res.other++
				}
			}
			close(stop)
			wg.Wait()
			el := time.Since(start).Seconds()
			t.Logf("%s: flood %.0f wrong tokens/s (%d%% answered 429); the real agent: %v", c.name, float64(flood.Load())/el, 100*refused.Load()/max(flood.Load(), 1), res)
		})
	}
}
