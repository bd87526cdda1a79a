package monitor

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/turnledger/turnledger/internal/jsonhttp"
)

// Error names of the {error, message} body.
const (
	ErrValidation       = "ValidationError"
	ErrNotFound         = "NotFoundError"
	ErrConflict         = "ConflictError"
	ErrMethodNotAllowed = "MethodNotAllowedError"
	ErrInternal         = "InternalError"
)

// maxBody bounds request bodies (only resolve takes one).
const maxBody = 16 << 10

// maxNote bounds a resolution note.
const maxNote = 1000

// Handler serves the monitor's HTTP API (see the package documentation).
func (m *Monitor) Handler() http.Handler {
	r := httprouter.New()
	r.GET("/api/health", m.health)
	r.GET("/api/queries", m.listQueries)
	r.GET("/api/queries/:id", m.getQuery)
	r.POST("/api/queries/:id/run", m.runQuery)
	r.GET("/api/errors", m.listErrors)
	r.POST("/api/errors/:id/resolve", m.resolveError)
	r.GET("/api/stats/overview", m.overview)
	r.GET("/api/stats/timeline", m.timeline)
	r.GET("/api/scheduler/next", m.schedulerNext)
	r.GET("/api/connections", m.listConnections)
	r.POST("/api/connections/:id/test", m.testConnection)
	r.GET("/api/channels", m.listChannels)
	r.POST("/api/channels/:id/test", m.testChannel)
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		jsonhttp.WriteError(w, http.StatusNotFound, ErrNotFound, "no route "+req.Method+" "+req.URL.Path)
	})
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		jsonhttp.WriteError(w, http.StatusMethodNotAllowed, ErrMethodNotAllowed,
			fmt.Sprintf("%s is not allowed on %s; allowed: %s", req.Method, req.URL.Path, w.Header().Get("Allow")))
	})
	r.PanicHandler = func(w http.ResponseWriter, req *http.Request, v any) {
		m.cfg.Logger.Error("monitor handler panicked", "method", req.Method, "path", req.URL.Path, "panic", v)
		jsonhttp.WriteError(w, http.StatusInternalServerError, ErrInternal, "internal error")
	}
	return r
}

func (m *Monitor) internal(w http.ResponseWriter, r *http.Request, err error) {
	m.cfg.Logger.Error("monitor request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	jsonhttp.WriteError(w, http.StatusInternalServerError, ErrInternal, "internal error")
}

// Health is the body of GET /api/health.
type Health struct {
	Status        string    `json:"status"`
	StartedAt     time.Time `json:"started_at"`
	UptimeSeconds float64   `json:"uptime_seconds"`
	Queries       int       `json:"queries"`
	Connections   int       `json:"connections"`
	Channels      int       `json:"channels"`
	ActiveErrors  int       `json:"active_errors"`
	Scheduler     string    `json:"scheduler"` // "running" or "stopped"
}

func (m *Monitor) health(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	errs, err := m.store.errors()
	if err != nil {
		m.cfg.Logger.Error("monitor health: store", "err", err)
		jsonhttp.Write(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "message": "the data file cannot be read"})
		return
	}
	h := Health{Status: "ok", StartedAt: m.startedAt, UptimeSeconds: m.cfg.Now().Sub(m.startedAt).Seconds(),
		Queries: len(m.queries), Connections: len(m.conns), Channels: len(m.chans), Scheduler: "stopped"}
	for _, e := range errs {
		if e.Status == StatusActive {
			h.ActiveErrors++
		}
	}
	m.mu.Lock()
	if m.scheduling {
		h.Scheduler = "running"
	}
	m.mu.Unlock()
	jsonhttp.Write(w, http.StatusOK, h)
}

// QueryInfo describes a query in listings.
type QueryInfo struct {
	QueryConfig
	Interval      string     `json:"interval"`
	Timeout       string     `json:"timeout"`
	Channels      []string   `json:"channels"`
	NextRunAt     *time.Time `json:"next_run_at"`
	LastRun       *Run       `json:"last_run"`
	ActiveErrorID *uint64    `json:"active_error_id"`
}

// QueryDetail is a query with its recent runs.
type QueryDetail struct {
	QueryInfo
	RecentRuns []Run `json:"recent_runs"`
}

// recentRunsShown is the number of runs GET /api/queries/{id} shows.
const recentRunsShown = 20

func (m *Monitor) queryInfo(q *QueryConfig, states map[string]queryState, active map[string]uint64) QueryInfo {
	info := QueryInfo{QueryConfig: *q, Interval: time.Duration(q.Interval).String(), Timeout: q.timeout().String(), Channels: q.Channels}
	if info.Channels == nil {
		info.Channels = []string{}
		for _, ch := range m.chans {
			info.Channels = append(info.Channels, ch.ID)
		}
	}
	m.mu.Lock()
	if t, ok := m.next[q.ID]; ok {
		t = t.UTC()
		info.NextRunAt = &t
	}
	m.mu.Unlock()
	if st, ok := states[q.ID]; ok {
		info.LastRun = st.LastRun
	}
	if id, ok := active[q.ID]; ok {
		info.ActiveErrorID = &id
	}
	return info
}

