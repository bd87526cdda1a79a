package authn

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/julienschmidt/httprouter"
)

// SessionSubject is the NATS subject of one session of one tenant:
// runtime.sessions.<tenant_id>.<session_id>. Both parts are validated tokens
// (a UUID and [A-Za-z0-9_-]{1,64}), so no id can add a token or a wildcard.
func SessionSubject(tenantID, sessionID string) (string, error) {
	if !IsUUID(tenantID) || !sessionIDPattern.MatchString(sessionID) {
		return "", fmt.Errorf("cannot derive a subject from tenant %q and session %q", tenantID, sessionID)
	}
	return "runtime.sessions." + tenantID + "." + sessionID, nil
}

// socketBuffer is how many messages may wait for a slow socket before it is closed.
const socketBuffer = 64

type socket struct {
	conn   *websocket.Conn
	out    chan []byte
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	reason string
}

// close ends the socket; the first reason given is the one sent to the client.
func (k *socket) close(reason string) {
	k.mu.Lock()
	if !k.closed {
		k.closed, k.reason = true, reason
	}
	k.mu.Unlock()
	k.cancel()
}

func (k *socket) closeReason() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.reason
}

// wsError is the frame sent back for a message that is refused.
type wsError struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// sessionMessage is the first message of a socket whose dial gave no
// session_id: the session the server made for it.
type sessionMessage struct {
	Kind      string `json:"kind"` // "session"
	SessionID string `json:"session_id"`
}

// websocket serves a handshake in this order, so that each refusal means
// one thing and a ticket is spent only by a dial that will be upgraded:
// the Origin (403); the one credential, a ticket only looked up (401, 403,
// 503); the other query parameters (400); the handshake itself (426, 400);
// the bus (503); the session is subscribed; then the ticket is taken (401
// for the loser of a race) and the connection upgraded.
func (s *Server) websocket(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if !s.wsOriginAllowed(r) {
		s.fail(w, errf(KindForbidden, "the Origin of this websocket request is not allowed (scheme, host and port must match an entry of CORS_ALLOWED_ORIGINS)"))
		return
	}
	key, err := s.passThrottle(r, true)
	if err != nil {
		s.fail(w, err)
		return
	}
	p, ticket, until, err := s.auth.authenticateWebSocket(r)
	if err != nil {
		s.authFailed(r, err, key)
		s.fail(w, err)
		return
	}
	s.authSucceeded(key, until)
	sid, err := checkWSQuery(r.URL.Query())
	if err != nil {
		s.fail(w, err)
		return
	}
	madeSID := sid == ""
	if madeSID {
		if sid, err = newSessionID(s.auth.rand); err != nil {
			s.fail(w, err)
			return
		}
	}
	if !checkHandshake(w, r) {
		return
	}
	if s.bus == nil {
		s.fail(w, errf(KindUnavailable, "the message bus is unavailable"))
		return
	}
	if ticket != "" && p.TenantID == "" {
		// The store could not look the ticket up without taking it: take
		// it now, to learn whose it is.
		p, err = s.auth.spendTicket(r.Context(), ticket)
		s.valid.forget(key)
		if err != nil {
			s.authFailed(r, err, key)
			s.fail(w, err)
			return
		}
		ticket = ""
	}
	subject, err := SessionSubject(p.TenantID, sid)
	if err != nil {
		s.fail(w, err)
		return
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	k := &socket{out: make(chan []byte, socketBuffer), cancel: cancel}
	// Subscribe before the upgrade, so that a message sent by anyone once
	// this client sees the handshake succeed reaches it.
	unsub, err := s.bus.Subscribe(subject, func(data []byte) {
		select {
		case k.out <- data:
		default:
			k.close("slow consumer")
		}
	})
	if err != nil {
		s.fail(w, &Error{Kind: KindUnavailable, Message: "the message bus is unavailable", Err: err})
		return
	}
	defer unsub()
	if ticket != "" {
		// Last: every other check has passed. The loser of a race is 401.
		// Not counted as a failed authentication: the ticket was found
		// above, so a 401 here is a lost race, not a guess.
		_, err := s.auth.spendTicket(r.Context(), ticket)
		s.valid.forget(key)
		if err != nil {
			s.fail(w, err)
			return
		}
	}
	// The server's read and write deadlines bound one request; a socket
	// lives on past them. net/http's Hijack says a connection taken over
	// may keep them (Go 1.26 happens to clear them), and leaves them to the
	// caller: clear them. The socket's own writes are bounded one by one
	// below, and its reads end with ctx.
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Time{})
	rc.SetWriteDeadline(time.Time{})
	// The Origin was checked first, by wsOriginAllowed.
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return // Accept has answered the client
	}
	conn.SetReadLimit(s.cfg.MaxMessageBytes)
	k.conn = conn
	if madeSID {
		b, _ := json.Marshal(sessionMessage{Kind: "session", SessionID: sid})
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		err := conn.Write(wctx, websocket.MessageText, b)
		wcancel()
		if err != nil {
			conn.Close(websocket.StatusInternalError, "write failed")
			return
		}
	}

	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		cancel()
		conn.Close(websocket.StatusGoingAway, "server shutting down")
		return
	}
	s.sockets[k] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.sockets, k)
		s.mu.Unlock()
	}()

	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case data := <-k.out:
				wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
				err := conn.Write(wctx, websocket.MessageText, data)
				wcancel()
				if err != nil {
					k.close("write failed")
					return
				}
			}
		}
	}()

	go func() {
		<-ctx.Done()
		reason := k.closeReason()
		if reason == "" {
			reason = "closed"
		}
		status := websocket.StatusNormalClosure
		switch reason {
		case "slow consumer":
			status = websocket.StatusPolicyViolation
		case "server shutting down":
			status = websocket.StatusGoingAway
		}
		conn.Close(status, reason)
	}()

	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			k.close("")
			return
		}
		if msg := checkMessage(data); msg != "" {
			b, _ := json.Marshal(wsError{Error: "ValidationError", Message: msg})
			wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
			err := conn.Write(wctx, websocket.MessageText, b)
			wcancel()
			if err != nil {
				k.close("write failed")
				return
			}
			continue
		}
		if err := s.bus.Publish(ctx, subject, data); err != nil {
			s.logf("authn: publish %s: %v", subject, err)
			k.close("message bus unavailable")
			return
		}
	}
}

// checkMessage returns why a client message is refused, "" when it is
// fine. Messages must be JSON objects; their kinds are not defined here, but
// workspace_id and user_id are refused: the tenant and user come from
// authentication only.
func checkMessage(data []byte) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil || m == nil {
		return "messages must be JSON objects"
	}
	for _, k := range []string{"workspace_id", "user_id"} {
		if _, ok := m[k]; ok {
			return k + " is not supported in messages; the tenant and user come from authentication"
		}
	}
	return ""
}

// newSessionID draws a session id for a dial that gave none: 16 random
// bytes in base64url, 22 characters of [A-Za-z0-9_-].
func newSessionID(r io.Reader) (string, error) {
	var b [16]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", fmt.Errorf("draw session id: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}
