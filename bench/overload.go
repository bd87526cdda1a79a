package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/serve"
)

// The overload scenario of `turnledger bench`: each point of docs/limits.md
// ("Load, abuse and limits") in one run. Every point runs against an
// in-process serve with the protections off ("off": no in-flight bounds,
// no throttle, no read or write timeout, no connection cap, pages bounded
// only at 1 GiB — serve as it was before them) and again against one with
// them on ("on": serve's defaults). The read timeout and the connection cap
// are shown on a third serve, with the defaults but a read timeout of 1 s
// and a cap of 256 connections, so that a short run can show them (30 s and
// 10,000 would outlast it). The load generator shares the process and its
// cores with the servers, as on a one-machine test.

// overloadReadTimeout and overloadConnCap are the third serve's limits.
const (
	overloadReadTimeout = time.Second
	overloadConnCap     = 256
)

// OverloadResult is the report of the overload scenario.
type OverloadResult struct {
	PhaseSeconds float64 `json:"phase_seconds"`
	// Capacity: dispatches/s of --agents dispatchers in a closed loop on
	// "on", and the p50 of one dispatch at a time with no load.
	Dispatchers    int     `json:"dispatchers"`
	CapacityPerSec float64 `json:"capacity_dispatches_per_second"`
	IdleP50        float64 `json:"idle_dispatch_p50_ms"`
	Factor         float64 `json:"factor"`
	OpenLoop       struct {
		Off openLoopStats `json:"off"`
		On  openLoopStats `json:"on"`
	} `json:"open_loop"`
	Flood struct {
		Clients int        `json:"clients"`
		Alone   floodStats `json:"alone"`
		Off     floodStats `json:"off"`
		On      floodStats `json:"on"`
	} `json:"flood"`
	SlowBodies struct {
		Clients       int       `json:"clients"`
		ReadTimeoutMS float64   `json:"read_timeout_ms"`
		Off           slowStats `json:"off"`
		On            slowStats `json:"on"`
	} `json:"slow_bodies"`
	Conns struct {
		Opened int       `json:"opened"`
		Cap    int       `json:"cap"`
		Off    connStats `json:"off"`
		On     connStats `json:"on"`
	} `json:"connections"`
	Feed struct {
		Events     int       `json:"events"`
		EventBytes int       `json:"event_bytes"`
		Readers    int       `json:"readers"`
		Off        feedStats `json:"off"`
		On         feedStats `json:"on"`
	} `json:"feed"`
}

type openLoopStats struct {
	RatePerSec float64 `json:"rate_per_second"`
	Sent       int     `json:"sent"`
	OK         int     `json:"ok"`
	Shed       int     `json:"shed_503"`
	Failed     int     `json:"failed"` // other statuses and transport errors
	OKP50      float64 `json:"ok_p50_ms"`
	OKP99      float64 `json:"ok_p99_ms"`
	ShedP50    float64 `json:"shed_p50_ms"`
	// DrainSeconds: from the end of the load to the last answer.
	DrainSeconds float64 `json:"drain_seconds"`
	// Recovery: dispatches sent one at a time once every answer is in.
	RecoveryOK  int     `json:"recovery_ok"`
	RecoveryN   int     `json:"recovery_n"`
	RecoveryP50 float64 `json:"recovery_p50_ms"`
}

type floodStats struct {
	// CPUCores: of the whole process (servers and clients) in the phase.
	CPUCores    float64 `json:"cpu_cores"`
	FloodPerSec float64 `json:"flood_per_second"`
	Throttled   float64 `json:"flood_429_share"`
	N           int     `json:"real_agent_requests"`
	Refused     int     `json:"real_agent_refused"`
	P50         float64 `json:"real_agent_p50_ms"`
	P99         float64 `json:"real_agent_p99_ms"`
}

type slowStats struct {
	Cut      int     `json:"cut"`        // connections serve ended during the phase
	Open     int     `json:"open"`       // still open when the phase ended
	CutP50MS float64 `json:"cut_p50_ms"` // from the headers to the cut
	PhaseMS  float64 `json:"phase_ms"`
}

