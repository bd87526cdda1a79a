package httpapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/httpapi"
	"github.com/turnledger/turnledger/internal/natstest"
)

// knownTrends is a Trends of two minutes: one unsampled, one with a value
// in every field.
func knownTrends() httpapi.Trends {
	at := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	f := func(v float64) *float64 { return &v }
	zero := map[string]float64{"succeeded": 0, "failed": 0, "stopped": 0, "dead": 0, "expired": 0, "timed_out": 0}
	done := map[string]float64{"succeeded": 3, "failed": 1, "stopped": 0, "dead": 0, "expired": 0, "timed_out": 0}
	return httpapi.Trends{Now: at.Add(90 * time.Second), MinuteS: 60, Points: []httpapi.TrendPoint{
		{At: at, Finished: zero},
		{At: at.Add(time.Minute), Sampled: true, Dispatched: 5, Finished: done, Queued: f(1), AwaitingInput: f(0),
			ClaimWaitP50S: f(0.02), ClaimWaitP95S: f(0.5), RunP50S: f(1.5), RunP95S: f(4), ProjectionLagEvents: f(0), Shed: 2, Throttled: 1},
	}}
}

func withKnownTrends(c *httpapi.Config) {
	c.Trends = func(context.Context) httpapi.Trends { return knownTrends() }
}

// TestTrendsRoute: the admin reads the instance's trends as the source made
// them; an agent may not; a server without a source answers 404.
func TestTrendsRoute(t *testing.T) {
	e := newEnvOn(t, natstest.Start(t).ClientURL(), &clock{now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}, withKnownTrends)
	var got httpapi.Trends
	e.must(asAdmin, "GET", "/admin/v1/trends", nil, 200).decode(t, &got)
	if diff := cmp.Diff(knownTrends(), got); diff != "" {
		t.Errorf("GET /admin/v1/trends (-want +got):\n%s", diff)
	}
	w := e.register("p", "w", 1)
	e.must(w, "GET", "/admin/v1/trends", nil, 401)
	e.must(asAdmin, "GET", "/admin/v1/trends?x=1", nil, 422)
	plain := newEnv(t)
	plain.must(asAdmin, "GET", "/admin/v1/trends", nil, 404)
}
