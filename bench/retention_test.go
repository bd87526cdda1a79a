package bench

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// TestBenchRetentionReportsSaneNumbers runs the retention scenario on a
// small ledger and checks that its report adds up: a horizon near 90 % of
// the ledger, Turns retired, an archive, and a compacted projection file
// smaller than the one before.
func TestBenchRetentionReportsSaneNumbers(t *testing.T) {
	var out, errb bytes.Buffer
	cfg := DefaultConfig()
	cfg.Scenario, cfg.Events, cfg.Agents, cfg.Duration, cfg.Data, cfg.JSON = "retention", 2000, 4, 300*time.Millisecond, t.TempDir(), true
	if err := Run(t.Context(), cfg, &out, &errb); err != nil {
		t.Fatalf("bench = %v: %s", err, errb.String())
	}
	var r Result
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || r.Retention == nil {
		t.Fatalf("bench printed %q: %v", out.String(), err)
	}
	rr := r.Retention
	if rr.Horizon < 1500 || rr.Horizon > 2100 || rr.TurnsRetired < 300 || rr.ArchiveMB <= 0 {
		t.Errorf("retention = %+v; want a horizon near 90 %% of 2000 events, Turns retired and an archive", rr)
	}
	// (The stream's files shrink by whole blocks of JetStream's file store:
	// not at this size.)
	if rr.ProjMBCompact >= rr.ProjMBBefore || rr.BytesPerEventC >= rr.BytesPerEvent {
		t.Errorf("retention = %+v; want a smaller compacted projection file", rr)
	}
	if rr.P99Before <= 0 || rr.P99During < rr.P50During {
		t.Errorf("retention = %+v; want command latencies measured", rr)
	}
}