type connStats struct {
	Served             int `json:"served"`  // answered while all were open
	Waiting            int `json:"waiting"` // not answered while all were open
	Released           int `json:"released"`
	ServedAfterRelease int `json:"served_after_release"`
}

type feedStats struct {
	Pages        int     `json:"pages"`
	MaxPageBytes int     `json:"max_page_bytes"`
	HeapBeforeMB float64 `json:"heap_before_mib"` // Go heap objects, after a GC
	HeapPeakMB   float64 `json:"heap_peak_mib"`
	RSSBeforeMB  float64 `json:"rss_before_mib"`
	RSSPeakMB    float64 `json:"rss_peak_mib"`
	RSSAfterMB   float64 `json:"rss_after_mib"`
}

// overloadServe is one in-process serve of the scenario with its project
// bench0: requester req0 and worker w0.
type overloadServe struct {
	*target
	hc       *http.Client      // the raw requests'
	req, w   agent             // req0 and w0
	reqC, wC *client.Client    // their clients, on hc
	reqH, wH map[string]string // their headers, for the raw requests
	run      string            // prefix of dispatch keys
	dispatch atomic.Int64
	bigTurn  string // the Turn of the large events (bigFeed)
}

// startOverloadServe starts a serve with limits lim and sets its agents up.
func (b *bench) startOverloadServe(ctx context.Context, lim serve.Limits) (*overloadServe, error) {
	t, err := b.startWith(ctx, "", func(c *serve.Config) { c.Limits, c.ReapInterval = lim, 0 })
	if err != nil {
		return nil, err
	}
	s := &overloadServe{target: t, hc: newHTTPClient(64), run: fmt.Sprintf("%x", time.Now().UnixNano())}
	adm, err := t.adminClient(s.hc)
	if err == nil {
		if s.req, err = register(ctx, adm, "bench0", "req0", 0, "turns:dispatch"); err == nil {
			s.w, err = register(ctx, adm, "bench0", "w0", 1)
		}
	}
	if err != nil {
		t.close()
		return nil, err
	}
	s.reqC, s.wC = s.req.client(t.url, s.hc), s.w.client(t.url, s.hc)
	s.reqH, s.wH = s.req.headers(), s.w.headers()
	return s, nil
}

// dispatchBody is the body of the next dispatch of s.
func (s *overloadServe) dispatchBody() []byte {
	key := fmt.Sprintf("%s-%d", s.run, s.dispatch.Add(1))
	b, _ := json.Marshal(map[string]any{
		"requested_by": s.req.ref(), "target_agent": s.w.ref(),
		"input": map[string]any{}, "turn_kind": "bench", "dispatch_key": key,
		"authority": map[string]any{"mode": "root_request", "request_id": key}, "meta": nil, "trace": nil})
	return b
}

// send sends one request with headers through hc and returns its status
// (0 on a transport error) and the size of its body.
func send(ctx context.Context, hc *http.Client, method, url string, headers map[string]string, body []byte) (int, int) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, 0
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0
	}
	defer resp.Body.Close()
	n, _ := io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, int(n)
}

// sequential sends n dispatches one at a time and returns how many were
// answered 200 and their p50.
func (s *overloadServe) sequential(ctx context.Context, n int) (ok int, p50 float64) {
	var lat []time.Duration
	for range n {
		t0 := time.Now()
		if st, _ := send(ctx, s.hc, "POST", s.url+"/v3r1/projects/bench0/turns:dispatch", s.reqH, s.dispatchBody()); st == http.StatusOK {
			ok++
			lat = append(lat, time.Since(t0))
		}
	}
	return ok, quantile(lat, 0.5)
}

