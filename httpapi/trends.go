package httpapi

import (
	"net/http"
	"time"

	"github.com/turnledger/turnledger/kernel"
)

// Trends is the last hour of one instance, a point a minute, for the
// console's overview: what /metrics counts, kept by the server itself (a
// bounded ring in memory, lost at restart) so that no Prometheus is needed
// to see how the service has been.
type Trends struct {
	// Now is when the answer was made; the last point is the minute that
	// holds it, still filling.
	Now time.Time `json:"now"`
	// MinuteS is the width of a point in seconds (60).
	MinuteS int `json:"minute_s"`
	// Points are the minutes of the last hour, oldest first, every minute
	// present: one in which this instance took no sample (it was not
	// running) has sampled false, zero counts and null levels.
	Points []TrendPoint `json:"points"`
}

// TrendPoint is one minute. Counts are what happened in the minute; levels
// (queued, awaiting_input, projection_lag_events) are the last reading of
// the minute; the percentiles are of the claims and finishes of the minute
// (null when there were none), read from /metrics' histograms as
// histogram_quantile does (linear within a bucket).
type TrendPoint struct {
	At      time.Time `json:"at"` // the minute's start
	Sampled bool      `json:"sampled"`
	// Dispatched: Turns dispatched. Finished: Turns finished, by outcome
	// (every outcome present, 0 when none).
	Dispatched float64            `json:"dispatched"`
	Finished   map[string]float64 `json:"finished"`
	// Queued and AwaitingInput: Turns queued, and Turns suspended waiting
	// for input, in the projects loaded on this instance.
	Queued        *float64 `json:"queued"`
	AwaitingInput *float64 `json:"awaiting_input"`
	// ClaimWait: dispatch to first claim. Run: claim to finish. Seconds.
	ClaimWaitP50S *float64 `json:"claim_wait_p50_s"`
	ClaimWaitP95S *float64 `json:"claim_wait_p95_s"`
	RunP50S       *float64 `json:"run_p50_s"`
	RunP95S       *float64 `json:"run_p95_s"`
	// ProjectionLagEvents: ledger head minus the projection's checkpoint.
	ProjectionLagEvents *float64 `json:"projection_lag_events"`
	// Shed and Throttled: commands refused with 503 (the in-flight bound
	// shed them, or their project was still loading) and with 429 (a rate
	// or authentication throttle).
	Shed      float64 `json:"shed"`
	Throttled float64 `json:"throttled"`
}

// trendsSchema is the OpenAPI schema of Trends.
func trendsSchema() m {
	num := m{"type": "number"}
	level := nullable(num)
	outcomes := m{}
	for _, o := range kernel.AllOutcomes {
		outcomes[o] = num
	}
	point := closed(m{
		"at": tTime, "sampled": tBool, "dispatched": num, "finished": closed(outcomes),
		"queued": level, "awaiting_input": level,
		"claim_wait_p50_s": level, "claim_wait_p95_s": level, "run_p50_s": level, "run_p95_s": level,
		"projection_lag_events": level, "shed": num, "throttled": num,
	})
	return closed(m{"now": tTime, "minute_s": m{"type": "integer"}, "points": m{"type": "array", "items": point}})
}

func (s *Server) trends(w http.ResponseWriter, c *call) error {
	if _, err := s.query(c); err != nil {
		return err
	}
	if s.cfg.Trends == nil {
		return kernel.Errorf(kernel.NotFound, "trends are not kept by this server")
	}
	return s.ok(w, s.cfg.Trends(c.ctx))
}