func (m *Monitor) activeByQuery() (map[string]uint64, error) {
	errs, err := m.store.errors()
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, e := range errs {
		if e.Status == StatusActive {
			out[e.QueryID] = e.ID
		}
	}
	return out, nil
}

func (m *Monitor) listQueries(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	states, err := m.store.queryStates()
	if err != nil {
		m.internal(w, r, err)
		return
	}
	active, err := m.activeByQuery()
	if err != nil {
		m.internal(w, r, err)
		return
	}
	out := []QueryInfo{}
	for i := range m.queries {
		out = append(out, m.queryInfo(&m.queries[i], states, active))
	}
	jsonhttp.Write(w, http.StatusOK, map[string]any{"queries": out})
}

func (m *Monitor) query(w http.ResponseWriter, id string) (*QueryConfig, bool) {
	q, ok := m.byID[id]
	if !ok {
		jsonhttp.WriteError(w, http.StatusNotFound, ErrNotFound, fmt.Sprintf("no query with id %q", id))
	}
	return q, ok
}

func (m *Monitor) getQuery(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	q, ok := m.query(w, ps.ByName("id"))
	if !ok {
		return
	}
	states, err := m.store.queryStates()
	if err != nil {
		m.internal(w, r, err)
		return
	}
	active, err := m.activeByQuery()
	if err != nil {
		m.internal(w, r, err)
		return
	}
	runs, err := m.store.recentRuns(q.ID, recentRunsShown)
	if err != nil {
		m.internal(w, r, err)
		return
	}
	jsonhttp.Write(w, http.StatusOK, QueryDetail{QueryInfo: m.queryInfo(q, states, active), RecentRuns: runs})
}

func (m *Monitor) runQuery(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	q, ok := m.query(w, ps.ByName("id"))
	if !ok {
		return
	}
	out, err := m.run(r.Context(), q, TriggerManual)
	if err != nil && r.Context().Err() != nil {
		return // the client is gone
	}
	if err != nil {
		m.internal(w, r, err)
		return
	}
	jsonhttp.Write(w, http.StatusOK, out)
}

func (m *Monitor) listErrors(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	status := StatusActive
	if r.URL.Query().Has("status") {
		status = r.URL.Query().Get("status")
	}
	if status != StatusActive && status != StatusResolved && status != "all" {
		jsonhttp.WriteError(w, http.StatusBadRequest, ErrValidation, fmt.Sprintf("status %q must be active, resolved or all", status))
		return
	}
	queryID := r.URL.Query().Get("query_id")
	if queryID != "" {
		if _, ok := m.byID[queryID]; !ok {
			jsonhttp.WriteError(w, http.StatusBadRequest, ErrValidation, fmt.Sprintf("query_id %q is not a configured query", queryID))
			return
		}
	}
	errs, err := m.store.errors()
	if err != nil {
		m.internal(w, r, err)
		return
	}
	out := []Error{}
	// Newest first.
	for i := len(errs) - 1; i >= 0; i-- {
		e := errs[i]
		if (status == "all" || e.Status == status) && (queryID == "" || e.QueryID == queryID) {
			out = append(out, e)
		}
	}
	jsonhttp.Write(w, http.StatusOK, map[string]any{"errors": out})
}

func (m *Monitor) resolveError(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	raw := ps.ByName("id")
	id, err := strconv.ParseUint(raw, 10, 64)
	if err != nil || id == 0 || raw != strconv.FormatUint(id, 10) {
		jsonhttp.WriteError(w, http.StatusNotFound, ErrNotFound, fmt.Sprintf("no error with id %q: error ids are positive integers", raw))
		return
	}
	var body struct {
		Note string `json:"note"`
	}
	// The body is optional; when there is one it is decoded strictly.
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		jsonhttp.WriteError(w, http.StatusBadRequest, ErrValidation, "cannot read request body")
		return
	}
	if int64(len(data)) > maxBody {
		jsonhttp.WriteError(w, http.StatusBadRequest, ErrValidation, fmt.Sprintf("request body is larger than %d bytes", maxBody))
		return
	}
	if strings.TrimSpace(string(data)) != "" {
		if err := jsonhttp.DecodeBytes(data, &body); err != nil {
			jsonhttp.WriteError(w, http.StatusBadRequest, ErrValidation, err.Error())
			return
		}
		if len(body.Note) > maxNote {
			jsonhttp.WriteError(w, http.StatusBadRequest, ErrValidation, fmt.Sprintf("note is longer than %d bytes", maxNote))
			return
		}
	}
	e, err := m.Resolve(id, body.Note)
	switch {
	case errors.Is(err, errNotFound):
		jsonhttp.WriteError(w, http.StatusNotFound, ErrNotFound, fmt.Sprintf("no error with id %d", id))
	case errors.Is(err, errAlreadyResolved):
		jsonhttp.WriteError(w, http.StatusConflict, ErrConflict, fmt.Sprintf("error %d is already resolved", id))
	case err != nil:
		m.internal(w, r, err)
	default:
		jsonhttp.Write(w, http.StatusOK, e)
	}
}