func (b *bench) overload(ctx context.Context) (*Result, error) {
	phase := b.cfg.Duration / 8
	res := &Result{Scenario: "overload", Overload: &OverloadResult{PhaseSeconds: phase.Seconds(), Factor: b.cfg.Factor, Dispatchers: b.cfg.Agents}}
	r := res.Overload

	off := serve.Limits{MaxPageBytes: 1 << 30} // every bound off, pages at most 1 GiB
	on := serve.DefaultLimits()
	scaled := serve.DefaultLimits()
	scaled.ReadTimeout, scaled.MaxConns = overloadReadTimeout, overloadConnCap
	b.say("starting three serves (protections off, on, on with a read timeout of %v and a cap of %d connections)…", overloadReadTimeout, overloadConnCap)
	var serves []*overloadServe
	defer func() {
		for _, s := range serves {
			s.close()
		}
	}()
	for _, lim := range []serve.Limits{off, on, scaled} {
		s, err := b.startOverloadServe(ctx, lim)
		if err != nil {
			return nil, err
		}
		serves = append(serves, s)
	}
	sOff, sOn, sScaled := serves[0], serves[1], serves[2]

	b.say("capacity: %d dispatchers in a closed loop for %v…", b.cfg.Agents, phase)
	_, r.IdleP50 = sOn.sequential(ctx, 20)
	r.CapacityPerSec = sOn.capacity(ctx, b.cfg.Agents, phase)
	if r.CapacityPerSec <= 0 {
		return nil, errors.New("overload: no dispatch succeeded while measuring the capacity")
	}

	rate := b.cfg.Factor * r.CapacityPerSec
	b.say("open loop at %.0f dispatches/s for %v, protections off then on…", rate, phase)
	r.OpenLoop.Off = sOff.openLoop(ctx, rate, phase)
	r.OpenLoop.On = sOn.openLoop(ctx, rate, phase)

	b.say("wrong-token flood beside the real agent, %v each: alone, protections off, on…", phase)
	r.Flood.Clients = 32
	r.Flood.Alone = sOn.flood(ctx, 0, phase)
	r.Flood.Off = sOff.flood(ctx, r.Flood.Clients, phase)
	r.Flood.On = sOn.flood(ctx, r.Flood.Clients, phase)

	b.say("clients trickling a body: protections off, then a read timeout of %v…", overloadReadTimeout)
	r.SlowBodies.Clients, r.SlowBodies.ReadTimeoutMS = 64, float64(overloadReadTimeout/time.Millisecond)
	r.SlowBodies.Off = sOff.slowBodies(ctx, r.SlowBodies.Clients, max(phase, 2*overloadReadTimeout))
	r.SlowBodies.On = sScaled.slowBodies(ctx, r.SlowBodies.Clients, 5*overloadReadTimeout)

	b.say("connections beyond the cap of %d…", overloadConnCap)
	r.Conns.Opened, r.Conns.Cap = overloadConnCap+overloadConnCap/2, overloadConnCap
	r.Conns.Off = sOff.conns(ctx, r.Conns.Opened, r.Conns.Opened, 0)
	r.Conns.On = sScaled.conns(ctx, r.Conns.Opened, overloadConnCap, overloadConnCap/4)

	r.Feed.Events, r.Feed.EventBytes, r.Feed.Readers = b.cfg.Events, 200<<10, 10
	b.say("feed readers: %d events of %d KiB in a Turn's feed, %d readers with limit=500 for %v, pages bounded then not…", r.Feed.Events, r.Feed.EventBytes>>10, r.Feed.Readers, phase)
	for _, s := range []*overloadServe{sOn, sOff} {
		if err := s.bigFeed(ctx, r.Feed.Events, r.Feed.EventBytes); err != nil {
			return nil, err
		}
	}
	// Bounded first: the unbounded run leaves the process large. The soft
	// memory limit is the process's: serve's default (1 GiB) while the
	// readers of "on" read, none for "off".
	prev := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(prev)
	var err error
	debug.SetMemoryLimit(int64(on.MemoryLimit))
	if r.Feed.On, err = sOn.feedReaders(ctx, r.Feed.Readers, phase); err != nil {
		return nil, err
	}
	debug.SetMemoryLimit(math.MaxInt64)
	if r.Feed.Off, err = sOff.feedReaders(ctx, r.Feed.Readers, phase); err != nil {
		return nil, err
	}
	return res, nil
}

// capacity runs n dispatchers in a closed loop for d and returns the
// dispatches answered 200 per second.
func (s *overloadServe) capacity(ctx context.Context, n int, d time.Duration) float64 {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: n + 4}}
	defer hc.CloseIdleConnections()
	var ok atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if st, _ := send(ctx, hc, "POST", s.url+"/v3r1/projects/bench0/turns:dispatch", s.reqH, s.dispatchBody()); st == http.StatusOK {
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return float64(ok.Load()) / time.Since(start).Seconds()
}

