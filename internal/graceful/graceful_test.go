package graceful

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestShutdownDoesNotWaitForAConnectionWithoutARequest: a client's connection
// that never sent a request (a spare dial) does not hold a server's shutdown,
// while a request being served finishes before Shutdown returns.
func TestShutdownDoesNotWaitForAConnectionWithoutARequest(t *testing.T) {
	entered, release, answered := make(chan struct{}), make(chan struct{}), make(chan string, 1)
	states := make(chan http.ConnState, 16) // the server's own hook, still called
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(entered)
			<-release
		}
		io.WriteString(w, "ok")
	}), ConnState: func(_ net.Conn, st http.ConnState) {
		select {
		case states <- st:
		default:
		}
	}}
	CloseFreshConns(hs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	spare, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer spare.Close()
	// The listener accepts in order: once a later connection is answered,
	// the spare one has been accepted and counted.
	get := func(path string) (string, error) {
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := c.Get("http://" + ln.Addr().String() + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if _, err := get("/"); err != nil {
		t.Fatal(err)
	}
	slow, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	io.WriteString(slow, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	go func() {
		b, _ := io.ReadAll(slow)
		answered <- string(b)
	}()
	<-entered

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second) // under net/http's five seconds
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- hs.Shutdown(ctx) }()
	close(release)
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown = %v, want nil (the spare connection closed at once)", err)
	}
	if got := <-answered; !strings.Contains(got, "200 OK") || !strings.HasSuffix(got, "ok") {
		t.Errorf("the request served during Shutdown was answered %q, want 200 ok", got)
	}
	if n, err := spare.Read(make([]byte, 1)); err == nil {
		t.Errorf("the spare connection read %d bytes after Shutdown, want it closed", n)
	}
	if st := <-states; st != http.StateNew {
		t.Errorf("the server's own ConnState hook saw %v first, want StateNew", st)
	}
}
