package projection

import (
	"fmt"
	"testing"

	"github.com/turnledger/turnledger/kernel"
)

// BenchmarkApplyWatched measures what the watches add to Apply (no fsync):
// one batch of a Turn's four lifecycle events, with no watcher, with 1000
// agents of the project waiting (none of them the target), and with the
// target waiting too (its watch is closed and taken again each time).
func BenchmarkApplyWatched(b *testing.B) {
	for _, tc := range []struct {
		name     string
		watchers int
		target   bool
	}{{"none", 0, false}, {"1000-others", 1000, false}, {"1000-and-target", 1000, true}} {
		b.Run(tc.name, func(b *testing.B) {
			s, _ := openStore(b)
			l := newEvents()
			mustApply(b, s, []kernel.Recorded{l.register("w", "coder", 4, "code")})
			for i := range tc.watchers {
				_, stop := s.WatchAgent(proj, fmt.Sprintf("idle%d", i))
				defer stop()
			}
			i := 0
			for b.Loop() {
				if tc.target {
					_, stop := s.WatchAgent(proj, "w")
					defer stop()
				}
				id := fmt.Sprintf("t%d", i)
				i++
				from := len(l.recs)
				l.dispatch(id, "w", "w", "code")
				l.claim(id, "w", "c"+id)
				l.record(id, "w", "c"+id, 1, "note", `{}`)
				l.finish(id, "w", "c"+id, "succeeded", "", 1)
				if err := s.Apply(l.recs[from:]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