// openLoop sends dispatches at rate per second for d, each on its own
// goroutine, whatever the answers (an open loop), then waits for every
// answer and sends 20 dispatches one at a time. At most 4,096 client
// connections are open (beyond them requests wait in the client, and the
// wait counts in their latency).
func (s *overloadServe) openLoop(ctx context.Context, rate float64, d time.Duration) openLoopStats {
	st := openLoopStats{RatePerSec: rate}
	hc := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 4096, MaxConnsPerHost: 4096}}
	defer hc.CloseIdleConnections()
	var mu sync.Mutex
	var okLat, shedLat []time.Duration
	var last time.Time
	var wg sync.WaitGroup
	start := time.Now()
	for sent := 0; ; {
		el := time.Since(start)
		if el >= d || ctx.Err() != nil {
			break
		}
		for due := int(el.Seconds() * rate); sent < due; sent++ {
			st.Sent++
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				code, _ := send(ctx, hc, "POST", s.url+"/v3r1/projects/bench0/turns:dispatch", s.reqH, s.dispatchBody())
				took := time.Since(t0)
				mu.Lock()
				defer mu.Unlock()
				last = time.Now()
				switch code {
				case http.StatusOK:
					okLat = append(okLat, took)
				case http.StatusServiceUnavailable:
					shedLat = append(shedLat, took)
				default:
					st.Failed++
				}
			}()
		}
		time.Sleep(time.Millisecond)
	}
	end := time.Now()
	wg.Wait()
	st.OK, st.Shed = len(okLat), len(shedLat)
	st.OKP50, st.OKP99, st.ShedP50 = quantile(okLat, 0.5), quantile(okLat, 0.99), quantile(shedLat, 0.5)
	st.DrainSeconds = max(last.Sub(end), 0).Seconds()
	st.RecoveryN = 20
	st.RecoveryOK, st.RecoveryP50 = s.sequential(ctx, st.RecoveryN)
	return st
}

// floodRate is the wrong tokens sent per second by the flood's clients
// together (the rate the issue measured), when the server keeps up.
const floodRate = 5000

// flood runs clients sending wrong tokens for w0 from 127.0.0.2, floodRate
// a second together, while w0 itself reads its agent in a closed loop from
// 127.0.0.1, for d.
func (s *overloadServe) flood(ctx context.Context, clients int, d time.Duration) floodStats {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	fc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: dialer.DialContext, MaxIdleConnsPerHost: clients + 4}}
	defer fc.CloseIdleConnections()
	wrong := map[string]string{"X-Svc-Project-Id": "bench0", "X-Svc-Agent-Id": "w0", "Authorization": "Bearer tla_wrong"}
	path := s.url + "/v3r1/projects/bench0/agents/w0"
	var sent, throttled atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	cpu0 := cpuTime()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			every := time.Duration(float64(time.Second) * float64(clients) / floodRate)
			for next := time.Now(); ctx.Err() == nil; next = next.Add(every) {
				if wait := time.Until(next); wait > 0 {
					time.Sleep(wait)
				}
				code, _ := send(ctx, fc, "GET", path, wrong, nil)
				if code == 0 {
					continue
				}
				sent.Add(1)
				if code == http.StatusTooManyRequests {
					throttled.Add(1)
				}
			}
		}()
	}
	var st floodStats
	var lat []time.Duration
	for ctx.Err() == nil {
		t0 := time.Now()
		code, _ := send(ctx, s.hc, "GET", path, s.wH, nil)
		switch {
		case code == http.StatusOK:
			lat = append(lat, time.Since(t0))
		case ctx.Err() == nil:
			st.Refused++
		}
	}
	wg.Wait()
	el := time.Since(start)
	st.CPUCores = (cpuTime() - cpu0).Seconds() / el.Seconds()
	st.N = len(lat) + st.Refused
	st.P50, st.P99 = quantile(lat, 0.5), quantile(lat, 0.99)
	if clients > 0 {
		st.FloodPerSec = float64(sent.Load()) / el.Seconds()
		st.Throttled = float64(throttled.Load()) / float64(max(sent.Load(), 1))
	}
	return st
}

