package monitor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Monitor runs the configured queries, keeps their errors and history, and
// notifies channels. Serve its Handler; run its scheduler with RunScheduler.
type Monitor struct {
	cfg       Config
	store     *store
	queries   []QueryConfig
	byID      map[string]*QueryConfig
	conns     []ConnectionConfig
	sources   map[string]source
	chans     []ChannelConfig
	notifiers map[string]notifier
	startedAt time.Time

	mu         sync.Mutex
	next       map[string]time.Time     // query id -> next scheduled run
	running    map[string]bool          // query ids of scheduled runs in progress
	deliveries map[string]Delivery      // channel id -> latest delivery
	sending    map[string]chan struct{} // channel id -> closed when its latest delivery ends
	scheduling bool

	bg     context.Context // notification deliveries; cancelled by Close
	stopBg context.CancelFunc
	wg     sync.WaitGroup
}

// Open validates cfg, opens the data file and readies the queries: each is
// due one interval after its last scheduled run, or at once if it never ran.
func Open(cfg Config) (*Monitor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	st, err := openStore(cfg.DataPath)
	if err != nil {
		return nil, err
	}
	m := &Monitor{
		cfg: cfg, store: st, queries: cfg.Queries, byID: map[string]*QueryConfig{},
		conns: cfg.Connections, sources: map[string]source{}, chans: cfg.Channels, notifiers: map[string]notifier{},
		startedAt: cfg.Now().UTC(), next: map[string]time.Time{}, running: map[string]bool{}, deliveries: map[string]Delivery{},
	}
	m.bg, m.stopBg = context.WithCancel(context.Background())
	for _, cc := range cfg.Connections {
		switch cc.Kind {
		case KindPostgres:
			s, err := newPostgresSource(cc, cfg.Secrets)
			if err != nil {
				st.close()
				return nil, err
			}
			m.sources[cc.ID] = s
		case KindTurnledger:
			m.sources[cc.ID] = newEngineSource(cc, cfg.Secrets, cfg.HTTPClient, cfg.Now)
		}
	}
	for _, ch := range cfg.Channels {
		m.notifiers[ch.ID] = newNotifier(ch, cfg)
	}
	states, err := st.queryStates()
	if err != nil {
		st.close()
		return nil, err
	}
	now := cfg.Now()
	for i := range m.queries {
		q := &m.queries[i]
		m.byID[q.ID] = q
		if q.Paused {
			continue
		}
		next := now
		if s, ok := states[q.ID]; ok && !s.LastScheduledAt.IsZero() {
			if t := s.LastScheduledAt.Add(time.Duration(q.Interval)); t.After(now) {
				next = t
			}
		}
		m.next[q.ID] = next
	}
	return m, nil
}

// Close waits for notifications in flight (cutting their retries short),
// closes the channels and the data file.
func (m *Monitor) Close() error {
	m.stopBg()
	m.wg.Wait()
	for _, n := range m.notifiers {
		n.close()
	}
	return m.store.close()
}

// RunOutcome is a run with its result and the error it touched.
type RunOutcome struct {
	Run    Run    `json:"run"`
	Result Result `json:"result"`
	Error  *Error `json:"error"`
}

var errUnknownQuery = errors.New("unknown query")

// RunQuery runs a query now, records the run, opens or counts the query's
// error when the check fails, and notifies when an error opens.
func (m *Monitor) RunQuery(ctx context.Context, id, trigger string) (RunOutcome, error) {
	q, ok := m.byID[id]
	if !ok {
		return RunOutcome{}, errUnknownQuery
	}
	return m.run(ctx, q, trigger)
}

func (m *Monitor) run(ctx context.Context, q *QueryConfig, trigger string) (RunOutcome, error) {
	started := m.cfg.Now()
	rctx, cancel := context.WithTimeout(ctx, q.timeout())
	res, qerr := m.sources[q.Connection].run(rctx, q.Query)
	cancel()
	if qerr != nil && ctx.Err() != nil {
		// Cut short by shutdown or a client gone: that says nothing about
		// the query, so nothing is recorded.
		return RunOutcome{}, fmt.Errorf("run of %s abandoned: %w", q.ID, ctx.Err())
	}
	if qerr != nil && rctx.Err() == context.DeadlineExceeded {
		qerr = fmt.Errorf("timed out after %v", q.timeout())
	}
	v := q.Check.Evaluate(res, qerr)
	now := m.cfg.Now()
	run := Run{QueryID: q.ID, Trigger: trigger, StartedAt: started.UTC(), DurationMS: float64(now.Sub(started).Microseconds()) / 1000,
		Passed: v.Passed, Reason: v.Reason, RowCount: res.RowCount}
	run, e, opened, err := m.store.record(run, now.UTC())
	if err != nil {
		return RunOutcome{}, fmt.Errorf("record run: %w", err)
	}
	if opened {
		m.cfg.Logger.Warn("monitor error opened", "query_id", q.ID, "error_id", e.ID, "reason", e.Reason)
		m.notify(q, EventErrorOpened, e, fmt.Sprintf("query %s failed: %s", q.ID, e.Reason))
	}
	return RunOutcome{Run: run, Result: res.shown(), Error: e}, nil
}

// Resolve marks an error resolved and notifies the query's channels.
func (m *Monitor) Resolve(id uint64, note string) (Error, error) {
	e, err := m.store.resolve(id, m.cfg.Now().UTC(), note)
	if err != nil {
		return Error{}, err
	}
	if q, ok := m.byID[e.QueryID]; ok {
		m.notify(q, EventErrorResolved, &e, fmt.Sprintf("error %d of query %s resolved after %d failed runs", e.ID, q.ID, e.Count))
	}
	return e, nil
}

