package projection

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestCompactAfterRetirementShrinksTheFileAndKeepsItsContent retires most of
// a file's Turns, then compacts it at "start": the file shrinks and holds
// the same keys and values.
func TestCompactAfterRetirementShrinksTheFileAndKeepsItsContent(t *testing.T) {
	l := newEvents()
	l.register("a", "worker", 2, "k")
	for i := range 400 {
		id := fmt.Sprintf("t%03d", i)
		l.dispatch(id, "a", "a", "k")
		l.claim(id, "a", "c"+id)
		l.record(id, "a", "c"+id, 1, "note", `{"text":"`+fmt.Sprint(make([]byte, 200))+`"}`)
		l.finish(id, "a", "c"+id, "succeeded", "", 1)
	}
	s, path := openStore(t)
	mustApply(t, s, l.recs)
	if _, err := s.Retire(Retirement{Horizon: l.seq - 3, FinishedBefore: l.now(), Now: l.now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	want := mustDump(t, s)
	s.Close()
	if res, err := CompactIfFree(path, 1.01); err != nil || res.Compacted {
		t.Fatalf("CompactIfFree(more than all free) = %+v, %v; want nothing done", res, err)
	}
	res, err := CompactIfFree(path, 0.5)
	if err != nil || !res.Compacted || res.BytesAfter*2 > res.BytesBefore {
		t.Fatalf("CompactIfFree(0.5) = %+v, %v; want the file compacted to under half", res, err)
	}
	if err := Check(path); err != nil {
		t.Errorf("Check(compacted file) = %v, want nil", err)
	}
	if _, err := os.Stat(path + sumSuffix); err != nil {
		t.Errorf("the compacted file has no page sum: %v", err)
	}
	s2, err := Open(path, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if diff := cmp.Diff(want, mustDump(t, s2)); diff != "" {
		t.Errorf("compacted file (-before +after):\n%s", diff)
	}
	s2.Close()
	if share, _, err := FreeShare(path); err != nil || share > 0.1 {
		t.Errorf("free share after compaction = %.2f, %v; want under 0.1", share, err)
	}
}