// slowBodies opens n connections that each send the headers of a dispatch
// with a valid token and then its body one byte every 100 ms, and waits
// until serve has ended them all or d has passed.
func (s *overloadServe) slowBodies(ctx context.Context, n int, d time.Duration) slowStats {
	addr := strings.TrimPrefix(s.url, "http://")
	body := s.dispatchBody()
	cut := make(chan time.Duration, n)
	var conns []net.Conn
	start := time.Now()
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			continue
		}
		conns = append(conns, c)
		var hdr strings.Builder
		fmt.Fprintf(&hdr, "POST /v3r1/projects/bench0/turns:dispatch HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", len(body))
		for k, v := range s.reqH {
			fmt.Fprintf(&hdr, "%s: %s\r\n", k, v)
		}
		hdr.WriteString("\r\n")
		t0 := time.Now()
		done := make(chan struct{})
		go func() { // the cut: serve answers or closes
			defer close(done)
			if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
				cut <- time.Since(t0)
			}
		}()
		go func() { // the trickle
			if _, err := io.WriteString(c, hdr.String()); err != nil {
				return
			}
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for i := 0; i < len(body)-1; i++ {
				select {
				case <-done:
					return
				case <-t.C:
				}
				if _, err := c.Write(body[i : i+1]); err != nil {
					return
				}
			}
		}()
	}
	var st slowStats
	var lat []time.Duration
	timer := time.NewTimer(d)
	defer timer.Stop()
wait:
	for len(lat) < len(conns) {
		select {
		case l := <-cut:
			lat = append(lat, l)
		case <-timer.C:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	st.PhaseMS = float64(time.Since(start) / time.Millisecond)
	for _, c := range conns {
		c.Close()
	}
	st.Cut, st.Open = len(lat), len(conns)-len(lat)
	st.CutP50MS = quantile(lat, 0.5)
	return st
}

// conns opens n connections at once, each sending GET /healthz, and counts
// those answered until want of them are or a bound passes; it then closes
// release of the answered ones and counts the waiting ones then answered.
func (s *overloadServe) conns(ctx context.Context, n, want, release int) connStats {
	s.hc.CloseIdleConnections() // the cap counts every open connection
	addr := strings.TrimPrefix(s.url, "http://")
	answered := make(chan int, n)
	var conns []net.Conn
	for i := range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			continue
		}
		conns = append(conns, c)
		go func() {
			fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: bench\r\n\r\n")
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				resp.Body.Close()
				answered <- i
			}
		}()
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	count := func(want int, served map[int]bool) int {
		got := 0
		bound := time.NewTimer(3 * time.Second)
		defer bound.Stop()
		for got < want {
			select {
			case i := <-answered:
				served[i] = true
				got++
			case <-bound.C:
				return got
			case <-ctx.Done():
				return got
			}
		}
		// Any more that come at once (there should be none beyond the cap).
		settle := time.NewTimer(200 * time.Millisecond)
		defer settle.Stop()
		for {
			select {
			case i := <-answered:
				served[i] = true
				got++
			case <-settle.C:
				return got
			}
		}
	}
	served := map[int]bool{}
	st := connStats{Served: count(want, served)}
	st.Waiting = len(conns) - st.Served
	if release > 0 && st.Waiting > 0 {
		closed := 0
		for i := range served {
			if closed == release {
				break
			}
			conns[i].Close()
			closed++
		}
		st.Released = closed
		st.ServedAfterRelease = count(min(closed, st.Waiting), map[int]bool{})
	}
	return st
}

