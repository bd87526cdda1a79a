package monitor

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/turnledger/turnledger/internal/checkfor"
)

func TestWebhookRetriesWithBackoffAndSigns(t *testing.T) {
	c := newClock()
	rc := newReceiver(t, 503, 500, 429, 200)
	e, cfg := lagEngine(t, c, rc, &syncBuffer{})
	cfg.Channels = []ChannelConfig{{ID: "hook", Kind: ChannelWebhook, URL: rc.srv.URL, SecretEnv: "HOOK_SECRET"}}
	cfg.Secrets["HOOK_SECRET"] = "hmac-key"
	cfg.WebhookBackoff, cfg.WebhookMaxBackoff = time.Second, 3*time.Second
	m := open(t, cfg)
	setLag(e, 77)
	out, err := m.RunQuery(context.Background(), "lag", TriggerManual)
	if err != nil || out.Error == nil {
		t.Fatalf("RunQuery = %+v, %v; want an opened error", out, err)
	}
	checkfor.Until(t, 5*time.Second, "four webhook attempts", func() bool { return len(rc.received()) == 4 })
	m.wg.Wait()
	if diff := cmp.Diff([]time.Duration{time.Second, 2 * time.Second, 3 * time.Second}, c.Sleeps()); diff != "" {
		t.Errorf("backoff sleeps (-want +got):\n%s", diff)
	}
	got := rc.received()
	for i, r := range got {
		mac := hmac.New(sha256.New, []byte("hmac-key"))
		mac.Write(r.Body)
		if want := "sha256=" + hex.EncodeToString(mac.Sum(nil)); r.Header.Get("X-Turnledger-Signature") != want {
			t.Errorf("attempt %d: X-Turnledger-Signature = %q, want %q", i+1, r.Header.Get("X-Turnledger-Signature"), want)
		}
		if r.Header.Get("X-Turnledger-Delivery") != got[0].Header.Get("X-Turnledger-Delivery") || string(r.Body) != string(got[0].Body) {
			t.Errorf("attempt %d differs from the first: a retry must resend the same delivery", i+1)
		}
	}
	n := rc.notifications(t)[0]
	want := Notification{
		Event: EventErrorOpened, DeliveryID: fmt.Sprintf("error.opened-%d", out.Error.ID), SentAt: t0,
		Message: "query lag failed: row 1: lag = 77 is above the maximum 10",
		Query:   &QueryRef{ID: "lag", Connection: "engine"},
		Error:   out.Error,
	}
	if diff := cmp.Diff(want, n); diff != "" {
		t.Errorf("webhook payload (-want +got):\n%s", diff)
	}
	var chans struct{ Channels []ChannelInfo }
	call(t, serve(t, m), "GET", "/api/channels", "", &chans)
	if d := chans.Channels[0].LastDelivery; d == nil || !d.OK || d.Attempts != 4 {
		t.Errorf("last delivery = %+v, want ok after 4 attempts", d)
	}
}

func TestWebhookGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name         string
		statuses     []int
		wantAttempts int
	}{
		{"client error is final", []int{400}, 1},
		{"server errors until attempts run out", []int{502, 502, 502, 502, 502, 502}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			rc := newReceiver(t, tc.statuses...)
			e, cfg := lagEngine(t, c, rc, &syncBuffer{})
			cfg.Channels = cfg.Channels[:1]
			cfg.WebhookAttempts = 3
			m := open(t, cfg)
			setLag(e, 77)
			if _, err := m.RunQuery(context.Background(), "lag", TriggerManual); err != nil {
				t.Fatalf("RunQuery = %v", err)
			}
			m.wg.Wait()
			if got := len(rc.received()); got != tc.wantAttempts {
				t.Errorf("attempts with statuses %v = %d, want %d", tc.statuses, got, tc.wantAttempts)
			}
			m.mu.Lock()
			d := m.deliveries["hook"]
			m.mu.Unlock()
			if d.OK || d.Attempts != tc.wantAttempts || d.Error == "" {
				t.Errorf("delivery = %+v, want failed after %d attempts with an error", d, tc.wantAttempts)
			}
		})
	}
}

