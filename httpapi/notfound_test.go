package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// TestEveryReadNamesWhatItDidNotFind: the feeds (page and stream), the Turn
// reads and the agent read all answer an unknown Turn or agent as the Turn
// route does, "turn <id> not found", never a bare "not found".
func TestEveryReadNamesWhatItDidNotFind(t *testing.T) {
	e := newEnv(t)
	e.register("p1", "w", 1)
	const p = "/v3r1/projects/p1"
	for _, tc := range []struct {
		path, want string
		stream     bool
	}{
		{p + "/turns/turn_x", "turn turn_x not found", false},
		{p + "/turns/turn_x/context", "turn turn_x not found", false},
		{p + "/turns/turn_x/feed", "turn turn_x not found", false},
		{p + "/turns/turn_x/feed", "turn turn_x not found", true},
		{p + "/projection/turns/turn_x/lineage", "turn turn_x not found", false},
		{p + "/agents/ghost", "agent ghost not found", false},
		{p + "/agents/ghost/feed", "agent ghost not found", false},
		{p + "/agents/ghost/feed", "agent ghost not found", true},
	} {
		req, err := http.NewRequest("GET", e.url+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		if tc.stream {
			req.Header.Set("Accept", "text/event-stream")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var body struct {
			Error   string `json:"error"`
			Message string `json:"message"`
		}
		json.Unmarshal(data, &body)
		if resp.StatusCode != 404 || body.Error != "NotFoundError" || body.Message != tc.want {
			t.Errorf("GET %s (stream %v) = %d %s, want 404 NotFoundError %q", tc.path, tc.stream, resp.StatusCode, data, tc.want)
		}
	}
}
