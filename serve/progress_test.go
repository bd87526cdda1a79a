package serve

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestProgressBar(t *testing.T) {
	for _, tc := range []struct {
		applied, head uint64
		elapsed       time.Duration
		want          string
	}{
		{0, 100, 0, "[>         ]   0.0%  0/100 events  0 ev/s  ETA ? "},
		{50, 100, time.Second, "[=====>    ]  50.0%  50/100 events  50 ev/s  ETA 1s "},
		{25, 100, time.Second, "[==>       ]  25.0%  25/100 events  25 ev/s  ETA 3s "},
		{100, 100, 2 * time.Second, "[==========] 100.0%  100/100 events  50 ev/s  ETA 0s "},
		{0, 0, 0, "[==========] 100.0%  0/0 events  0 ev/s  ETA 0s "},
	} {
		if got := progressBar(tc.applied, tc.head, tc.elapsed, 10); got != tc.want {
			t.Errorf("progressBar(%d, %d, %v) = %q, want %q", tc.applied, tc.head, tc.elapsed, got, tc.want)
		}
	}
}

// TestReplayProgressOffTerminal: into a pipe or a log, progress is plain
// lines at most every half second, and the last one always.
func TestReplayProgressOffTerminal(t *testing.T) {
	var out bytes.Buffer
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newReplayProgress(&out, func() time.Time { return now })
	for i := uint64(1); i <= 10; i++ {
		now = now.Add(100 * time.Millisecond)
		p.update(i*10, 100)
	}
	p.done()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || lines[len(lines)-1] != "replayed 100/100 events (100.0%)" {
		t.Errorf("progress lines = %q, want 3 ending at 100%%", lines)
	}
}
