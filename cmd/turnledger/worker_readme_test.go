package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turnledger/turnledger/internal/checkfor"
)

// TestWorkerSectionMatchesTheDocs runs docs/client.md's "A worker in Go"
// section after the README's walk-through, as a reader would, against a real
// serve: the walk-through script, then each of the section's shell blocks
// (feed tail, the credential and the example worker, the dispatch) in a
// shell of its own started with nothing but PATH and HOME, in a folder
// whose ./data is serve's data directory. The blocks run as written, but
// for three stand-ins: the serve of the test for http://127.0.0.1:8000, and
// the test binary's turnledger and the example worker built once for their
// `go run`. The lines `feed tail` printed and the worker's lines must be the
// ones the section shows, where "…" stands for any text (times, ids).
func TestWorkerSectionMatchesTheDocs(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("docs/client.md's worker section needs %s: %v (bash .ci/test installs curl and jq)", tool, err)
		}
	}
	doc, err := os.ReadFile("../../docs/client.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := docWorkerSection(t, string(doc))

	dir := t.TempDir()
	base, _ := startServe(t, dir)

	// The walk-through first: the section continues it.
	cmd := exec.Command("bash", "../../examples/walkthrough.sh")
	cmd.Env = append(withoutEnv(os.Environ(), "ADMIN", "B", "DATA"), "B="+base, "DATA="+dir, "NO_PROXY=*", "no_proxy=*")
	if out, err := cmd.Output(); err != nil {
		t.Fatalf("examples/walkthrough.sh: %v\n%s", err, out)
	}

	// The stand-ins: a turnledger that is this test binary running Main
	// (with serve's URL for its default), the example worker built once, and
	// a folder whose ./data is serve's.
	bin := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	turnledger := filepath.Join(bin, "turnledger")
	if err := os.WriteFile(turnledger, []byte("#!/bin/sh\nexport "+envChildMain+"=1 TURNLEDGER_URL="+base+"\nexec '"+self+"' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	worker := filepath.Join(bin, "worker")
	build := exec.Command("go", "build", "-o", worker, "./examples/worker")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/worker: %v\n%s", err, out)
	}
	home := t.TempDir()
	if err := os.Symlink(dir, filepath.Join(home, "data")); err != nil {
		t.Fatal(err)
	}
	shell := func(block string) *exec.Cmd {
		block = strings.ReplaceAll(block, "http://127.0.0.1:8000", base)
		block = strings.ReplaceAll(block, "go run ./cmd/turnledger ", turnledger+" ") // its default URL is TURNLEDGER_URL, set to serve's
		block = strings.ReplaceAll(block, "go run ./examples/worker ", worker+" -url "+base+" ")
		c := exec.Command("bash", "-c", "set -euo pipefail\n"+block)
		c.Dir = home
		c.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "NO_PROXY=*", "no_proxy=*"}
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the block's processes end with it (below)
		return c
	}
	stderr := &syncBuffer{} // what the blocks say on standard error, shown when the test fails
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the blocks' standard error:\n%s", stderr.String())
		}
	})
	background := func(name, block string, stdout io.Writer) {
		t.Helper()
		c := shell(block)
		c.Stdout, c.Stderr = stdout, stderr
		if err := c.Start(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		done := make(chan struct{})
		go func() { c.Wait(); close(done) }()
		t.Cleanup(func() {
			syscall.Kill(-c.Process.Pid, syscall.SIGTERM) // the group this block's shell leads
			<-done
		})
	}

	// Terminal 2: feed tail. Terminal 3: the credential and the worker.
	tail, workerOut := &syncBuffer{}, &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("feed tail printed:\n%s\nthe worker printed:\n%s", tail.String(), workerOut.String())
		}
	})
	background("the feed tail block", sec.feedTail, tail)
	background("the worker block", sec.worker, workerOut)
	wantFirst := strings.Replace(sec.workerFirstLine, "http://127.0.0.1:8000", base, 1)
	checkfor.Until(t, 30*time.Second, "the worker to start", func() bool {
		return strings.Contains(workerOut.String(), "\n")
	})
	if first, _, _ := strings.Cut(workerOut.String(), "\n"); first != wantFirst {
		t.Errorf("the worker's first line = %q, want %q (the section's, on this serve)", first, wantFirst)
	}

	// Terminal 4: the dispatch.
	out, err := shell(sec.dispatch).Output()
	turn := strings.TrimSpace(string(out))
	if err != nil || !ellipsisPattern(sec.dispatchOut).MatchString(turn) {
		t.Fatalf("the dispatch block printed %q, %v; the section shows %q", out, err, sec.dispatchOut)
	}
	checkfor.Until(t, 20*time.Second, "feed tail to print the Turn's finish", func() bool {
		return strings.Contains(tail.String(), " turn.finished turn/"+turn+" ")
	})
	checkfor.Until(t, 10*time.Second, "the worker to print the finish", func() bool {
		return strings.Contains(workerOut.String(), "finished "+turn)
	})

	got := strings.Split(strings.TrimSpace(tail.String()), "\n")
	if len(got) != len(sec.feedLines) {
		t.Errorf("feed tail printed %d lines, the section shows %d:\nprinted:\n%s\nshown:\n%s", len(got), len(sec.feedLines), tail.String(), strings.Join(sec.feedLines, "\n"))
	}
	for i := range min(len(got), len(sec.feedLines)) {
		if !ellipsisPattern(sec.feedLines[i]).MatchString(got[i]) {
			t.Errorf("feed tail line %d: the section shows\n\t%s\nbut feed tail printed\n\t%s", i+1, sec.feedLines[i], got[i])
		}
	}
	for _, shown := range sec.workerLines {
		re := ellipsisPattern(shown)
		found := false
		for _, l := range strings.Split(workerOut.String(), "\n") {
			found = found || re.MatchString(l)
		}
		if !found {
			t.Errorf("the section says the worker prints %q; it printed:\n%s", shown, workerOut.String())
		}
	}
}

