package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	tl "github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/internal/checkfor"
)

// TestWorkerSectionMatchesTheDocs runs docs/client.md's "A worker in Go"
// section after the README's walk-through, as a reader would, against a real
// serve: the walk-through script, the section's `feed tail` command, its
// credential command (bash, curl, jq) and the example worker, then a dispatch
// of the walk-through's Turn with a new dispatch_key. The lines `feed tail` printed
// and the worker's lines must be the ones the section shows, where "…"
// stands for any text (times, ids).
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
	admin := engineAdminToken(t, dir)

	// The walk-through first: the section continues it.
	cmd := exec.Command("bash", "../../examples/walkthrough.sh")
	cmd.Env = append(withoutEnv(os.Environ(), "ADMIN", "B", "DATA"), "B="+base, "DATA="+dir, "NO_PROXY=*", "no_proxy=*")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("examples/walkthrough.sh: %v\n%s", err, out)
	}
	printed := strings.Split(strings.TrimSpace(string(out)), "\n")
	var issued struct {
		Token string `json:"token"`
	}
	if len(printed) < 3 || json.Unmarshal([]byte(printed[2]), &issued) != nil || issued.Token == "" {
		t.Fatalf("the walk-through's third line holds no planner token:\n%s", out)
	}

	// Terminal 2: feed tail, as the section writes it, on this serve.
	tailCtx, stopTail := context.WithCancel(context.Background())
	defer stopTail()
	tail := &syncBuffer{}
	tailDone := make(chan int, 1)
	go func() {
		// The section shows the feed (standard output); what feed tail says
		// of its connection goes to standard error.
		tailDone <- Main(tailCtx, append(sec.feedTail, "--url", base, "--data", dir), tail, io.Discard)
	}()

	// Terminal 3: the credential command and the example worker.
	cmd = exec.Command("bash", "-c", "set -euo pipefail\n"+sec.credential+"\nprintf %s \"$TURNLEDGER_AGENT_TOKEN\"")
	cmd.Env = append(withoutEnv(os.Environ(), "ADMIN", "B"), "B="+base, "ADMIN="+admin, "NO_PROXY=*", "no_proxy=*")
	token, err := cmd.Output()
	if err != nil || !strings.HasPrefix(string(token), "tla_") {
		t.Fatalf("the section's credential command = %q, %v; want a credential token", token, err)
	}
	bin := filepath.Join(t.TempDir(), "worker")
	build := exec.Command("go", "build", "-o", bin, "./examples/worker")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/worker: %v\n%s", err, out)
	}
	worker := exec.Command(bin, append(sec.workerArgs, "-url", base)...)
	worker.Env = append(os.Environ(), "TURNLEDGER_AGENT_TOKEN="+string(token))
	workerOut := &syncBuffer{}
	worker.Stdout, worker.Stderr = workerOut, workerOut
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	workerDone := make(chan error, 1)
	go func() { workerDone <- worker.Wait() }()
	defer func() {
		worker.Process.Signal(syscall.SIGTERM)
		<-workerDone
	}()
	wantFirst := strings.Replace(sec.workerFirstLine, "http://127.0.0.1:8000", base, 1)
	checkfor.Until(t, 20*time.Second, "the worker to report its presence", func() bool {
		return strings.Contains(tail.String(), " agent.heartbeat agent/writer ")
	})
	if first, _, _ := strings.Cut(workerOut.String(), "\n"); first != wantFirst {
		t.Errorf("the worker's first line = %q, want %q (the section's, on this serve)", first, wantFirst)
	}

	// The walk-through's step 3 with a new dispatch_key.
	planner, _ := tl.New(base, tl.WithAgent("demo", "planner", issued.Token))
	tv, err := planner.DispatchTurn(context.Background(), "demo", tl.DispatchRequest{
		RequestedBy: tl.AgentRef{ProjectID: "demo", AgentID: "planner"}, TargetAgent: tl.AgentRef{ProjectID: "demo", AgentID: "writer"},
		Input: map[string]any{"text": "Summarise the release notes."}, TurnKind: "summarize",
		DispatchKey: "release-notes-2", Authority: tl.Root("req-2"), Meta: &tl.Meta{Note: "second turn"},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkfor.Until(t, 20*time.Second, "feed tail to print the Turn's finish", func() bool {
		return strings.Contains(tail.String(), " turn.finished turn/"+tv.TurnID+" ")
	})
	checkfor.Until(t, 10*time.Second, "the worker to print the finish", func() bool {
		return strings.Contains(workerOut.String(), "finished "+tv.TurnID)
	})
	stopTail()
	if code := <-tailDone; code != 0 {
		t.Errorf("feed tail exited with %d:\n%s", code, tail.String())
	}

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

// workerSection is what docs/client.md's worker section shows: the commands it
// runs and the outputs it shows.
type workerSection struct {
	feedTail        []string // turnledger's arguments
	credential      string   // the shell lines that export TURNLEDGER_AGENT_TOKEN
	workerArgs      []string // the example worker's arguments
	workerFirstLine string
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
	if len(blocks) < 3 || blocks[0][1] != "sh" || blocks[1][1] != "sh" || blocks[2][1] != "" {
		t.Fatalf("the worker section does not start with two sh blocks and a block of feed lines: %d blocks", len(blocks))
	}
	var ws workerSection

	tailLine, _, _ := strings.Cut(blocks[0][2], "#")
	args, ok := strings.CutPrefix(strings.TrimSpace(tailLine), "go run ./cmd/turnledger ")
	if !ok {
		t.Fatalf("the worker section's first block is not a turnledger command: %q", blocks[0][2])
	}
	ws.feedTail = strings.Fields(args)

	for _, l := range strings.Split(blocks[1][2], "\n") {
		switch {
		case strings.HasPrefix(l, "go run ./examples/worker "):
			ws.workerArgs = strings.Fields(strings.TrimPrefix(l, "go run ./examples/worker "))
		case strings.HasPrefix(l, "# "):
			ws.workerFirstLine = strings.TrimPrefix(l, "# ")
		default:
			ws.credential += l + "\n"
		}
	}
	if !strings.Contains(ws.credential, "export TURNLEDGER_AGENT_TOKEN=") || ws.workerArgs == nil || ws.workerFirstLine == "" {
		t.Fatalf("the worker section's second block lacks the credential export, the worker command or its first line:\n%s", blocks[1][2])
	}

	ws.feedLines = strings.Split(blocks[2][2], "\n")
	_, after, _ := strings.Cut(sec, blocks[2][0])
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