// bigFeed makes a Turn of w0 hold n records of about size bytes each.
func (s *overloadServe) bigFeed(ctx context.Context, n, size int) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	key := fmt.Sprintf("%s-%d", s.run, s.dispatch.Add(1))
	if _, err := s.reqC.DispatchTurn(ctx, "bench0", client.DispatchRequest{RequestedBy: s.req.ref(), TargetAgent: s.w.ref(),
		Input: map[string]any{}, TurnKind: "bench", DispatchKey: key, Authority: client.Root(key)}); err != nil {
		return fmt.Errorf("feed: dispatch: %w", err)
	}
	// w0 has capacity 1 and many queued Turns after the open loop: it
	// claims the oldest, which is as good as any.
	c, err := s.wC.ClaimTurn(ctx, "bench0", "w0", 0)
	if err != nil || c == nil {
		return fmt.Errorf("feed: claim: %v (claimed %v)", err, c != nil)
	}
	s.bigTurn = c.Claim.TurnID
	text := strings.Repeat("x", size)
	for i := range n {
		if _, err := s.wC.AppendSemanticRecord(ctx, c.Claim, "note", map[string]any{"i": i, "text": text}); err != nil {
			return fmt.Errorf("feed: record %d: %w", i, err)
		}
	}
	return nil
}