// workerSection is what docs/client.md's worker section shows: its shell
// blocks and the outputs it shows.
type workerSection struct {
	feedTail        string // the feed tail block
	worker          string // the credential and the worker, without the shown output
	workerFirstLine string
	dispatch        string // the dispatch block, without the shown output
	dispatchOut     string
	feedLines       []string
	workerLines     []string
}

func docWorkerSection(t *testing.T, doc string) workerSection {
	t.Helper()
	_, sec, ok := strings.Cut("\n"+doc, "\n# A worker in Go")
	if !ok {
		t.Fatal("docs/client.md has no section \"A worker in Go\"")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	blocks := regexp.MustCompile("(?s)```([a-z]*)\n(.*?)\n```").FindAllStringSubmatch(sec, -1)
	if len(blocks) < 4 || blocks[0][1] != "sh" || blocks[1][1] != "sh" || blocks[2][1] != "sh" || blocks[3][1] != "" {
		t.Fatalf("the worker section does not start with three sh blocks and a block of feed lines: %d blocks", len(blocks))
	}
	var ws workerSection
	// shown splits a block into its commands and the output shown after
	// them ("# " lines at its end).
	shown := func(block string) (cmds, out string) {
		lines := strings.Split(block, "\n")
		i := len(lines)
		for i > 0 && strings.HasPrefix(lines[i-1], "# ") {
			i--
		}
		var outs []string
		for _, l := range lines[i:] {
			outs = append(outs, strings.TrimPrefix(l, "# "))
		}
		return strings.Join(lines[:i], "\n"), strings.Join(outs, "\n")
	}
	ws.feedTail = blocks[0][2]
	if !strings.Contains(ws.feedTail, "go run ./cmd/turnledger feed tail ") {
		t.Fatalf("the worker section's first block is not feed tail: %q", ws.feedTail)
	}
	ws.worker, ws.workerFirstLine = shown(blocks[1][2])
	if !strings.Contains(ws.worker, "export TURNLEDGER_AGENT_TOKEN=") || !strings.Contains(ws.worker, "go run ./examples/worker ") || ws.workerFirstLine == "" {
		t.Fatalf("the worker section's second block lacks the credential export, the worker command or its first line:\n%s", blocks[1][2])
	}
	ws.dispatch, ws.dispatchOut = shown(blocks[2][2])
	if !strings.Contains(ws.dispatch, "/turns:dispatch") || ws.dispatchOut == "" {
		t.Fatalf("the worker section's third block is not a dispatch with its output shown:\n%s", blocks[2][2])
	}
	ws.feedLines = strings.Split(blocks[3][2], "\n")
	_, after, _ := strings.Cut(sec, blocks[3][0])
	for _, m := range regexp.MustCompile("`((?:claimed|finished) [^`]*)`").FindAllStringSubmatch(after, 2) {
		ws.workerLines = append(ws.workerLines, m[1])
	}
	if len(ws.workerLines) != 2 {
		t.Fatalf("the worker section does not say which lines the worker prints (claimed …, finished …)")
	}
	return ws
}

// ellipsisPattern matches a shown line where "…" stands for any text.
func ellipsisPattern(shown string) *regexp.Regexp {
	parts := strings.Split(shown, "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
}
