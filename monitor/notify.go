package monitor

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Channel kinds.
const (
	ChannelWebhook = "webhook"
	ChannelNATS    = "nats"
	ChannelLog     = "log"
)

// Notification events.
const (
	EventErrorOpened   = "error.opened"
	EventErrorResolved = "error.resolved"
	EventTest          = "test"
)

// Notification is the payload every channel sends: the webhook's POST body,
// the NATS message data, the log line's attributes.
type Notification struct {
	Event string `json:"event"`
	// DeliveryID is the same on every retry of one delivery, so a receiver
	// can drop duplicates.
	DeliveryID string    `json:"delivery_id"`
	SentAt     time.Time `json:"sent_at"`
	// Message is one line for people, e.g. "query stuck-orders failed: row count 3 > 0".
	Message string    `json:"message"`
	Query   *QueryRef `json:"query,omitempty"`
	Error   *Error    `json:"error,omitempty"`
}

// QueryRef names the query a notification is about.
type QueryRef struct {
	ID          string `json:"id"`
	Description string `json:"description,omitempty"`
	Connection  string `json:"connection"`
}

// notifier delivers a notification; attempts reports how many tries it took.
type notifier interface {
	send(ctx context.Context, n Notification, maxAttempts int) (attempts int, err error)
	info() map[string]any
	close()
}

// Delivery is the outcome of a channel's latest delivery.
type Delivery struct {
	Event      string    `json:"event"`
	DeliveryID string    `json:"delivery_id"`
	At         time.Time `json:"at"`
	OK         bool      `json:"ok"`
	Attempts   int       `json:"attempts"`
	Error      string    `json:"error,omitempty"`
}

// webhook POSTs the notification as JSON. Headers: Content-Type
// application/json, X-Turnledger-Event, X-Turnledger-Delivery and, with a
// secret, X-Turnledger-Signature: sha256=<hex HMAC-SHA256 of the body>.
// Network errors, 408, 429 and 5xx are retried with exponential backoff;
// other statuses are final.
type webhook struct {
	url        string
	secret     []byte
	client     *http.Client
	sleep      func(context.Context, time.Duration) error
	backoff    time.Duration
	maxBackoff time.Duration
}

func (w *webhook) info() map[string]any {
	u, _ := url.Parse(w.url)
	// Only scheme and host: the path of many webhook URLs is itself a secret.
	return map[string]any{"target": u.Scheme + "://" + u.Host, "signed": len(w.secret) > 0}
}

func (w *webhook) close() {}

type permanentError struct{ error }

func (w *webhook) send(ctx context.Context, n Notification, maxAttempts int) (int, error) {
	body, err := json.Marshal(n)
	if err != nil {
		return 0, err
	}
	wait := w.backoff
	for attempt := 1; ; attempt++ {
		err := w.post(ctx, n, body)
		var perm permanentError
		if err == nil || errors.As(err, &perm) || attempt >= maxAttempts || ctx.Err() != nil {
			return attempt, err
		}
		if err := w.sleep(ctx, wait); err != nil {
			return attempt, fmt.Errorf("%v (gave up waiting to retry: %v)", err, ctx.Err())
		}
		wait = min(wait*2, w.maxBackoff)
	}
}

func (w *webhook) post(ctx context.Context, n Notification, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return permanentError{errors.New("cannot build the request")}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "turnledger-monitor")
	req.Header.Set("X-Turnledger-Event", n.Event)
	req.Header.Set("X-Turnledger-Delivery", n.DeliveryID)
	if len(w.secret) > 0 {
		mac := hmac.New(sha256.New, w.secret)
		mac.Write(body)
		req.Header.Set("X-Turnledger-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	}
	resp, err := w.client.Do(req)
	if err != nil {
		// The URL may hold a secret: report the failure without it.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("POST: %v", err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return fmt.Errorf("receiver answered %d", resp.StatusCode)
	default:
		return permanentError{fmt.Errorf("receiver answered %d", resp.StatusCode)}
	}
}

// natsChannel publishes the notification to a subject, over a connection
// opened on first use and kept (nats.go reconnects by itself).
type natsChannel struct {
	url, subject, token string
	mu                  sync.Mutex
	nc                  *nats.Conn
}

func (c *natsChannel) info() map[string]any {
	return map[string]any{"url": c.url, "subject": c.subject}
}

func (c *natsChannel) conn() (*nats.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nc != nil && !c.nc.IsClosed() {
		return c.nc, nil
	}
	opts := []nats.Option{nats.Name("turnledger-monitor"), nats.Timeout(5 * time.Second), nats.MaxReconnects(-1)}
	if c.token != "" {
		opts = append(opts, nats.Token(c.token))
	}
	nc, err := nats.Connect(c.url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect: %v", err)
	}
	c.nc = nc
	return nc, nil
}

func (c *natsChannel) send(ctx context.Context, n Notification, _ int) (int, error) {
	body, err := json.Marshal(n)
	if err != nil {
		return 0, err
	}
	nc, err := c.conn()
	if err != nil {
		return 1, err
	}
	msg := nats.NewMsg(c.subject)
	msg.Data = body
	msg.Header.Set("X-Turnledger-Event", n.Event)
	msg.Header.Set("Nats-Msg-Id", n.DeliveryID)
	if err := nc.PublishMsg(msg); err != nil {
		return 1, fmt.Errorf("publish: %v", err)
	}
	// Flush proves the server has the message.
	if err := nc.FlushWithContext(ctx); err != nil {
		return 1, fmt.Errorf("flush: %v", err)
	}
	return 1, nil
}

func (c *natsChannel) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nc != nil {
		c.nc.Close()
	}
}

// logChannel writes the notification to the monitor's log: a warning when
// an error opens, info otherwise.
type logChannel struct{ logger *slog.Logger }

func (c *logChannel) info() map[string]any { return map[string]any{} }
func (c *logChannel) close()               {}

func (c *logChannel) send(ctx context.Context, n Notification, _ int) (int, error) {
	level := slog.LevelInfo
	if n.Event == EventErrorOpened {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{slog.String("event", n.Event), slog.String("delivery_id", n.DeliveryID)}
	if n.Query != nil {
		attrs = append(attrs, slog.String("query_id", n.Query.ID))
	}
	if n.Error != nil {
		attrs = append(attrs, slog.String("error_id", strconv.FormatUint(n.Error.ID, 10)), slog.Int("count", n.Error.Count))
	}
	c.logger.LogAttrs(ctx, level, "monitor notification: "+n.Message, attrs...)
	return 1, nil
}

func newNotifier(ch ChannelConfig, cfg Config) notifier {
	switch ch.Kind {
	case ChannelWebhook:
		u := ch.URL
		if ch.URLEnv != "" {
			u = cfg.Secrets[ch.URLEnv]
		}
		var secret []byte
		if ch.SecretEnv != "" {
			secret = []byte(cfg.Secrets[ch.SecretEnv])
		}
		return &webhook{url: u, secret: secret, client: cfg.HTTPClient, sleep: cfg.Sleep, backoff: cfg.WebhookBackoff, maxBackoff: cfg.WebhookMaxBackoff}
	case ChannelNATS:
		return &natsChannel{url: ch.URL, subject: ch.Subject, token: cfg.Secrets[ch.TokenEnv]}
	default:
		return &logChannel{logger: cfg.Logger}
	}
}
