package projection

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

var updateLayout = flag.Bool("update", false, "rewrite the golden layout file of this SchemaVersion")

// TestLayoutIsPinned pins every bucket's keys and values for a small scenario
// (agents, a credential, a Turn and its child through their lives) in a golden
// file named after SchemaVersion. Rows hold kernel types as JSON, so a renamed
// kernel field changes the file layout: this test then fails, and the change
// needs a new SchemaVersion (old files are refused and rebuilt by replay) and a
// new golden file (go test ./projection -run TestLayoutIsPinned -update).
func TestLayoutIsPinned(t *testing.T) {
	l := newEvents()
	l.register("req", "planner", 1)
	l.register("w", "worker", 2, "summarize")
	l.issue("w", "cred_1", time.Hour)
	l.dispatch("t1", "w", "req", "summarize")
	l.claim("t1", "w", "clm_1")
	l.record("t1", "w", "clm_1", 1, "draft", `{"text":"a"}`)
	l.child("t2", "t1", "t1", 1, "w", "w", "summarize")
	l.finish("t1", "w", "clm_1", "succeeded", `{"summary":"b"}`, 2)
	s := applied(t, l)
	got := map[string]map[string]string{}
	for bucket, rows := range mustDump(t, s) {
		if bucket == "snapshots" {
			continue // the write models' snapshots: the kernel's format, pinned there
		}
		got[bucket] = map[string]string{}
		for k, v := range rows {
			got[bucket][printable(k)] = printable(v)
		}
	}

	path := filepath.Join("testdata", "layout", fmt.Sprintf("v%d.json", SchemaVersion))
	if *updateLayout {
		b, err := json.MarshalIndent(got, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden layout: %v (a new SchemaVersion needs go test ./projection -run TestLayoutIsPinned -update)", err)
	}
	var want map[string]map[string]string
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the projection file's layout changed without a new SchemaVersion (%d); bump it and write a new golden file (-want +got):\n%s", SchemaVersion, diff)
	}
}

// printable is s itself when it is text, else its Go quoted form, so the
// golden file keeps binary keys (big-endian integers) byte for byte.
func printable(s string) string {
	if utf8.ValidString(s) && strconv.IsPrint(firstNonPrint(s)) {
		return s
	}
	return "quoted:" + strconv.Quote(s)
}

// firstNonPrint returns the first rune of s that is not printable, or 'a'.
func firstNonPrint(s string) rune {
	for _, r := range s {
		if !strconv.IsPrint(r) {
			return r
		}
	}
	return 'a'
}