// runNATS starts the embedded NATS server on a random loopback port.
func runNATS(t *testing.T) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatalf("nats server: %v", err)
	}
	s.Start()
	if !s.ReadyForConnections(5 * time.Second) {
		t.Fatalf("nats server not ready")
	}
	t.Cleanup(s.Shutdown)
	return s
}

func TestNATSChannelPublishes(t *testing.T) {
	ns := runNATS(t)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("ops.monitor.alerts")
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	nc.Flush()

	c := newClock()
	e, cfg := lagEngine(t, c, newReceiver(t), &syncBuffer{})
	cfg.Channels = []ChannelConfig{{ID: "bus", Kind: ChannelNATS, URL: ns.ClientURL(), Subject: "ops.monitor.alerts"}}
	m := open(t, cfg)
	srv := serve(t, m)

	var ct ChannelTest
	if code := call(t, srv, "POST", "/api/channels/bus/test", "", &ct); code != 200 || !ct.OK || ct.Event != EventTest {
		t.Fatalf("POST /api/channels/bus/test = %d %+v, want 200 ok", code, ct)
	}
	msg, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("no test message: %v", err)
	}
	var n Notification
	if err := json.Unmarshal(msg.Data, &n); err != nil || n.Event != EventTest || msg.Header.Get("X-Turnledger-Event") != EventTest {
		t.Errorf("test message = %s (header %v), want a test notification", msg.Data, msg.Header)
	}

	setLag(e, 77)
	out, err := m.RunQuery(context.Background(), "lag", TriggerManual)
	if err != nil || out.Error == nil {
		t.Fatalf("RunQuery = %+v, %v", out, err)
	}
	msg, err = sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("no error.opened message: %v", err)
	}
	if err := json.Unmarshal(msg.Data, &n); err != nil || n.Event != EventErrorOpened || n.Error == nil || n.Error.ID != out.Error.ID {
		t.Errorf("message = %s, want error.opened for error %d", msg.Data, out.Error.ID)
	}
}

func TestChannelTestReportsFailure(t *testing.T) {
	c := newClock()
	rc := newReceiver(t, 500)
	_, cfg := lagEngine(t, c, rc, &syncBuffer{})
	cfg.Channels = append(cfg.Channels, ChannelConfig{ID: "nowhere", Kind: ChannelNATS, URL: "nats://127.0.0.1:1", Subject: "x"})
	m := open(t, cfg)
	srv := serve(t, m)
	// A test is one attempt: a 500 is reported, not retried.
	var ct ChannelTest
	if code := call(t, srv, "POST", "/api/channels/hook/test", "", &ct); code != 200 || ct.OK || ct.Attempts != 1 || !strings.Contains(ct.Error, "500") {
		t.Errorf("POST /api/channels/hook/test to a failing receiver = %d %+v, want 200, not ok after 1 attempt, naming 500", code, ct)
	}
	if len(c.Sleeps()) != 0 || len(rc.received()) != 1 {
		t.Errorf("channel test: %d sleeps, %d requests; want 0 and 1", len(c.Sleeps()), len(rc.received()))
	}
	if code := call(t, srv, "POST", "/api/channels/nowhere/test", "", &ct); code != 200 || ct.OK || ct.Error == "" {
		t.Errorf("POST /api/channels/nowhere/test = %d %+v, want 200, not ok, with an error", code, ct)
	}
	if code := call(t, srv, "POST", "/api/channels/log/test", "", &ct); code != 200 || !ct.OK {
		t.Errorf("POST /api/channels/log/test = %d %+v, want 200 ok", code, ct)
	}
	wantError(t, srv, "POST", "/api/channels/missing/test", "", 404, ErrNotFound)
	// The webhook's path may be a secret: listings show scheme and host only.
	code, body := raw(t, srv, "GET", "/api/channels")
	if code != 200 || strings.Contains(body, "/hooks/abc") {
		t.Errorf("GET /api/channels = %d %s, want 200 without the webhook path", code, body)
	}
}
