package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
)

// The write path of an engine: fold what the ledger holds, decide, append
// with the expectation "the project is where I folded it", and on a conflict
// catch up and decide again.
func Example() {
	dir, err := os.MkdirTemp("", "ledger-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	srv, err := ledger.StartEmbedded(ledger.DefaultEmbeddedConfig(dir))
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	nc, err := srv.Connect()
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	store, err := ledger.Open(ctx, nc, ledger.DefaultConfig())
	if err != nil {
		log.Fatal(err)
	}

	heartbeat := kernel.Event{
		Type: kernel.EvAgentHeartbeat, V: 1,
		ProjectID: "acme", Aggregate: kernel.AggAgent, ID: "a1",
		At:    time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC),
		Actor: kernel.Actor{Kind: "agent", AgentID: "a1"},
		Data:  &kernel.AgentHeartbeat{},
	}

	// Someone else writes first.
	if _, err := store.Append(ctx, "acme", 0, heartbeat); err != nil {
		log.Fatal(err)
	}

	var folded uint64 // what this writer has folded: nothing yet
	for {
		seq, err := store.Append(ctx, "acme", folded, heartbeat)
		if errors.Is(err, ledger.ErrConflict) {
			fmt.Println("conflict: catching up")
			folded, err = store.ReadProject(ctx, "acme", folded, func(r kernel.Recorded) error {
				fmt.Println("fold", r.Seq, r.Event.Type)
				return nil
			})
			if err != nil {
				log.Fatal(err)
			}
			continue
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("appended at ledger_seq", seq)
		break
	}
	// Output:
	// conflict: catching up
	// fold 1 agent.heartbeat
	// appended at ledger_seq 2
}
