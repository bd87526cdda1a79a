package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/turnledger/turnledger/ledger"
)

// The readscale scenario: do feed reads scale with serve instances on one
// NATS server (docs/cluster.md)? The ledger is made as the feed scenario
// makes it (the same data directory layout: dir/nats holds the JetStream
// store, dir/projections.db the projections, so a directory of the feed
// scenario is reused). Then the bench runs that store's NATS server itself,
// on a loopback port (ledger.StartEmbedded, as serve's embedded server but
// listening), and --instances `turnledger serve --nats-url` child processes
// on it, each with a projections file of its own. --readers readers in a
// closed loop read feed pages of 100 from random cursors of the ledger's
// last tenth, spread over the first k instances, for k = 1 … --instances,
// --duration each, in rounds that alternate.
//
// On a machine with few cores the instances share the cores, and a second
// instance cannot get CPU the first did not use already. So the scenario
// measures the CPU each serve used (from /proc) and reports pages per
// second of serve CPU beside the raw pages/s; with --pin each serve is
// bound to a core of its own (taskset), and --gomaxprocs sets each serve's
// GOMAXPROCS, so that k instances get k times the CPU of one.

// ReadScaleResult is what the readscale scenario measured.
type ReadScaleResult struct {
	Readers    int  `json:"readers"`
	Instances  int  `json:"instances"`
	GOMAXPROCS int  `json:"serve_gomaxprocs"` // each serve's GOMAXPROCS; 0: Go's default
	Pinned     bool `json:"pinned"`           // serve i bound to core i mod Cores (taskset)
	// BenchCores are the cores the bench process (readers and NATS server)
	// was bound to with --pin, when there were more cores than instances.
	BenchCores string `json:"bench_cores,omitempty"`
	Cores      int    `json:"machine_cores"`
	// Phases are the timed phases in the order they ran.
	Phases []ReadPhase `json:"phases"`
	// ByInstances sums the phases of each instance count (index k-1).
	ByInstances []ReadPhase `json:"by_instances"`
	// Ratio is pages/s with the most instances ÷ pages/s with one;
	// PerCoreRatio the same for pages per second of serve CPU.
	Ratio        float64 `json:"pages_ratio"`
	PerCoreRatio float64 `json:"pages_per_serve_core_ratio"`
	// IdenticalPages is how many pages (at as many cursors) every instance
	// answered with the same body, byte for byte; the run fails otherwise.
	IdenticalPages int `json:"identical_pages"`
}

// ReadPhase is one timed phase: readers on the first Instances serves.
type ReadPhase struct {
	Instances int     `json:"instances"`
	Seconds   float64 `json:"seconds"`
	Pages     int64   `json:"pages"`
	// PagesByInstance counts the pages each instance answered.
	PagesByInstance []int64 `json:"pages_by_instance"`
	PagesPerSec     float64 `json:"pages_per_second"`
	P50             float64 `json:"p50_ms"`
	P99             float64 `json:"p99_ms"`
	Errors          int64   `json:"errors"`
	// ServeCPU is the CPU each serve used (cores: CPU seconds per second),
	// the idle ones too; BenchCPU the bench process's (the readers and the
	// NATS server).
	ServeCPU []float64 `json:"serve_cpu_cores"`
	BenchCPU float64   `json:"bench_cpu_cores"`
	// MachineCPU is the cores the whole machine was busy (/proc/stat):
	// with other processes', what was left of the cores to the run.
	MachineCPU float64 `json:"machine_busy_cores"`
	// PagesPerServeCore is PagesPerSec ÷ the serves' CPU summed: pages per
	// second of serve CPU.
	PagesPerServeCore float64 `json:"pages_per_serve_core_second"`
}

