package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	tl "github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/internal/checkfor"
)

// TestCLIReadsThroughTheAPI: feed tail, turns list|show and agents list
// against the binary's serve, with the admin token read from the data
// directory.
func TestCLIReadsThroughTheAPI(t *testing.T) {
	dir := t.TempDir()
	base, _ := startServe(t, dir)
	t.Setenv("TURNLEDGER_ADMIN_TOKEN", "")
	ctx := context.Background()
	adm, _ := tl.New(base, tl.WithAdminToken(engineAdminToken(t, dir)))
	if _, err := adm.RegisterAgent(ctx, "demo", tl.RegisterRequest{
		Spec:       tl.AgentSpec{AgentID: "w", Role: "worker", Capabilities: []string{"summarize"}},
		Provenance: tl.Provenance{Kind: "test"},
	}); err != nil {
		t.Fatal(err)
	}
	common := []string{"--url", base, "--data", dir, "--project", "demo"}

	// feed tail, started before the Turn, prints it live.
	tailCtx, stopTail := context.WithCancel(ctx)
	defer stopTail()
	tail := &syncBuffer{}
	tailDone := make(chan int, 1)
	go func() { tailDone <- Main(tailCtx, append([]string{"feed", "tail"}, common...), tail, tail) }()
	checkfor.Until(t, 10*time.Second, "feed tail to print the registration", func() bool {
		return strings.Contains(tail.String(), "agent.registered agent/w by admin")
	})
	tv, err := adm.DispatchTurn(ctx, "demo", tl.DispatchRequest{
		RequestedBy: tl.AgentRef{ProjectID: "demo", AgentID: "w"}, TargetAgent: tl.AgentRef{ProjectID: "demo", AgentID: "w"},
		TurnKind: "summarize", DispatchKey: "d1", Authority: tl.Root("r1"),
	})
	if err != nil {
		t.Fatal(err)
	}
	checkfor.Until(t, 10*time.Second, "feed tail to print the dispatch", func() bool {
		return strings.Contains(tail.String(), "turn.dispatched turn/"+tv.TurnID+" by admin")
	})
	stopTail()
	if code := <-tailDone; code != 0 {
		t.Errorf("feed tail exited with %d: %s", code, tail.String())
	}

	run := func(args ...string) string {
		t.Helper()
		out := &syncBuffer{}
		if code := Main(ctx, args, out, out); code != 0 {
			t.Fatalf("turnledger %v = exit %d: %s", args, code, out.String())
		}
		return out.String()
	}
	if out := run(append([]string{"turns", "list"}, common...)...); !strings.Contains(out, tv.TurnID) || !strings.Contains(out, "queued") {
		t.Errorf("turns list =\n%s\nwant the queued Turn", out)
	}
	if out := run(append(append([]string{"turns", "list"}, common...), "--state", "finished")...); strings.Contains(out, tv.TurnID) {
		t.Errorf("turns list --state finished =\n%s\nwant no queued Turn", out)
	}
	var shown struct {
		Turn struct {
			TurnID string `json:"turn_id"`
		} `json:"turn"`
	}
	if out := run(append(append([]string{"turns", "show"}, common...), tv.TurnID)...); json.Unmarshal([]byte(out), &shown) != nil || shown.Turn.TurnID != tv.TurnID {
		t.Errorf("turns show =\n%s", out)
	}
	shown.Turn.TurnID = ""
	if out := run(append([]string{"turns", "show", tv.TurnID}, common...)...); json.Unmarshal([]byte(out), &shown) != nil || shown.Turn.TurnID != tv.TurnID {
		t.Errorf("turns show TURN_ID --flags =\n%s", out)
	}
	if out := run(append([]string{"agents", "list"}, common...)...); !strings.Contains(out, "w ") {
		t.Errorf("agents list =\n%s\nwant agent w", out)
	}

	// Errors: a missing project is a usage error; an unknown Turn is the
	// service's 404.
	out := &syncBuffer{}
	if code := Main(ctx, []string{"turns", "list", "--url", base, "--data", dir}, out, out); code != 2 {
		t.Errorf("turns list without --project = exit %d, want 2", code)
	}
	out = &syncBuffer{}
	if code := Main(ctx, append(append([]string{"turns", "show"}, common...), "nope"), out, out); code != 1 || !strings.HasPrefix(out.String(), "turnledger turns: 404 NotFoundError: ") || strings.Count(out.String(), "turnledger") != 1 {
		t.Errorf("turns show nope = exit %d %q, want 1 with one prefix and NotFoundError", code, out.String())
	}
}

// TestFeedTailSaysWhatItFollows: feed tail says on stderr what it follows
// from where, each lost connection and reconnection, and on exit the
// ledger_seq to resume after; an unknown project is an error at once.
func TestFeedTailSaysWhatItFollows(t *testing.T) {
	dir := t.TempDir()
	base, _ := startServe(t, dir)
	t.Setenv("TURNLEDGER_ADMIN_TOKEN", "")
	ctx := context.Background()
	adm, _ := tl.New(base, tl.WithAdminToken(engineAdminToken(t, dir)))
	register := func(id string) {
		t.Helper()
		if _, err := adm.RegisterAgent(ctx, "demo", tl.RegisterRequest{
			Spec:       tl.AgentSpec{AgentID: id, Role: "worker"},
			Provenance: tl.Provenance{Kind: "test"},
		}); err != nil {
			t.Fatal(err)
		}
	}
	register("w1")

	// An unknown project says so and ends, instead of waiting.
	quick, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out, errb syncBuffer
	code := Main(quick, []string{"feed", "tail", "--url", base, "--data", dir, "--project", "demoo"}, &out, &errb)
	if want := `turnledger feed: project "demoo" is unknown`; code != 1 || out.String() != "" || !strings.HasPrefix(errb.String(), want) {
		t.Errorf("feed tail --project demoo = exit %d, stdout %q, stderr %q; want exit 1 and %q", code, out.String(), errb.String(), want)
	}

	// Through a proxy whose connections the test drops.
	target, _ := url.Parse(base)
	proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(target))
	defer proxy.Close()
	tailCtx, stopTail := context.WithCancel(ctx)
	defer stopTail()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(tailCtx, []string{"feed", "tail", "--url", proxy.URL, "--data", dir, "--project", "demo"}, &stdout, &stderr)
	}()
	checkfor.Until(t, 10*time.Second, "feed tail to say what it follows and print w1", func() bool {
		return strings.Contains(stderr.String(), "following the feed of project demo after ledger_seq 0\n") &&
			strings.Contains(stdout.String(), "agent.registered agent/w1")
	})
	proxy.CloseClientConnections()
	register("w2")
	checkfor.Until(t, 10*time.Second, "feed tail to reconnect and print w2", func() bool {
		return strings.Contains(stdout.String(), "agent.registered agent/w2")
	})
	stopTail()
	if code := <-done; code != 0 {
		t.Fatalf("feed tail = exit %d, stderr %q", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	seqW1, _, _ := strings.Cut(lines[0], " ")
	seqW2, _, _ := strings.Cut(lines[len(lines)-1], " ")
	want := "following the feed of project demo after ledger_seq 0\n" +
		"lost the feed of project demo (the connection closed); reconnecting\n" +
		"reconnected to the feed of project demo after ledger_seq " + seqW1 + "\n" +
		"stopped at ledger_seq " + seqW2 + "; to go on from there: --after " + seqW2 + "\n"
	if got := stderr.String(); got != want {
		t.Errorf("feed tail stderr =\n%s\nwant\n%s", got, want)
	}
}
