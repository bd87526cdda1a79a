package kernel

import "testing"

func TestOpenCounts(t *testing.T) {
	p := NewProject("p")
	p.Turns["q1"] = &Turn{ID: "q1", State: StateQueued}
	p.Turns["q2"] = &Turn{ID: "q2", State: StateQueued}
	p.Turns["c"] = &Turn{ID: "c", State: StateClaimed}
	p.Turns["s"] = &Turn{ID: "s", State: StateSuspended}
	p.Turns["w"] = &Turn{ID: "w", State: StateSuspended, AwaitingInput: &AwaitingInput{Prompt: "ok?"}}
	if q, w := p.OpenCounts(); q != 2 || w != 1 {
		t.Errorf("OpenCounts() = %d queued, %d awaiting input; want 2, 1", q, w)
	}
}
