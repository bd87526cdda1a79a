package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/projection"
)

// blob is some bytes the service keeps or shows, and where they came from.
type blob struct {
	where string
	data  []byte
}

// secretCore is the random part of a secret: what must never be seen, even
// without its well-known prefix.
func secretCore(s string) string {
	for _, p := range []string{"tla_", "tlc_"} {
		if c, ok := strings.CutPrefix(s, p); ok {
			return c
		}
	}
	if rest, ok := strings.CutPrefix(s, engine.JoinCodePrefix); ok {
		if _, c, ok := strings.Cut(rest, "."); ok {
			return c
		}
	}
	return s
}

// leaks returns, for every needle found in a blob, where.
func leaks(blobs []blob, needles map[string]string) []string {
	var found []string
	for _, b := range blobs {
		for name, n := range needles {
			if bytes.Contains(b.data, []byte(n)) {
				found = append(found, name+" in "+b.where)
			}
		}
	}
	return found
}

// TestNoSecretInLedgerOrFeeds runs the join scenario plus a credential issue,
// an admin bootstrap, invites, claims (a live one among them) and a child
// dispatch that carries its parent's claim token, then reads every event of
// the ledger (decoded, and the raw messages of the stream) and every feed,
// projection and snapshot page, and finds no credential token, join code,
// claim token or admin token in clear, and in the reads no hash of one either.
func TestNoSecretInLedgerOrFeeds(t *testing.T) {
	srv := natstest.Start(t)
	clk := &clock{now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	e := newEnvOn(t, srv.ClientURL(), clk)
	s := e.runJoinScenario(t)
	secrets := append([]string{}, s.secrets...)

	// A credential issue, a bootstrap, invites redeemed and not.
	req2, _ := e.issueFor("p1", "req")
	secrets = append(secrets, req2.token)
	boot := decodeMaterial(t, e.must(asAdmin, "POST", "/admin/v1/projects/p1/agent-credential-tokens:request", map[string]any{"agent_id": "boot"}, 200))
	secrets = append(secrets, boot.Token)
	_, unused := e.createInvite("p1", inviteBody("later", nil))
	_, multi := e.createInvite("p1", inviteBody("multi", func(b map[string]any) { b["single_use"] = false }))
	joined := decodeMaterial(t, e.must(asNobody, "POST", aliasRoute, map[string]any{"join_code": multi}, 200))
	secrets = append(secrets, unused, multi, joined.Token)

	// Claims: one finished under a renewed claim with a child dispatched from
	// it (the child's body carries the parent claim token), one left live.
	w2 := e.register("p1", "w2", 2)
	secrets = append(secrets, w2.token)
	e.dispatch(req2, "w2", "w2-a")
	c := e.claim(w2)
	secrets = append(secrets, c.Claim.Token)
	var renewed struct {
		Claim claimToken `json:"claim"`
	}
	e.must(w2, "POST", "/v3r1/projects/p1/claims:renew", map[string]any{"claim": c.Claim}, 200).decode(t, &renewed)
	secrets = append(secrets, renewed.Claim.Token)
	child := dispatchBody("p1", "w2", "req", "child-of-w2-a", map[string]any{})
	child["authority"] = map[string]any{"mode": "child_derivation", "parent_claim": renewed.Claim}
	child["meta"] = map[string]any{"note": "canary-note-7f3a"} // a positive control: it must be found
	e.must(w2, "POST", "/v3r1/projects/p1/turns:dispatch", child, 200)
	e.must(w2, "POST", "/v3r1/projects/p1/turns/"+c.Turn.TurnID+":finish", map[string]any{
		"claim": renewed.Claim, "outcome": "succeeded", "final_payload": nil, "final_record_role": ""}, 200)
	e.dispatch(req2, "w2", "w2-b")
	live := e.claim(w2)
	secrets = append(secrets, live.Claim.Token)
	// Refused attempts with secrets in them store nothing either.
	e.do(asNobody, "POST", redeemRoute, map[string]any{"join_code": multi + "x"})
	e.do(as{project: "p1", agent: "w2", token: "tla_guessed-token"}, "GET", "/v3r1/projects/p1/agents/w2", nil)

	needles := map[string]string{}
	hashes := map[string]string{}
	for i, sec := range secrets {
		if sec == "" {
			t.Fatalf("secret %d is empty", i)
		}
		needles[fmt.Sprintf("secret %d (%.8s…)", i, sec)] = secretCore(sec)
		hashes[fmt.Sprintf("hash of secret %d (%.8s…)", i, sec)] = kernel.HashSecret(sec)
	}
	canary := map[string]string{"canary": "canary-note-7f3a"}

	// The ledger: every event decoded and encoded again, and every raw message.
	ctx := context.Background()
	var ledgerBlobs []blob
	if _, err := e.ledger.ReadAll(ctx, 0, func(batch []kernel.Recorded, _ uint64) error {
		for _, r := range batch {
			data, err := kernel.MarshalEvent(r.Event)
			if err != nil {
				return err
			}
			ledgerBlobs = append(ledgerBlobs, blob{fmt.Sprintf("event %d %s", r.Seq, r.Event.Type), data})
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(natstest.ConnectURL(t, srv.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, e.ledger.Config().Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("get message %d: %v", seq, err)
		}
		raw := []byte(m.Subject + "\n" + fmt.Sprint(m.Header) + "\n")
		ledgerBlobs = append(ledgerBlobs, blob{fmt.Sprintf("raw message %d", seq), append(raw, m.Data...)})
	}
	if n := info.State.Msgs; len(ledgerBlobs) != 2*int(n) || n < 20 {
		t.Fatalf("read %d ledger blobs for %d messages, want two per message and a long scenario", len(ledgerBlobs), n)
	}
	if found := leaks(ledgerBlobs, needles); len(found) > 0 {
		t.Errorf("secrets in clear in the ledger:\n%s", strings.Join(found, "\n"))
	}
	if found := leaks(ledgerBlobs, canary); len(found) != 2 {
		t.Errorf("the canary is in %v, want the dispatch event and its raw message", found)
	}

	// Every read: feeds of the project, of every agent and of every Turn, all
	// pages; snapshots, context, lineage, directory, offers and credentials.
	var reads []blob
	get := func(path string) []byte {
		t.Helper()
		r := e.must(asAdmin, "GET", path, nil, 200)
		reads = append(reads, blob{path, r.body})
		return r.body
	}
	feed := func(path string) {
		t.Helper()
		_, bodies := e.readFeed(asAdmin, path, 7)
		for i, b := range bodies {
			reads = append(reads, blob{fmt.Sprintf("%s page %d", path, i), b})
		}
	}
	feed("/v3r1/projects/p1/projection/feed")
	var agents agentPage
	if err := json.Unmarshal(get("/v3r1/projects/p1/projection/agents?limit=500"), &agents); err != nil {
		t.Fatal(err)
	}
	if len(agents.Items) != 5 {
		t.Fatalf("directory has %d agents, want 5", len(agents.Items))
	}
	for _, a := range agents.Items {
		feed("/v3r1/projects/p1/agents/" + a.AgentID + "/feed")
		get("/v3r1/projects/p1/agents/" + a.AgentID)
		get("/v3r1/projects/p1/agents/" + a.AgentID + "/credentials")
	}
	var turns struct {
		Items []projection.TurnView `json:"items"`
	}
	if err := json.Unmarshal(get("/v3r1/projects/p1/projection/turns?limit=500"), &turns); err != nil {
		t.Fatal(err)
	}
	if len(turns.Items) != 4 {
		t.Fatalf("projection/turns has %d Turns, want 4", len(turns.Items))
	}
	for _, tv := range turns.Items {
		feed("/v3r1/projects/p1/turns/" + tv.TurnID + "/feed")
		get("/v3r1/projects/p1/turns/" + tv.TurnID)
		get("/v3r1/projects/p1/turns/" + tv.TurnID + "/context?limit=500")
		get("/v3r1/projects/p1/projection/turns/" + tv.TurnID + "/lineage")
	}
	get("/v3r1/projects/p1/projection/turn-offers?limit=500")
	if found := leaks(reads, needles); len(found) > 0 {
		t.Errorf("secrets in clear in the reads:\n%s", strings.Join(found, "\n"))
	}
	if found := leaks(reads, hashes); len(found) > 0 {
		t.Errorf("hashes of secrets in the reads:\n%s", strings.Join(found, "\n"))
	}
	if found := leaks(reads, map[string]string{"token_hash": "token_hash", "code_hash": "code_hash"}); len(found) > 0 {
		t.Errorf("hash fields in the reads:\n%s", strings.Join(found, "\n"))
	}
	if found := leaks(reads, canary); len(found) == 0 {
		t.Errorf("the canary is in no read, want it in the feeds")
	}
}
