package main

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/turnledger/turnledger/internal/natstest"
)

// freezingProxy forwards TCP connections to a NATS server until it is
// frozen: then it stops forwarding in both directions but keeps every
// connection open, as a crashed host or a network partition does (nothing
// closes the TCP connection, so only a missing answer tells).
type freezingProxy struct {
	ln     net.Listener
	target string
	frozen chan struct{} // closed by freeze
	closed chan struct{} // closed at the end of the test
	once   sync.Once
	mu     sync.Mutex
	conns  []net.Conn
}

func startFreezingProxy(t *testing.T, target string) *freezingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezingProxy{ln: ln, target: target, frozen: make(chan struct{}), closed: make(chan struct{})}
	go p.serve()
	t.Cleanup(func() {
		close(p.closed)
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	})
	return p
}

func (p *freezingProxy) URL() string { return "nats://" + p.ln.Addr().String() }

func (p *freezingProxy) freeze() { p.once.Do(func() { close(p.frozen) }) }

func (p *freezingProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		select {
		case <-p.frozen:
			// A frozen host takes no new connections either: it holds them
			// unanswered.
			p.track(c)
			continue
		default:
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.track(c)
		p.track(s)
		go p.pipe(s, c)
		go p.pipe(c, s)
	}
}

func (p *freezingProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

// pipe copies src to dst until the proxy is frozen, then holds both open.
func (p *freezingProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-p.frozen:
			<-p.closed
			return
		default:
		}
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestServeLeavesAFrozenNATSServer connects serve to one server of a
// three-server cluster through a proxy, then freezes the proxy: the server
// neither answers nor closes the connection. serve notices by its pings
// (natsPingInterval, natsMaxPingsOut) and goes on through another server of
// the cluster, so a command sent after the freeze answers 200 within the
// ledger's retry bound rather than a 503 after it (with the client's
// default pings, 2 minutes apart, it would not notice for minutes).
func TestServeLeavesAFrozenNATSServer(t *testing.T) {
	c := natstest.NewCluster(t, 3)
	u, err := url.Parse(c.Servers[0].ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	p := startFreezingProxy(t, u.Host)
	s := startClusterService(t, p.URL(), 3, nil)
	admin := client{t: t, base: s.URL(), headers: map[string]string{"Authorization": "Bearer " + clusterAdminToken}}
	req := agentClient(t, admin, "p1", "req", 1, "turns:dispatch", "projections:read")
	agentClient(t, admin, "p1", "worker", 1)
	req.call("POST", "/v3r1/projects/p1/turns:dispatch", dispatchBody("p1", "before"), 200)

	p.freeze()
	start := time.Now()
	code, body, _, err := do(s.URL(), "POST", "/v3r1/projects/p1/turns:dispatch", req.headers, dispatchBody("p1", "after"))
	took := time.Since(start)
	var tv struct {
		TurnID string `json:"turn_id"`
	}
	if err != nil || code != http.StatusOK || json.Unmarshal(body, &tv) != nil || tv.TurnID == "" {
		t.Fatalf("dispatch after the NATS server froze = %d %s %v (after %v), want 200", code, body, err, took)
	}
	if bound := s.Config().Ledger.RetryFor; took > bound {
		t.Errorf("dispatch after the NATS server froze took %v, want within the ledger's retry bound %v", took, bound)
	}
	if got := s.NATS().ConnectedUrl(); got == p.URL() {
		t.Errorf("serve is still connected through the frozen proxy")
	}
	t.Logf("a dispatch sent when its NATS server froze answered 200 after %v, through %s", took.Round(time.Millisecond), s.NATS().ConnectedUrl())
}
