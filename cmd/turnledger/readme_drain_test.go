package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	tl "github.com/turnledger/turnledger/client"
)

// TestREADMEDrainExampleDrains sends the README's drain example, its path
// and body as shown, to a real serve: the writer stops admitting work.
func TestREADMEDrainExampleDrains(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)curl -s -X POST http://127\.0\.0\.1:8000(\S+:drain) .*?-d '([^']*)'`).FindSubmatch(readme)
	if m == nil {
		t.Fatal("the README shows no curl example of :drain")
	}
	path, body := string(m[1]), string(m[2])

	dir := t.TempDir()
	base, _ := startServe(t, dir)
	ctx := context.Background()
	token := engineAdminToken(t, dir)
	adm, _ := tl.New(base, tl.WithAdminToken(token))
	for _, id := range []string{"planner", "writer"} {
		if _, err := adm.RegisterAgent(ctx, "demo", tl.RegisterRequest{
			Spec:       tl.AgentSpec{AgentID: id, Role: id, AcceptsWork: new(id == "writer")},
			Provenance: tl.Provenance{Kind: "test"},
		}); err != nil {
			t.Fatal(err)
		}
	}
	req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var ag struct {
		AgentID   string `json:"agent_id"`
		Admitting bool   `json:"admitting"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(data, &ag) != nil || ag.AgentID != "writer" || ag.Admitting {
		t.Errorf("POST %s %s = %d %s, want 200 and the writer not admitting", path, body, resp.StatusCode, data)
	}
}
