package natstest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/turnledger/turnledger/internal/checkfor"
)

// ProcCluster is a JetStream cluster of nats-server processes on loopback:
// the real server binary, built from the module this project already
// requires, so that a server can be killed with SIGKILL — a crash, with no
// chance to hand over its leaderships — rather than shut down.
//
// Ports are the kernel's: client ports are 127.0.0.1:-1, read back from the
// server's ports file; route ports, which every server must know before it
// starts, are drawn from the kernel by listening on 127.0.0.1:0 and closing
// again just before the servers start.
type ProcCluster struct {
	t     testing.TB
	Nodes []*ProcNode
}

// ProcNode is one nats-server process of a ProcCluster.
type ProcNode struct {
	Name       string
	ClientURL  string
	RouteURL   string
	MonitorURL string // the HTTP monitoring endpoint (/jsz, /varz)
	cmd        *exec.Cmd
	done       chan struct{}
}

var (
	serverBinOnce sync.Once
	serverBin     string
	serverBinErr  error
)

// ServerBinary builds the nats-server binary of the module's nats-server
// version once per test process and returns its path.
func ServerBinary(t testing.TB) string {
	t.Helper()
	serverBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "turnledger-nats-server-")
		if err != nil {
			serverBinErr = err
			return
		}
		serverBin = filepath.Join(dir, "nats-server")
		if out, err := exec.Command("go", "build", "-o", serverBin, "github.com/nats-io/nats-server/v2").CombinedOutput(); err != nil {
			serverBinErr = fmt.Errorf("go build nats-server: %v\n%s", err, out)
		}
	})
	if serverBinErr != nil {
		t.Fatal(serverBinErr)
	}
	return serverBin
}

// NewProcCluster starts n nats-server processes as one JetStream cluster
// and waits until it has a meta leader. Every process is killed at the end
// of the test.
func NewProcCluster(t testing.TB, n int) *ProcCluster {
	t.Helper()
	bin := ServerBinary(t)
	c := &ProcCluster{t: t}
	routes := make([]string, n)
	for i := range routes {
		routes[i] = freeLoopbackAddr(t)
	}
	for i := range n {
		c.Nodes = append(c.Nodes, startProc(t, bin, fmt.Sprintf("n%d", i+1), routes[i], routes))
	}
	nc := ConnectURL(t, c.URLs())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	checkfor.Until(t, 30*time.Second, "the JetStream cluster to elect a meta leader", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
	return c
}

// freeLoopbackAddr returns a loopback address with a port the kernel hands
// out, free when it returns.
func freeLoopbackAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startProc(t testing.TB, bin, name, listen string, all []string) *ProcNode {
	t.Helper()
	dir := t.TempDir()
	var rs []string
	for _, a := range all {
		if a != listen {
			rs = append(rs, fmt.Sprintf("%q", "nats-route://"+a))
		}
	}
	routes := "routes: [" + strings.Join(rs, ", ") + "]"
	conf := fmt.Sprintf(`server_name: %s
listen: "127.0.0.1:-1"
http: "127.0.0.1:-1"
ports_file_dir: %q
jetstream { store_dir: %q }
cluster {
  name: turnledger-test
  listen: %q
  %s
}
`, name, dir, filepath.Join(dir, "js"), listen, routes)
	confPath := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", confPath)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &ProcNode{Name: name, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); log.Close(); close(p.done) }()
	t.Cleanup(func() { p.Kill() })
	portsFile := filepath.Join(dir, fmt.Sprintf("nats-server_%d.ports", cmd.Process.Pid))
	checkfor.Until(t, 20*time.Second, "nats-server "+name+" to write its ports", func() bool {
		data, err := os.ReadFile(portsFile)
		if err != nil {
			return false
		}
		var ports struct {
			Nats       []string `json:"nats"`
			Cluster    []string `json:"cluster"`
			Monitoring []string `json:"monitoring"`
		}
		if json.Unmarshal(data, &ports) != nil || len(ports.Nats) == 0 || len(ports.Cluster) == 0 || len(ports.Monitoring) == 0 {
			return false
		}
		p.ClientURL, p.RouteURL, p.MonitorURL = ports.Nats[0], strings.Replace(ports.Cluster[0], "nats://", "nats-route://", 1), ports.Monitoring[0]
		return true
	})
	return p
}

// URLs is every node's client URL, comma-separated.
func (c *ProcCluster) URLs() string {
	var urls []string
	for _, p := range c.Nodes {
		urls = append(urls, p.ClientURL)
	}
	return strings.Join(urls, ",")
}

// Node returns the node with the server name, or nil.
func (c *ProcCluster) Node(name string) *ProcNode {
	for _, p := range c.Nodes {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// StreamLeader returns the name of the server that leads the stream, as the
// cluster reports it to a client (empty while it has none).
func (c *ProcCluster) StreamLeader(js jetstream.JetStream, stream string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return ""
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil {
		return ""
	}
	return info.Cluster.Leader
}

// jsz is the part of a server's /jsz monitoring report the leader views
// read: its own view of the meta group and of each stream's raft group.
type jsz struct {
	Meta *struct {
		Leader string `json:"leader"`
	} `json:"meta_cluster"`
	Accounts []struct {
		Streams []struct {
			Name    string `json:"name"`
			Cluster *struct {
				Leader string `json:"leader"`
			} `json:"cluster"`
		} `json:"stream_detail"`
	} `json:"account_details"`
}

// views asks every live node's monitoring endpoint for its /jsz report. A
// node answers from its own state at once, also while a group has no
// leader, unlike a JetStream API request, which waits for a leader.
func (c *ProcCluster) views() []jsz {
	hc := &http.Client{Timeout: 500 * time.Millisecond}
	var out []jsz
	for _, p := range c.Nodes {
		if p.Gone() {
			continue
		}
		resp, err := hc.Get(p.MonitorURL + "/jsz?accounts=true&streams=true")
		if err != nil {
			continue
		}
		var v jsz
		if json.NewDecoder(resp.Body).Decode(&v) == nil {
			out = append(out, v)
		}
		resp.Body.Close()
	}
	return out
}

// MetaLeader returns the name of the server that leads the JetStream meta
// group as the live nodes see it: the name every live node reports (empty
// while they do not agree, there is none, or no node answers).
func (c *ProcCluster) MetaLeader() string {
	return agreed(c.views(), func(v jsz) string {
		if v.Meta == nil {
			return ""
		}
		return v.Meta.Leader
	})
}

// StreamLeaderNow returns the name of the server that leads the stream as
// the live nodes see it (see MetaLeader), without waiting for one.
func (c *ProcCluster) StreamLeaderNow(stream string) string {
	return agreed(c.views(), func(v jsz) string {
		for _, a := range v.Accounts {
			for _, st := range a.Streams {
				if st.Name == stream && st.Cluster != nil {
					return st.Cluster.Leader
				}
			}
		}
		return ""
	})
}

// agreed is the leader every view names, or "".
func agreed(views []jsz, leader func(jsz) string) string {
	name := ""
	for i, v := range views {
		l := leader(v)
		if l == "" || (i > 0 && l != name) {
			return ""
		}
		name = l
	}
	return name
}

// Kill sends SIGKILL to the node and waits until it is gone.
func (p *ProcNode) Kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Gone reports whether the node's process has ended.
func (p *ProcNode) Gone() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
