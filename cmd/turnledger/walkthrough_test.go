package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestWalkthroughScriptMatchesTheREADME runs examples/walkthrough.sh against
// a real serve and checks the README's walk-through against it: its command
// lines are the script's, in the script's order, and every output it shows
// matches what the script printed for that command, where "…" in the README
// stands for any text (ids, tokens, times, fields left out).
func TestWalkthroughScriptMatchesTheREADME(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the walk-through needs %s: %v (bash .ci/test installs it; on Debian: apt-get install %s)", tool, err, tool)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("../../examples/walkthrough.sh")
	if err != nil {
		t.Fatal(err)
	}
	block := walkthroughBlock(t, string(readme))
	commands, outputs := readmeWalkthrough(block)

	// The README's commands are lines of the script, in order.
	scriptLines := strings.Split(string(script), "\n")
	at := 0
	for _, c := range commands {
		for at < len(scriptLines) && scriptLines[at] != c {
			at++
		}
		if at == len(scriptLines) {
			t.Errorf("the README's walk-through line\n\t%s\nis not in examples/walkthrough.sh (or not in the same order)", c)
			at = 0
		}
	}

	dir := t.TempDir()
	base, _ := startServe(t, dir)
	run := func() (string, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "../../examples/walkthrough.sh")
		// serve is on loopback: no proxy of the environment may stand between.
		cmd.Env = append(withoutEnv(os.Environ(), "ADMIN", "B", "DATA"), "B="+base, "DATA="+dir, "NO_PROXY=*", "no_proxy=*")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	stdout, stderr, err := run()
	if err != nil {
		t.Fatalf("examples/walkthrough.sh: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	printed := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	if n := countAPICalls(string(script)); len(printed) != n {
		t.Fatalf("the script printed %d lines for %d api calls:\n%s", len(printed), n, stdout)
	}
	if len(outputs) == 0 {
		t.Fatal("the README's walk-through shows no output")
	}
	for _, o := range outputs {
		if o.call >= len(printed) {
			t.Errorf("the README shows an output for api call %d; the script printed %d lines", o.call+1, len(printed))
			continue
		}
		if !o.re.MatchString(printed[o.call]) {
			t.Errorf("api call %d: the README shows\n\t%s\nbut the script printed\n\t%s", o.call+1, o.shown, printed[o.call])
		}
	}

	// A second run on the same data directory, with another Turn queued for
	// writer (dispatched as docs/client.md's worker section does, its
	// worker not running), says it ran already and claims nothing: the
	// other Turn stays queued, under no claim.
	admin := adminClient(t, base, dir)
	var other struct {
		TurnID string `json:"turn_id"`
	}
	json.Unmarshal(admin.call("POST", "/v3r1/projects/demo/turns:dispatch", map[string]any{
		"requested_by": agentRef("demo", "planner"), "target_agent": agentRef("demo", "writer"),
		"input": map[string]any{"text": "Summarise the release notes."}, "turn_kind": "summarize",
		"dispatch_key": "release-notes-2", "authority": map[string]any{"mode": "root_request", "request_id": "req-2"},
	}, 200), &other)
	_, stderr, err = run()
	if err == nil || !strings.Contains(stderr, "the walk-through ran on this data directory already") || !strings.Contains(stderr, "nothing was claimed") {
		t.Errorf("a second run = %v, stderr %q; want a failure that says the walk-through ran already and claimed nothing", err, stderr)
	}
	var after struct {
		State    string `json:"state"`
		Attempts int    `json:"attempts"`
	}
	json.Unmarshal(admin.call("GET", "/v3r1/projects/demo/turns/"+other.TurnID, nil, 200), &after)
	if after.State != "queued" || after.Attempts != 0 {
		t.Errorf("the other Turn of writer after a second run = %+v, want queued and never claimed", after)
	}
}

// walkthroughBlock returns the lines of the first sh block of the README's
// walk-through section.
func walkthroughBlock(t *testing.T, readme string) []string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n## Walk-through")
	if !ok {
		t.Fatal("the README has no walk-through section")
	}
	_, block, ok := strings.Cut(section, "```sh\n")
	if !ok {
		t.Fatal("the README's walk-through has no sh block")
	}
	block, _, ok = strings.Cut(block, "\n```")
	if !ok {
		t.Fatal("the README's walk-through block does not end")
	}
	return strings.Split(block, "\n")
}

// shownOutput is one output the README shows, for its api call number.
type shownOutput struct {
	call  int
	shown string
	re    *regexp.Regexp
}

var outputStart = regexp.MustCompile(`^# (\{|\[|null|[1-5][0-9][0-9] )`)

// readmeWalkthrough splits the walk-through block into the command lines it
// shares with the script (everything but comments, blank lines and the
// variables the script reads from its environment) and the outputs it shows,
// each joined from its comment lines ("# {…" and the "#  …" lines after it).
func readmeWalkthrough(lines []string) (commands []string, outputs []shownOutput) {
	call := -1
	inOutput := false
	for _, l := range lines {
		switch {
		case outputStart.MatchString(l):
			outputs = append(outputs, shownOutput{call: call, shown: strings.TrimPrefix(l, "# ")})
			inOutput = true
			continue
		case inOutput && strings.HasPrefix(l, "#  "):
			outputs[len(outputs)-1].shown += strings.TrimLeft(strings.TrimPrefix(l, "#"), " ")
			continue
		}
		inOutput = false
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "B=") || strings.HasPrefix(l, "ADMIN=") {
			continue
		}
		if strings.HasPrefix(l, "api ") {
			call++
		}
		commands = append(commands, l)
	}
	for i, o := range outputs {
		parts := strings.Split(o.shown, "…")
		for j, p := range parts {
			parts[j] = regexp.QuoteMeta(p)
		}
		outputs[i].re = regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
	}
	return commands, outputs
}

// countAPICalls counts the script's lines that call api.
func countAPICalls(script string) int {
	n := 0
	for _, l := range strings.Split(script, "\n") {
		if strings.HasPrefix(l, "api ") {
			n++
		}
	}
	return n
}

func withoutEnv(env []string, names ...string) []string {
	var out []string
	for _, kv := range env {
		keep := true
		for _, n := range names {
			keep = keep && !strings.HasPrefix(kv, n+"=")
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}