// readScale runs the readscale scenario (see above).
func (b *bench) readScale(ctx context.Context) (*Result, error) {
	dir, cleanup, err := b.dataDir()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	var wrap []string
	ts := ""
	if b.cfg.Pin {
		if ts, err = exec.LookPath("taskset"); err != nil {
			return nil, errors.New("--pin needs taskset (util-linux) on PATH")
		}
		wrap = []string{ts, "-c"}
	}
	res := &Result{Scenario: "readscale", Events: b.cfg.Events}
	if err := b.fill(ctx, dir, res); err != nil {
		return nil, err
	}
	self := b.cfg.Binary
	if self == "" {
		if self, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	// The ledger's NATS server, listening on loopback for the instances.
	ecfg := ledger.DefaultEmbeddedConfig(filepath.Join(dir, "nats"))
	ecfg.Port = -1
	emb, err := ledger.StartEmbedded(ecfg)
	if err != nil {
		return nil, err
	}
	defer emb.Close()
	natsURL := emb.ClientURL()
	if cores := runtime.NumCPU(); ts != "" && cores > b.cfg.Instances {
		// The cores no instance is bound to are the bench's (the readers
		// and the NATS server), every thread of it, so that no instance
		// shares its core.
		list := fmt.Sprintf("%d-%d", b.cfg.Instances, cores-1)
		if out, err := exec.CommandContext(ctx, ts, "-a", "-p", "-c", list, strconv.Itoa(os.Getpid())).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("taskset the bench to cores %s: %v: %s", list, err, out)
		}
		res.ReadScale = &ReadScaleResult{BenchCores: list}
	}
	head, err := streamHead(ctx, emb)
	if err != nil {
		return nil, err
	}
	b.say("NATS server at %s, ledger of %d events; starting %d serve instances…", natsURL, head, b.cfg.Instances)
	rs := &ReadScaleResult{Readers: b.cfg.Readers, Instances: b.cfg.Instances, GOMAXPROCS: b.cfg.GOMAXPROCS, Pinned: b.cfg.Pin, Cores: runtime.NumCPU()}
	if res.ReadScale != nil {
		rs.BenchCores = res.ReadScale.BenchCores
	}
	res.ReadScale = rs
	// The other instances' copies of the projections go when the run ends
	// (after the instances: deferred first).
	defer os.RemoveAll(filepath.Join(dir, "readscale"))
	serves := make([]*child, b.cfg.Instances)
	defer func() {
		for _, s := range serves {
			if s != nil {
				s.stop()
			}
		}
	}()
	for i := range serves {
		// Instance 0 serves the projections the ledger was made with; each
		// other one a copy of them in a directory of its own, so that it
		// starts caught up instead of folding the whole ledger again.
		sdir := dir
		if i > 0 {
			sdir = filepath.Join(dir, "readscale", strconv.Itoa(i))
			if err := os.MkdirAll(sdir, 0o700); err != nil {
				return nil, err
			}
			if err := copyFile(filepath.Join(dir, "projections.db"), filepath.Join(sdir, "projections.db")); err != nil {
				return nil, err
			}
		}
		argv := []string{self}
		if wrap != nil {
			argv = append(slices.Clone(wrap), strconv.Itoa(i%rs.Cores), self)
		}
		var env []string
		if b.cfg.GOMAXPROCS > 0 {
			env = append(env, "GOMAXPROCS="+strconv.Itoa(b.cfg.GOMAXPROCS))
		}
		s, err := startChildWith(ctx, argv, sdir, []string{"--nats-url", natsURL}, env)
		if err != nil {
			return nil, fmt.Errorf("serve instance %d: %w", i, err)
		}
		serves[i] = s
		if err := s.awaitLoaded(ctx); err != nil {
			return nil, fmt.Errorf("serve instance %d: %w", i, err)
		}
	}
	// Warm up: every instance answers pages from all over the ledger first.
	for _, s := range serves {
		if _, err := readPages(ctx, []*child{s}, 1, 4, head, 200, 0, true); err != nil {
			return nil, err
		}
	}
	for range b.cfg.Rounds {
		for k := 1; k <= b.cfg.Instances; k++ {
			b.say("reading with %d readers from %d instance(s) for %v…", b.cfg.Readers, k, b.cfg.Duration)
			ph, err := readPages(ctx, serves, k, b.cfg.Readers, head, 0, b.cfg.Duration, false)
			if err != nil {
				return nil, err
			}
			rs.Phases = append(rs.Phases, ph)
		}
	}
	rs.sum()
	if rs.IdenticalPages, err = identicalPages(ctx, serves, head, 20); err != nil {
		return nil, err
	}
	res.LedgerMB = dirMiB(filepath.Join(dir, "nats"))
	res.ProjectionsMB = dirMiB(filepath.Join(dir, "projections.db"))
	return res, nil
}

