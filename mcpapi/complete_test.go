package mcpapi_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCompletions: the turn_id of both Turn resource templates completes,
// through the official SDK's client in both protocol eras, to the ids of the
// Turns the endpoint's agent may read, newest first and narrowed by what was
// typed; a holder of the read grant is offered every Turn; another argument,
// or a value no id can begin with, completes to nothing; a prompt (there are
// none) or an unknown template is refused as invalid params.
func TestCompletions(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			e := newEnv(t)
			reqTok := e.agent("p1", "req", false, "turns:dispatch")
			wrkTok := e.agent("p1", "wrk", true)
			otherTok := e.agent("p1", "other", true)
			readerTok := e.agent("p1", "reader", false, "projections:read")
			requester := e.client("p1", "req", reqTok, era, nil)
			worker := e.client("p1", "wrk", wrkTok, era, nil)
			other := e.client("p1", "other", otherTok, era, nil)
			reader := e.client("p1", "reader", readerTok, era, nil)
			if worker.InitializeResult().Capabilities.Completions == nil {
				t.Fatal("the server does not declare the completions capability")
			}

			dispatch := func(target string) string {
				var d turnView
				mustCall(t, requester, "dispatch_turn", map[string]any{"target_agent_id": target, "turn_kind": "summarize", "input": map[string]any{"x": 1}}, &d)
				return d.TurnID
			}
			w1, o1, w2, w3 := dispatch("wrk"), dispatch("other"), dispatch("wrk"), dispatch("wrk")

			complete := func(cs *mcp.ClientSession, uri, arg, value string) (*mcp.CompleteResult, error) {
				return cs.Complete(context.Background(), &mcp.CompleteParams{
					Ref:      &mcp.CompleteReference{Type: "ref/resource", URI: uri},
					Argument: mcp.CompleteParamsArgument{Name: arg, Value: value},
				})
			}
			type got struct {
				Values  []string
				HasMore bool
			}
			for _, tc := range []struct {
				name            string
				cs              *mcp.ClientSession
				uri, arg, value string
				want            got
			}{
				{"the worker's Turns", worker, "turnledger://turns/{turn_id}", "turn_id", "", got{[]string{w3, w2, w1}, false}},
				{"the worker's, typed", worker, "turnledger://turns/{turn_id}", "turn_id", w2, got{[]string{w2}, false}},
				{"the worker's, of the context template", worker, "turnledger://turns/{turn_id}/context", "turn_id", "turn_", got{[]string{w3, w2, w1}, false}},
				{"another worker's", other, "turnledger://turns/{turn_id}", "turn_id", "", got{[]string{o1}, false}},
				{"none of another worker's", other, "turnledger://turns/{turn_id}", "turn_id", w1, got{[]string{}, false}},
				{"the requester's", requester, "turnledger://turns/{turn_id}", "turn_id", "", got{[]string{w3, w2, o1, w1}, false}},
				{"every Turn for the read grant", reader, "turnledger://turns/{turn_id}", "turn_id", "", got{[]string{w3, w2, o1, w1}, false}},
				{"another argument", worker, "turnledger://turns/{turn_id}", "project_id", "", got{[]string{}, false}},
				{"a value no id begins with", worker, "turnledger://turns/{turn_id}", "turn_id", "turn_/", got{[]string{}, false}},
			} {
				res, err := complete(tc.cs, tc.uri, tc.arg, tc.value)
				if err != nil {
					t.Errorf("%s: %v", tc.name, err)
					continue
				}
				if diff := cmp.Diff(tc.want, got{res.Completion.Values, res.Completion.HasMore}); diff != "" {
					t.Errorf("%s: completion/complete (-want +got):\n%s", tc.name, diff)
				}
			}

			for name, ref := range map[string]*mcp.CompleteReference{
				"a prompt":            {Type: "ref/prompt", Name: "summarize"},
				"an unknown template": {Type: "ref/resource", URI: "turnledger://agents/{agent_id}"},
			} {
				_, err := worker.Complete(context.Background(), &mcp.CompleteParams{Ref: ref, Argument: mcp.CompleteParamsArgument{Name: "turn_id"}})
				var rpc *jsonrpc.Error
				if !errors.As(err, &rpc) || rpc.Code != jsonrpc.CodeInvalidParams || !strings.Contains(rpc.Message, "turn_id of turnledger://turns/{turn_id}") {
					t.Errorf("completion of %s = %v, want invalid params naming what completes", name, err)
				}
			}
		})
	}
}
