package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/turnledger/turnledger/internal/inflight"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/projection"
)

// Event streams (Server-Sent Events). Every feed — project, Turn, agent —
// answers a request with Accept: text/event-stream with a stream of the same
// items as its pages, one event each:
//
//	id: <ledger_seq>
//	event: <type>
//	data: <the feed item JSON, as in the page>
//
// The stream starts after after_ledger_seq (default 0), or after the
// Last-Event-ID header when it is given (a reconnecting EventSource sends
// it; it wins over the query), so a reconnect resumes with no gap and no
// duplicate. It catches up page by page (limit is the page size), writes a
// ": caught up" comment once the items there were when it opened are sent
// (so that a client tells history from new arrivals however the bytes are
// split on the way), then waits on the projection's notification for the
// project and sends what the next commit added. Every HeartbeatInterval it
// writes a ": heartbeat" comment and checks the caller's credentials and
// read policy again; when they no longer hold, it sends an "error" event
// with the usual error body and ends. Each
// write must be taken by the client within WriteTimeout or the stream is cut:
// the server reads a page only when the previous one was written, so a slow
// client is disconnected, never buffered for.

// PushConfig configures long polls and event streams.
type PushConfig struct {
	// HeartbeatInterval is how often an idle stream gets a comment line
	// and the caller's access is checked again.
	HeartbeatInterval time.Duration
	// WriteTimeout is how long a client may take to accept one write of a
	// stream before it is disconnected.
	WriteTimeout time.Duration
}

// DefaultPushConfig returns the defaults: heartbeat 15s, write timeout 10s.
func DefaultPushConfig() PushConfig {
	return PushConfig{HeartbeatInterval: 15 * time.Second, WriteTimeout: 10 * time.Second}
}

// wantsStream reports whether the request accepts text/event-stream.
func wantsStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
				return true
			}
		}
	}
	return false
}

// feedReader reads one page of a feed.
type feedReader func(after uint64, limit int) (projection.FeedPage, error)

// streamFeed serves a feed as an event stream from after. check is the
// route's read policy, run again at every heartbeat after authentication.
func (s *Server) streamFeed(w http.ResponseWriter, c *call, after uint64, limit int, read feedReader, check func(*call) error) error {
	if id := c.r.Header.Values("Last-Event-ID"); len(id) > 0 {
		n, err := strconv.ParseUint(strings.TrimSpace(id[0]), 10, 64)
		if len(id) > 1 || err != nil {
			return kernel.Errorf(kernel.Validation, "Last-Event-ID must be one ledger_seq (a non-negative integer), not %q", strings.Join(id, ", "))
		}
		after = n
	}
	// Each read of the feed happens under a watch taken before it, so that a
	// commit between the read and the wait wakes the wait.
	changed, stop := s.store.WatchProject(c.project)
	defer func() { stop() }()
	// The first page is read before the headers are written, so that a
	// feed that cannot be read answers its error as a page would.
	// Below the retention horizon the stream opens to say so and ends
	// (horizon.go).
	first, err := read(after, limit)
	var gone *projection.GoneError
	if err != nil && !errors.As(err, &gone) {
		return err
	}
	firstErr := err
	haveFirst := true
	cfg := s.pushConfig()
	rc := http.NewResponseController(w)
	// Lift the server's read deadline: it counts from the start of the
	// request, and its expiry would cancel the stream's context.
	if err := rc.SetReadDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	s.push.subscribers.Add(1)
	defer s.push.subscribers.Add(-1)
	inflight.Detach(c.ctx)

	var buf bytes.Buffer
	// send writes buf to the client within the write timeout.
	send := func() bool {
		rc.SetWriteDeadline(time.Now().Add(cfg.WriteTimeout))
		_, err := w.Write(buf.Bytes())
		buf.Reset()
		if err == nil {
			err = rc.Flush()
		}
		return err == nil
	}
	buf.WriteString(": stream of ledger events after " + strconv.FormatUint(after, 10) + "\n\n")
	if !send() {
		return nil
	}
	heartbeat := time.NewTicker(cfg.HeartbeatInterval)
	defer heartbeat.Stop()
	caughtUp := false
	for {
		// Send every page there is now.
		for {
			fp, err := first, firstErr
			if !haveFirst {
				fp, err = read(after, limit)
			}
			haveFirst = false
			if err != nil {
				s.streamError(w, c, send, &buf, err)
				return nil
			}
			for _, it := range fp.Items {
				data, err := json.Marshal(it)
				if err != nil {
					s.streamError(w, c, send, &buf, err)
					return nil
				}
				buf.WriteString("id: ")
				buf.WriteString(strconv.FormatUint(it.LedgerSeq, 10))
				buf.WriteString("\nevent: ")
				buf.WriteString(it.Type)
				buf.WriteString("\ndata: ")
				buf.Write(data)
				buf.WriteString("\n\n")
				after = it.LedgerSeq
			}
			if buf.Len() > 0 && !send() {
				return nil
			}
			if !fp.HasMore || len(fp.Items) == 0 {
				break
			}
		}
		if !caughtUp {
			caughtUp = true
			buf.WriteString(": caught up\n\n")
			if !send() {
				return nil
			}
		}
		// Wait for a commit of the project, a heartbeat, or the end.
		select {
		case <-changed:
		case <-heartbeat.C:
			if err := s.recheck(c, check); err != nil {
				s.streamError(w, c, send, &buf, err)
				return nil
			}
			buf.WriteString(": heartbeat\n\n")
			if !send() {
				return nil
			}
		case <-c.ctx.Done():
			return nil
		case <-s.push.stopping:
			return nil
		}
		if s.store.Closed() {
			return nil
		}
		stop()
		changed, stop = s.store.WatchProject(c.project)
	}
}

// recheck authenticates the caller again and runs the route's read policy
// on the caught-up state: a credential revoked or a policy changed through
// any instance ends the stream at the next heartbeat.
func (s *Server) recheck(c *call, check func(*call) error) error {
	caller, err := s.authenticate(c.ctx, c.r, c.project)
	if err != nil {
		return err
	}
	if caller.Admin {
		if err := s.engine.View(c.ctx, c.project, func(*kernel.Project) error { return nil }); err != nil {
			return err
		}
	}
	c2 := *c
	c2.caller = caller
	c2.ctx = withCaller(c.ctx, caller)
	return check(&c2)
}

// streamError ends a stream with an "error" event whose data is the error
// body a page would have answered.
func (s *Server) streamError(w http.ResponseWriter, c *call, send func() bool, buf *bytes.Buffer, err error) {
	if c.ctx.Err() != nil {
		return
	}
	rec := &bodyRecorder{h: http.Header{}}
	s.writeError(rec, c.r, err)
	var gone *projection.GoneError
	if errors.As(err, &gone) {
		buf.WriteString(": gone: the feed begins at ledger_seq " + strconv.FormatUint(gone.Horizon, 10) + " now; older events are in the archive\n")
	}
	buf.WriteString("event: error\ndata: ")
	buf.Write(bytes.TrimSpace(rec.body.Bytes()))
	buf.WriteString("\n\n")
	send()
}

// bodyRecorder captures what writeError writes, to send it as event data.
type bodyRecorder struct {
	h    http.Header
	body bytes.Buffer
}

func (r *bodyRecorder) Header() http.Header         { return r.h }
func (r *bodyRecorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *bodyRecorder) WriteHeader(int)             {}

func (s *Server) pushConfig() PushConfig {
	cfg := s.cfg.Push
	def := DefaultPushConfig()
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = def.HeartbeatInterval
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = def.WriteTimeout
	}
	return cfg
}