// streamHead is the last ledger_seq of the ledger's stream on emb.
func streamHead(ctx context.Context, emb *ledger.Embedded) (uint64, error) {
	nc, err := emb.Connect()
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	st, err := js.Stream(ctx, ledger.DefaultConfig().Stream)
	if err != nil {
		return 0, fmt.Errorf("the ledger's stream: %w", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}

// readPages has readers read feed pages of 100 of the bench project from
// the first k of all the serves (reader r from serve r mod k), in a closed
// loop: n pages each when n > 0, else for d. The cursors are random in the
// ledger's last tenth, or (anywhere) all over it. The CPU of every serve is
// measured, the idle ones' too.
func readPages(ctx context.Context, all []*child, k, readers int, head uint64, n int, d time.Duration, anywhere bool) (ReadPhase, error) {
	serves := all[:k]
	ph := ReadPhase{Instances: k, PagesByInstance: make([]int64, k)}
	cpu0 := make([]time.Duration, len(all))
	for i, s := range all {
		cpu0[i] = procCPU(s.cmd.Process.Pid)
	}
	bench0, machine0 := cpuTime(), machineBusy()
	lats := make([][]time.Duration, readers)
	var errs atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := serves[r%len(serves)]
			c := newConn(s.url)
			if c == nil {
				first.CompareAndSwap(nil, "not an http:// URL: "+s.url)
				errs.Add(1)
				return
			}
			defer c.close()
			hc := &http.Client{Transport: c}
			rng := rand.New(rand.NewPCG(rand.Uint64(), uint64(r)))
			for i := 0; n > 0 && i < n || n == 0 && time.Now().Before(deadline); i++ {
				after := cursor(rng, head, anywhere)
				t0 := time.Now()
				_, err := feedPage(ctx, hc, s, after)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					errs.Add(1)
					first.CompareAndSwap(nil, err.Error())
					continue
				}
				lats[r] = append(lats[r], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	var cpu float64
	ph.ServeCPU = make([]float64, len(all))
	for i, s := range all {
		ph.ServeCPU[i] = (procCPU(s.cmd.Process.Pid) - cpu0[i]).Seconds() / secs
		cpu += ph.ServeCPU[i]
	}
	ph.BenchCPU = (cpuTime() - bench0).Seconds() / secs
	ph.MachineCPU = (machineBusy() - machine0).Seconds() / secs
	var lat []time.Duration
	for r, l := range lats {
		lat = append(lat, l...)
		ph.PagesByInstance[r%k] += int64(len(l))
	}
	ph.Seconds = secs
	ph.Pages = int64(len(lat))
	ph.PagesPerSec = float64(ph.Pages) / ph.Seconds
	ph.P50, ph.P99 = quantile(lat, 0.5), quantile(lat, 0.99)
	if cpu > 0 {
		ph.PagesPerServeCore = ph.PagesPerSec / cpu
	}
	ph.Errors = errs.Load()
	if msg, ok := first.Load().(string); ok {
		return ph, fmt.Errorf("feed pages from %d instance(s): %d errors, the first: %s", len(serves), ph.Errors, msg)
	}
	return ph, ctx.Err()
}

// cursor is a random after_ledger_seq: in the ledger's last tenth, as a
// reader following a long ledger reads, or anywhere.
func cursor(rng *rand.Rand, head uint64, anywhere bool) uint64 {
	if anywhere {
		return rng.Uint64N(max(head, 1))
	}
	tenth := max(head/10, 1)
	return head - tenth + rng.Uint64N(tenth)
}

// feedPage reads one page of 100 of the bench project's feed from s after
// the cursor, and returns its body. The body is read whole and not decoded:
// the readers share the machine's cores with the serves they measure, and
// what decoding would cost them is taken from the serves.
func feedPage(ctx context.Context, hc *http.Client, s *child, after uint64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		s.url+"/v3r1/projects/bench0/projection/feed?limit=100&after_ledger_seq="+strconv.FormatUint(after, 10), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.admin)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("feed page after %d from %s: %d %.200s", after, s.url, resp.StatusCode, body)
	}
	return body, nil
}

// identicalPages reads the pages at n random cursors of the ledger and the
// page at its end from every serve and returns how many were the same body
// on every one, or an error naming the first that was not.
func identicalPages(ctx context.Context, serves []*child, head uint64, n int) (int, error) {
	hc := newHTTPClient(1)
	defer hc.CloseIdleConnections()
	rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
	cursors := []uint64{max(head, 100) - 100}
	for range n {
		cursors = append(cursors, cursor(rng, head, true))
	}
	for _, after := range cursors {
		var first []byte
		for i, s := range serves {
			body, err := feedPage(ctx, hc, s, after)
			if err != nil {
				return 0, err
			}
			if i == 0 {
				first = body
			} else if !bytes.Equal(body, first) {
				return 0, fmt.Errorf("the feed page after ledger_seq %d differs between instance 0 (%d bytes) and instance %d (%d bytes)", after, len(first), i, len(body))
			}
		}
	}
	return len(cursors), nil
}

// sum fills ByInstances and the ratios from the phases.
func (rs *ReadScaleResult) sum() {
	rs.ByInstances = make([]ReadPhase, rs.Instances)
	p50s := make([][]float64, rs.Instances)
	p99s := make([][]float64, rs.Instances)
	for _, ph := range rs.Phases {
		s := &rs.ByInstances[ph.Instances-1]
		s.Instances = ph.Instances
		s.Seconds += ph.Seconds
		s.Pages += ph.Pages
		s.Errors += ph.Errors
		if s.PagesByInstance == nil {
			s.PagesByInstance = make([]int64, ph.Instances)
			s.ServeCPU = make([]float64, len(ph.ServeCPU))
		}
		for i, p := range ph.PagesByInstance {
			s.PagesByInstance[i] += p
		}
		// CPU in core-seconds while summing; cores again below.
		for i, c := range ph.ServeCPU {
			s.ServeCPU[i] += c * ph.Seconds
		}
		s.BenchCPU += ph.BenchCPU * ph.Seconds
		s.MachineCPU += ph.MachineCPU * ph.Seconds
		p50s[ph.Instances-1] = append(p50s[ph.Instances-1], ph.P50)
		p99s[ph.Instances-1] = append(p99s[ph.Instances-1], ph.P99)
	}
	for k := range rs.ByInstances {
		s := &rs.ByInstances[k]
		if s.Seconds == 0 {
			continue
		}
		var cpu float64
		for i := range s.ServeCPU {
			s.ServeCPU[i] /= s.Seconds
			cpu += s.ServeCPU[i]
		}
		s.BenchCPU /= s.Seconds
		s.MachineCPU /= s.Seconds
		s.PagesPerSec = float64(s.Pages) / s.Seconds
		if cpu > 0 {
			s.PagesPerServeCore = s.PagesPerSec / cpu
		}
		// The rounds' quantiles are not summable: the worst round's.
		s.P50, s.P99 = maxOf(p50s[k]), maxOf(p99s[k])
	}
	one, most := rs.ByInstances[0], rs.ByInstances[len(rs.ByInstances)-1]
	if one.PagesPerSec > 0 {
		rs.Ratio = most.PagesPerSec / one.PagesPerSec
	}
	if one.PagesPerServeCore > 0 {
		rs.PerCoreRatio = most.PagesPerServeCore / one.PagesPerServeCore
	}
}

func maxOf(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

func (rs *ReadScaleResult) print(w io.Writer, events int) {
	how := "Go's default GOMAXPROCS"
	if rs.GOMAXPROCS > 0 {
		how = fmt.Sprintf("GOMAXPROCS=%d", rs.GOMAXPROCS)
	}
	if rs.Pinned {
		how += fmt.Sprintf(", instance i bound to core i mod %d (taskset)", rs.Cores)
		if rs.BenchCores != "" {
			how += ", the bench to cores " + rs.BenchCores
		}
	}
	fmt.Fprintf(w, "%d events; %d readers, feed pages of 100 from random cursors of the last tenth; serve instances on one NATS server (%s) on %d cores\n", events, rs.Readers, how, rs.Cores)
	for _, ph := range rs.Phases {
		fmt.Fprintf(w, "  %d instance(s) %5.1f s: %8.0f pages/s  p50 %6.2f ms  p99 %6.2f ms  serve CPU %s cores  bench (readers + NATS) %.2f  machine busy %.2f of %d  → %.0f pages per serve core-second\n",
			ph.Instances, ph.Seconds, ph.PagesPerSec, ph.P50, ph.P99, cores(ph.ServeCPU), ph.BenchCPU, ph.MachineCPU, rs.Cores, ph.PagesPerServeCore)
	}
	one := rs.ByInstances[0]
	for _, s := range rs.ByInstances {
		var cpu float64
		for _, c := range s.ServeCPU {
			cpu += c
		}
		fmt.Fprintf(w, "%d instance(s): %.0f pages/s (%.0f per instance), serve CPU %.2f cores (%.2f per instance), bench %.2f, machine busy %.2f of %d; %.0f pages per serve core-second, worst p50 %.2f ms, p99 %.2f ms, pages by instance %v\n",
			s.Instances, s.PagesPerSec, s.PagesPerSec/float64(s.Instances), cpu, cpu/float64(s.Instances), s.BenchCPU, s.MachineCPU, rs.Cores, s.PagesPerServeCore, s.P50, s.P99, s.PagesByInstance)
	}
	most := rs.ByInstances[len(rs.ByInstances)-1]
	perInst := 0.0
	if one.PagesPerSec > 0 {
		perInst = most.PagesPerSec / float64(most.Instances) / one.PagesPerSec
	}
	fmt.Fprintf(w, "%d instances ÷ 1: pages/s %.2f×, per instance %.2f×, pages per serve core-second %.2f×; %d pages identical on every instance\n",
		most.Instances, rs.Ratio, perInst, rs.PerCoreRatio, rs.IdenticalPages)
}

func cores(v []float64) string {
	s := make([]string, len(v))
	for i, c := range v {
		s[i] = fmt.Sprintf("%.2f", c)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// procCPU is the user and system CPU time of process pid, from
// /proc/<pid>/stat; 0 where there is none.
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name (which may hold spaces) in ")":
	// state is field 3, utime 14 and stime 15, in clock ticks.
	at := bytes.LastIndexByte(data, ')')
	if at < 0 {
		return 0
	}
	f := strings.Fields(string(data[at+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * time.Second / clockTicks
}

// machineBusy is the CPU time every core of the machine spent on anything
// but idling and waiting for I/O since boot, from /proc/stat; 0 where
// there is none.
func machineBusy() time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal …
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for i, v := range f[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		busy += n
	}
	return time.Duration(busy) * time.Second / clockTicks
}

// clockTicks is the kernel's USER_HZ, the unit of /proc's CPU times: 100 on
// every Linux architecture Go runs on.
const clockTicks = 100

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
