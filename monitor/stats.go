package monitor

import (
	"sort"
	"time"
)

// Overview is the statistics of the last Days days (UTC), today included.
type Overview struct {
	Days           int       `json:"days"`
	From           time.Time `json:"from"`
	To             time.Time `json:"to"`
	Runs           int       `json:"runs"`
	FailedRuns     int       `json:"failed_runs"`
	FailureRate    float64   `json:"failure_rate"`
	ErrorsOpened   int       `json:"errors_opened"`
	ErrorsResolved int       `json:"errors_resolved"`
	// ActiveErrors is counted now, whatever the window.
	ActiveErrors int `json:"active_errors"`
	// MeanTimeToResolveSeconds averages the errors resolved in the window;
	// null when none was.
	MeanTimeToResolveSeconds *float64     `json:"mean_time_to_resolve_seconds"`
	ByQuery                  []QueryStats `json:"by_query"`
}

// QueryStats is one query's share of an overview.
type QueryStats struct {
	QueryID      string `json:"query_id"`
	Runs         int    `json:"runs"`
	FailedRuns   int    `json:"failed_runs"`
	ErrorsOpened int    `json:"errors_opened"`
}

// Timeline is one entry per UTC day, oldest first, days without activity
// included.
type Timeline struct {
	Days     int         `json:"days"`
	From     time.Time   `json:"from"`
	To       time.Time   `json:"to"`
	Timeline []DayCounts `json:"timeline"`
}

// DayCounts is the activity of one UTC day.
type DayCounts struct {
	Date           string `json:"date"` // YYYY-MM-DD
	Runs           int    `json:"runs"`
	FailedRuns     int    `json:"failed_runs"`
	ErrorsOpened   int    `json:"errors_opened"`
	ErrorsResolved int    `json:"errors_resolved"`
}

// window is [start of the UTC day days-1 days ago, now].
func window(now time.Time, days int) (time.Time, time.Time) {
	now = now.UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	return today.AddDate(0, 0, -(days - 1)), now
}

func in(t, from, to time.Time) bool { return !t.Before(from) && !t.After(to) }

// Overview computes statistics from the stored history.
func (m *Monitor) Overview(days int) (Overview, error) {
	from, to := window(m.cfg.Now(), days)
	runs, err := m.store.runs(from, to.Add(time.Nanosecond), "")
	if err != nil {
		return Overview{}, err
	}
	errs, err := m.store.errors()
	if err != nil {
		return Overview{}, err
	}
	o := Overview{Days: days, From: from, To: to, ByQuery: []QueryStats{}}
	per := map[string]*QueryStats{}
	for _, q := range m.queries {
		per[q.ID] = &QueryStats{QueryID: q.ID}
	}
	stat := func(id string) *QueryStats {
		if per[id] == nil {
			per[id] = &QueryStats{QueryID: id}
		}
		return per[id]
	}
	for _, r := range runs {
		o.Runs++
		stat(r.QueryID).Runs++
		if !r.Passed {
			o.FailedRuns++
			stat(r.QueryID).FailedRuns++
		}
	}
	if o.Runs > 0 {
		o.FailureRate = float64(o.FailedRuns) / float64(o.Runs)
	}
	var ttr float64
	for _, e := range errs {
		if e.Status == StatusActive {
			o.ActiveErrors++
		}
		if in(e.OpenedAt, from, to) {
			o.ErrorsOpened++
			stat(e.QueryID).ErrorsOpened++
		}
		if e.ResolvedAt != nil && in(*e.ResolvedAt, from, to) {
			o.ErrorsResolved++
			ttr += e.ResolvedAt.Sub(e.OpenedAt).Seconds()
		}
	}
	if o.ErrorsResolved > 0 {
		mean := ttr / float64(o.ErrorsResolved)
		o.MeanTimeToResolveSeconds = &mean
	}
	for _, s := range per {
		o.ByQuery = append(o.ByQuery, *s)
	}
	sort.Slice(o.ByQuery, func(i, j int) bool { return o.ByQuery[i].QueryID < o.ByQuery[j].QueryID })
	return o, nil
}

// Timeline computes daily counts from the stored history.
func (m *Monitor) Timeline(days int) (Timeline, error) {
	from, to := window(m.cfg.Now(), days)
	runs, err := m.store.runs(from, to.Add(time.Nanosecond), "")
	if err != nil {
		return Timeline{}, err
	}
	errs, err := m.store.errors()
	if err != nil {
		return Timeline{}, err
	}
	tl := Timeline{Days: days, From: from, To: to, Timeline: make([]DayCounts, days)}
	for i := range tl.Timeline {
		tl.Timeline[i].Date = from.AddDate(0, 0, i).Format(time.DateOnly)
	}
	day := func(t time.Time) *DayCounts {
		if !in(t, from, to) {
			return nil
		}
		i := int(t.UTC().Sub(from) / (24 * time.Hour))
		if i < 0 || i >= days {
			return nil
		}
		return &tl.Timeline[i]
	}
	for _, r := range runs {
		if d := day(r.StartedAt); d != nil {
			d.Runs++
			if !r.Passed {
				d.FailedRuns++
			}
		}
	}
	for _, e := range errs {
		if d := day(e.OpenedAt); d != nil {
			d.ErrorsOpened++
		}
		if e.ResolvedAt != nil {
			if d := day(*e.ResolvedAt); d != nil {
				d.ErrorsResolved++
			}
		}
	}
	return tl, nil
}