// notify sends to the query's channels in the background, to each channel
// in the order notify was called.
func (m *Monitor) notify(q *QueryConfig, event string, e *Error, msg string) {
	targets := q.Channels
	if len(targets) == 0 {
		for _, ch := range m.chans {
			targets = append(targets, ch.ID)
		}
	}
	ev := *e
	n := Notification{
		Event: event, DeliveryID: event + "-" + strconv.FormatUint(e.ID, 10), SentAt: m.cfg.Now().UTC(), Message: msg,
		Query: &QueryRef{ID: q.ID, Description: q.Description, Connection: q.Connection}, Error: &ev,
	}
	for _, id := range targets {
		// Deliveries to one channel go out in the order of the events:
		// each waits for the one before it to the same channel.
		done := make(chan struct{})
		m.mu.Lock()
		if m.sending == nil {
			m.sending = map[string]chan struct{}{}
		}
		prev := m.sending[id]
		m.sending[id] = done
		m.mu.Unlock()
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			defer close(done)
			if prev != nil {
				<-prev
			}
			m.deliver(m.bg, id, n, m.cfg.WebhookAttempts)
		}()
	}
}

func (m *Monitor) deliver(ctx context.Context, channelID string, n Notification, attempts int) Delivery {
	got, err := m.notifiers[channelID].send(ctx, n, attempts)
	d := Delivery{Event: n.Event, DeliveryID: n.DeliveryID, At: m.cfg.Now().UTC(), OK: err == nil, Attempts: got}
	if err != nil {
		d.Error = err.Error()
		m.cfg.Logger.Error("monitor notification failed", "channel_id", channelID, "event", n.Event, "attempts", got, "err", err)
	}
	m.mu.Lock()
	m.deliveries[channelID] = d
	m.mu.Unlock()
	return d
}

// TestChannel sends a test notification once, without retries, and reports
// the outcome.
func (m *Monitor) TestChannel(ctx context.Context, id string) (Delivery, error) {
	if _, ok := m.notifiers[id]; !ok {
		return Delivery{}, errNotFound
	}
	now := m.cfg.Now().UTC()
	n := Notification{Event: EventTest, DeliveryID: "test-" + strconv.FormatInt(now.UnixNano(), 10), SentAt: now,
		Message: "test notification from the turnledger query monitor to channel " + id}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return m.deliver(ctx, id, n, 1), nil
}

// ConnectionTest is the outcome of testing a connection.
type ConnectionTest struct {
	ConnectionID string         `json:"connection_id"`
	OK           bool           `json:"ok"`
	LatencyMS    float64        `json:"latency_ms"`
	Error        string         `json:"error,omitempty"`
	Details      map[string]any `json:"details,omitempty"`
}

// TestConnection connects and reports success and latency, or the error.
func (m *Monitor) TestConnection(ctx context.Context, id string) (ConnectionTest, error) {
	s, ok := m.sources[id]
	if !ok {
		return ConnectionTest{}, errNotFound
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	start := m.cfg.Now()
	details, err := s.test(ctx)
	out := ConnectionTest{ConnectionID: id, OK: err == nil, LatencyMS: float64(m.cfg.Now().Sub(start).Microseconds()) / 1000, Details: details}
	if err != nil {
		out.Error = err.Error()
	}
	return out, nil
}

// Due is a query and when the scheduler runs it next.
type Due struct {
	QueryID string    `json:"query_id"`
	DueAt   time.Time `json:"due_at"`
	// InSeconds is how long until then; zero or less means overdue.
	InSeconds float64 `json:"in_seconds"`
	Running   bool    `json:"running"`
}

// Schedule lists the scheduled queries by next run, soonest first (ties by id).
func (m *Monitor) Schedule() []Due {
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []Due{}
	for id, t := range m.next {
		out = append(out, Due{QueryID: id, DueAt: t.UTC(), InSeconds: t.Sub(now).Seconds(), Running: m.running[id]})
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].DueAt.Equal(out[j].DueAt) {
			return out[i].DueAt.Before(out[j].DueAt)
		}
		return out[i].QueryID < out[j].QueryID
	})
	return out
}

// RunDue starts every scheduled query due at Now (skipping one still
// running), sets its next run one interval on, and waits for them. It
// returns the ids it ran, sorted.
func (m *Monitor) RunDue(ctx context.Context) []string {
	now := m.cfg.Now()
	var due []*QueryConfig
	m.mu.Lock()
	for id, t := range m.next {
		if !t.After(now) && !m.running[id] {
			q := m.byID[id]
			due = append(due, q)
			m.running[id] = true
			m.next[id] = now.Add(time.Duration(q.Interval))
		}
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	ids := []string{}
	for _, q := range due {
		ids = append(ids, q.ID)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := m.run(ctx, q, TriggerSchedule); err != nil && ctx.Err() == nil {
				m.cfg.Logger.Error("monitor scheduled run failed", "query_id", q.ID, "err", err)
			}
			m.mu.Lock()
			delete(m.running, q.ID)
			m.mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(ids)
	return ids
}

// RunScheduler runs due queries until ctx ends, sleeping (with the
// configured Sleep) until the next one is due.
func (m *Monitor) RunScheduler(ctx context.Context) error {
	m.mu.Lock()
	m.scheduling = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.scheduling = false
		m.mu.Unlock()
	}()
	for {
		m.RunDue(ctx)
		wait := time.Minute // nothing scheduled: look again later
		if s := m.Schedule(); len(s) > 0 {
			wait = s[0].DueAt.Sub(m.cfg.Now())
		}
		if wait > 0 {
			if err := m.cfg.Sleep(ctx, wait); err != nil {
				return nil
			}
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}
