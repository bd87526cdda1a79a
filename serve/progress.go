package serve

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// replayProgress reports the progress of a replay: on a terminal a bar
// redrawn in place with events/s and the time left, elsewhere (a log, a
// pipe) a line every half second.
type replayProgress struct {
	out      io.Writer
	terminal bool
	now      func() time.Time
	start    time.Time
	last     time.Time
	drawn    bool
}

func newReplayProgress(out io.Writer, now func() time.Time) *replayProgress {
	return &replayProgress{out: out, terminal: isTerminal(out), now: now, start: now()}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// update is the progress callback of projection.Rebuild.
func (p *replayProgress) update(applied, head uint64) {
	now := p.now()
	every := 500 * time.Millisecond
	if p.terminal {
		every = 100 * time.Millisecond
	}
	if now.Sub(p.last) < every && applied < head {
		return
	}
	p.last = now
	if !p.terminal {
		fmt.Fprintf(p.out, "replayed %d/%d events (%.1f%%)\n", applied, head, percent(applied, head))
		return
	}
	fmt.Fprint(p.out, "\r"+progressBar(applied, head, now.Sub(p.start), 30))
	p.drawn = true
}

// done ends the bar's line.
func (p *replayProgress) done() {
	if p.drawn {
		fmt.Fprintln(p.out)
	}
}

func percent(applied, head uint64) float64 {
	if head == 0 {
		return 100
	}
	return 100 * float64(applied) / float64(head)
}

// progressBar renders one line:
//
//	[=============>                ] 45.0%  4500/10000 events  9000 ev/s  ETA 1s
func progressBar(applied, head uint64, elapsed time.Duration, width int) string {
	pct := percent(applied, head)
	fill := int(pct / 100 * float64(width))
	fill = min(max(fill, 0), width)
	bar := strings.Repeat("=", fill)
	if fill < width {
		bar += ">" + strings.Repeat(" ", width-fill-1)
	}
	rate := 0.0
	if elapsed > 0 {
		rate = float64(applied) / elapsed.Seconds()
	}
	eta := "?"
	switch {
	case applied >= head:
		eta = "0s"
	case rate > 0:
		eta = (time.Duration(float64(head-applied)/rate*float64(time.Second)) + time.Second/2).Truncate(time.Second).String()
	}
	return fmt.Sprintf("[%s] %5.1f%%  %d/%d events  %.0f ev/s  ETA %s ", bar, pct, applied, head, rate, eta)
}