// days reads the days parameter: DefaultStatsDays when absent, else an
// integer from 1 to MaxStatsDays.
func days(w http.ResponseWriter, r *http.Request) (int, bool) {
	q := r.URL.Query()
	if !q.Has("days") {
		return DefaultStatsDays, true
	}
	raw := q.Get("days")
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > MaxStatsDays || len(q["days"]) > 1 {
		jsonhttp.WriteError(w, http.StatusBadRequest, ErrValidation,
			fmt.Sprintf("days %q must be one integer from 1 to %d (default %d)", raw, MaxStatsDays, DefaultStatsDays))
		return 0, false
	}
	return n, true
}

func (m *Monitor) overview(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	n, ok := days(w, r)
	if !ok {
		return
	}
	o, err := m.Overview(n)
	if err != nil {
		m.internal(w, r, err)
		return
	}
	jsonhttp.Write(w, http.StatusOK, o)
}

func (m *Monitor) timeline(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	n, ok := days(w, r)
	if !ok {
		return
	}
	tl, err := m.Timeline(n)
	if err != nil {
		m.internal(w, r, err)
		return
	}
	jsonhttp.Write(w, http.StatusOK, tl)
}

// SchedulerNext is the body of GET /api/scheduler/next: the next query due
// (null fields when no query is scheduled) and every scheduled query in order.
type SchedulerNext struct {
	QueryID   *string    `json:"query_id"`
	DueAt     *time.Time `json:"due_at"`
	InSeconds *float64   `json:"in_seconds"`
	Running   bool       `json:"scheduler_running"`
	Upcoming  []Due      `json:"upcoming"`
}

func (m *Monitor) schedulerNext(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	s := m.Schedule()
	out := SchedulerNext{Upcoming: s}
	if len(s) > 0 {
		out.QueryID, out.DueAt, out.InSeconds = &s[0].QueryID, &s[0].DueAt, &s[0].InSeconds
	}
	m.mu.Lock()
	out.Running = m.scheduling
	m.mu.Unlock()
	jsonhttp.Write(w, http.StatusOK, out)
}

// ConnectionInfo describes a connection: where it points, never its secret.
type ConnectionInfo struct {
	ID          string         `json:"id"`
	Kind        string         `json:"kind"`
	Description string         `json:"description,omitempty"`
	Target      map[string]any `json:"target"`
	Queries     []string       `json:"queries"`
}

func (m *Monitor) listConnections(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	out := []ConnectionInfo{}
	for _, c := range m.conns {
		info := ConnectionInfo{ID: c.ID, Kind: c.Kind, Description: c.Description, Target: m.sources[c.ID].info(), Queries: []string{}}
		for _, q := range m.queries {
			if q.Connection == c.ID {
				info.Queries = append(info.Queries, q.ID)
			}
		}
		out = append(out, info)
	}
	jsonhttp.Write(w, http.StatusOK, map[string]any{"connections": out})
}

func (m *Monitor) testConnection(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	out, err := m.TestConnection(r.Context(), ps.ByName("id"))
	if errors.Is(err, errNotFound) {
		jsonhttp.WriteError(w, http.StatusNotFound, ErrNotFound, fmt.Sprintf("no connection with id %q", ps.ByName("id")))
		return
	}
	jsonhttp.Write(w, http.StatusOK, out)
}

// ChannelInfo describes a channel and its latest delivery.
type ChannelInfo struct {
	ID           string         `json:"id"`
	Kind         string         `json:"kind"`
	Target       map[string]any `json:"target"`
	LastDelivery *Delivery      `json:"last_delivery"`
}

func (m *Monitor) listChannels(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	out := []ChannelInfo{}
	m.mu.Lock()
	for _, c := range m.chans {
		info := ChannelInfo{ID: c.ID, Kind: c.Kind, Target: m.notifiers[c.ID].info()}
		if d, ok := m.deliveries[c.ID]; ok {
			info.LastDelivery = &d
		}
		out = append(out, info)
	}
	m.mu.Unlock()
	jsonhttp.Write(w, http.StatusOK, map[string]any{"channels": out})
}

// ChannelTest is the body of POST /api/channels/{id}/test.
type ChannelTest struct {
	ChannelID string `json:"channel_id"`
	Delivery
}

func (m *Monitor) testChannel(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	d, err := m.TestChannel(r.Context(), ps.ByName("id"))
	if errors.Is(err, errNotFound) {
		jsonhttp.WriteError(w, http.StatusNotFound, ErrNotFound, fmt.Sprintf("no channel with id %q", ps.ByName("id")))
		return
	}
	jsonhttp.Write(w, http.StatusOK, ChannelTest{ChannelID: ps.ByName("id"), Delivery: d})
}
