package ledger_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
)

// BenchmarkGroupCommit measures the levers of group commit on file storage
// with an fsync per message (SyncAlways) and with the periodic sync: one
// project's events appended one at a time, as atomic batches of n events
// (one commit each), and pipelined: n publishes in flight at once, each
// expecting the project's last ledger_seq to be its predecessor's. Then the
// lever kept (groupsync.go, GroupCommit): appends made durable by a shared
// fsync, from one writer in sequence (an fsync each) and from n writers of
// one project, each appending under the project's lock as the engine does
// and waiting for durability after releasing it.
//
//	go test ./ledger -run '^$' -bench GroupCommit -benchtime 2s
func BenchmarkGroupCommit(b *testing.B) {
	for _, sync := range []ledger.Sync{ledger.SyncAlways, ledger.SyncInterval} {
		b.Run(string(sync)+"/sequential", func(b *testing.B) {
			s, _ := openSync(b, sync, false)
			appendInSequence(b, s)
		})
		for _, n := range []int{2, 8, 32, 64, 256} {
			b.Run(fmt.Sprintf("%s/batch-%d", sync, n), func(b *testing.B) {
				s, _ := openSync(b, sync, false)
				batch := make([]kernel.Event, n)
				for i := range batch {
					batch[i] = record("p1", "t1", 1)
				}
				var last uint64
				for b.Loop() {
					seqs, err := s.AppendBatch(context.Background(), "p1", last, batch)
					if err != nil {
						b.Fatal(err)
					}
					last = seqs[len(seqs)-1]
				}
				eventsPerSecond(b, b.N*n)
			})
		}
		for _, n := range []int{8, 64} {
			b.Run(fmt.Sprintf("%s/pipelined-%d", sync, n), func(b *testing.B) {
				_, nc := openSync(b, sync, false)
				js, err := jetstream.New(nc)
				if err != nil {
					b.Fatal(err)
				}
				data, err := kernel.MarshalEvent(record("p1", "t1", 1))
				if err != nil {
					b.Fatal(err)
				}
				var last uint64
				for b.Loop() {
					futs := make([]jetstream.PubAckFuture, n)
					for i := range futs {
						m := &nats.Msg{Subject: "tl.p1.turn", Data: data, Header: nats.Header{
							"Nats-Expected-Last-Subject-Sequence":         []string{strconv.FormatUint(last+uint64(i), 10)},
							"Nats-Expected-Last-Subject-Sequence-Subject": []string{"tl.p1.>"},
						}}
						if futs[i], err = js.PublishMsgAsync(m); err != nil {
							b.Fatal(err)
						}
					}
					for _, f := range futs {
						select {
						case a := <-f.Ok():
							last = a.Sequence
						case err := <-f.Err():
							b.Fatal(err)
						}
					}
				}
				eventsPerSecond(b, b.N*n)
			})
		}
	}
	b.Run("group/sequential", func(b *testing.B) {
		s, _ := openSync(b, ledger.SyncAlways, true)
		appendInSequence(b, s)
	})
	for _, n := range []int{8, 64} {
		b.Run(fmt.Sprintf("group/%d-writers", n), func(b *testing.B) {
			s, _ := openSync(b, ledger.SyncAlways, true)
			ev := record("p1", "t1", 1)
			var mu sync.Mutex
			var last uint64
			b.SetParallelism((n + 1) / 2) // GOMAXPROCS is 2 here
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					mu.Lock()
					seq, err := s.Append(context.Background(), "p1", last, ev)
					if err == nil {
						last = seq
					}
					mu.Unlock()
					if err == nil {
						err = s.Durable(context.Background(), seq)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			eventsPerSecond(b, b.N)
		})
	}
}