// feedReaders runs readers that each read the big Turn's feed from its
// start to its end with limit=500, again and again, for d (a page under way
// then is read to its end, so that every reader reads one at least), and
// samples the process's RSS and Go heap meanwhile.
func (s *overloadServe) feedReaders(ctx context.Context, readers int, d time.Duration) (feedStats, error) {
	var st feedStats
	runtime.GC()
	st.HeapBeforeMB, st.RSSBeforeMB = heapMiB(), rssMiB()
	var peak, heapPeak atomic.Int64
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if kb := rssKiB(os.Getpid(), "VmRSS"); kb > peak.Load() {
				peak.Store(kb)
			}
			if h := int64(heapMiB() * (1 << 20)); h > heapPeak.Load() {
				heapPeak.Store(h)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	hc := &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: readers + 4}}
	defer hc.CloseIdleConnections()
	adm := map[string]string{"Authorization": "Bearer " + s.admin}
	end := time.Now().Add(d)
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for after := uint64(0); time.Now().Before(end) && ctx.Err() == nil; {
				code, n, page := s.feedPage(ctx, hc, adm, after)
				mu.Lock()
				if code != http.StatusOK {
					firstErr = cmpErr(firstErr, fmt.Errorf("feed page after %d: HTTP %d", after, code))
					mu.Unlock()
					return
				}
				st.Pages++
				st.MaxPageBytes = max(st.MaxPageBytes, n)
				mu.Unlock()
				after = page.Next
				if !page.HasMore {
					after = 0 // from the start again
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	st.RSSPeakMB, st.HeapPeakMB = float64(peak.Load())/1024, float64(heapPeak.Load())/(1<<20)
	st.RSSAfterMB = rssMiB()
	return st, firstErr
}

type feedPageHead struct {
	Next    uint64 `json:"next_after_ledger_seq"`
	HasMore bool   `json:"has_more"`
}

// feedPage reads one page of the big Turn's feed: its status, its size and
// its cursor.
func (s *overloadServe) feedPage(ctx context.Context, hc *http.Client, headers map[string]string, after uint64) (int, int, feedPageHead) {
	var page feedPageHead
	req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/v3r1/projects/bench0/turns/%s/feed?limit=500&after_ledger_seq=%d", s.url, s.bigTurn, after), nil)
	if err != nil {
		return 0, 0, page
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0, page
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || json.Unmarshal(data, &page) != nil {
		return 0, len(data), page
	}
	return resp.StatusCode, len(data), page
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

func rssMiB() float64 { return float64(rssKiB(os.Getpid(), "VmRSS")) / 1024 }

// heapMiB is the size of the Go heap's objects, live or not yet swept.
func heapMiB() float64 {
	m := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	rtmetrics.Read(m)
	return float64(m[0].Value.Uint64()) / (1 << 20)
}

func (r *OverloadResult) print(w io.Writer) {
	pct := func(n, of int) float64 { return 100 * float64(n) / float64(max(of, 1)) }
	fmt.Fprintf(w, "protections off (before) and on (serve's defaults); each timed phase %.2f s; server and load generator share the process\n", r.PhaseSeconds)
	fmt.Fprintf(w, "capacity: %d dispatchers in a closed loop, %.0f dispatches/s; one dispatch alone p50 %.2f ms\n", r.Dispatchers, r.CapacityPerSec, r.IdleP50)
	fmt.Fprintf(w, "open loop at %.1f× capacity (%.0f dispatches/s):\n", r.Factor, r.OpenLoop.On.RatePerSec)
	for _, x := range []struct {
		name string
		s    openLoopStats
	}{{"off", r.OpenLoop.Off}, {"on", r.OpenLoop.On}} {
		s := x.s
		fmt.Fprintf(w, "  %-3s sent %d: %d (%.0f %%) 200 with p50 %.1f ms, p99 %.1f ms; %d (%.0f %%) 503 with p50 %.1f ms; %d failed; last answer %.2f s after the load; then %d/%d dispatches 200, p50 %.2f ms\n",
			x.name, s.Sent, s.OK, pct(s.OK, s.Sent), s.OKP50, s.OKP99, s.Shed, pct(s.Shed, s.Sent), s.ShedP50, s.Failed, s.DrainSeconds, s.RecoveryOK, s.RecoveryN, s.RecoveryP50)
	}
	fmt.Fprintf(w, "wrong-token flood: %d clients from another address send %d wrong tokens/s naming the real agent, which reads itself in a closed loop:\n", r.Flood.Clients, floodRate)
	fmt.Fprintf(w, "  alone  real agent n=%d p50 %.2f ms p99 %.2f ms, refused %d; process CPU %.2f cores\n", r.Flood.Alone.N, r.Flood.Alone.P50, r.Flood.Alone.P99, r.Flood.Alone.Refused, r.Flood.Alone.CPUCores)
	for _, x := range []struct {
		name string
		s    floodStats
	}{{"off", r.Flood.Off}, {"on", r.Flood.On}} {
		fmt.Fprintf(w, "  %-6s flood %.0f/s, %.1f %% answered 429; real agent n=%d p50 %.2f ms p99 %.2f ms, refused %d; process CPU %.2f cores\n", x.name, x.s.FloodPerSec, 100*x.s.Throttled, x.s.N, x.s.P50, x.s.P99, x.s.Refused, x.s.CPUCores)
	}
	fmt.Fprintf(w, "slow bodies: %d clients send a dispatch's headers, then its body a byte every 100 ms:\n", r.SlowBodies.Clients)
	fmt.Fprintf(w, "  off  %d cut, %d still open after %.1f s\n", r.SlowBodies.Off.Cut, r.SlowBodies.Off.Open, r.SlowBodies.Off.PhaseMS/1000)
	fmt.Fprintf(w, "  on   (--read-timeout %.0f ms) %d cut after p50 %.0f ms, %d still open\n", r.SlowBodies.ReadTimeoutMS, r.SlowBodies.On.Cut, r.SlowBodies.On.CutP50MS, r.SlowBodies.On.Open)
	fmt.Fprintf(w, "connections: %d opened at once, each asking /healthz:\n", r.Conns.Opened)
	fmt.Fprintf(w, "  off  %d served, %d waiting\n", r.Conns.Off.Served, r.Conns.Off.Waiting)
	fmt.Fprintf(w, "  on   (--max-conns %d) %d served, %d waiting; %d closed, then %d of the waiting served\n", r.Conns.Cap, r.Conns.On.Served, r.Conns.On.Waiting, r.Conns.On.Released, r.Conns.On.ServedAfterRelease)
	fmt.Fprintf(w, "large events: %d of %d KiB in one Turn's feed, %d readers with limit=500:\n", r.Feed.Events, r.Feed.EventBytes>>10, r.Feed.Readers)
	for _, x := range []struct {
		name string
		s    feedStats
	}{{"on", r.Feed.On}, {"off", r.Feed.Off}} {
		fmt.Fprintf(w, "  %-3s  %d pages, the largest %.1f MiB; Go heap %.0f MiB before, %.0f MiB at peak; process RSS %.0f MiB before, %.0f MiB at peak, %.0f MiB after\n", x.name, x.s.Pages, float64(x.s.MaxPageBytes)/(1<<20), x.s.HeapBeforeMB, x.s.HeapPeakMB, x.s.RSSBeforeMB, x.s.RSSPeakMB, x.s.RSSAfterMB)
	}
}
