// Command river runs a Turn-like lifecycle on River (a PostgreSQL job
// queue) for comparison with `turnledger bench`: --inserters clients in a
// closed loop each insert a job and wait until it is completed; the worker
// writes one record row and completes the job in the same transaction. It
// prints lifecycles/s and the p50/p95/p99 of a lifecycle.
//
// It lives in a module of its own so that turnledger does not depend on
// River. scripts/river-bench.sh starts a throwaway PostgreSQL and runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// TurnArgs is the job: a Turn's input.
type TurnArgs struct {
	N int64 `json:"n"`
}

func (TurnArgs) Kind() string { return "turn" }

// TurnWorker writes the Turn's one record and completes the job in the
// same transaction, then tells the inserter waiting for the job (done).
type TurnWorker struct {
	river.WorkerDefaults[TurnArgs]
	pool *pgxpool.Pool
	done func(jobID int64)
}

func (w *TurnWorker) Work(ctx context.Context, job *river.Job[TurnArgs]) error {
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO turn_record (job_id, payload) VALUES ($1, $2)`, job.ID, `{"n":1}`); err != nil {
		return err
	}
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	w.done(job.ID)
	return nil
}

func main() {
	url := flag.String("url", os.Getenv("DATABASE_URL"), "PostgreSQL URL")
	inserters := flag.Int("inserters", 64, "clients in a closed loop")
	workers := flag.Int("workers", 64, "River's MaxWorkers of the queue")
	duration := flag.Duration("duration", 15*time.Second, "how long to measure")
	cooldown := flag.Duration("fetch-cooldown", 100*time.Millisecond, "River's FetchCooldown (its default is 100ms)")
	poll := flag.Duration("fetch-poll", time.Second, "River's FetchPollInterval (its default is 1s)")
	flag.Parse()
	if err := run(*url, *inserters, *workers, *duration, *cooldown, *poll); err != nil {
		fmt.Fprintln(os.Stderr, "river bench:", err)
		os.Exit(1)
	}
}

func run(url string, inserters, maxWorkers int, d, cooldown, poll time.Duration) error {
	ctx := context.Background()
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return err
	}
	pcfg.MaxConns = int32(inserters + maxWorkers + 8)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS turn_record (id bigserial PRIMARY KEY, job_id bigint NOT NULL, payload jsonb NOT NULL)`); err != nil {
		return err
	}
	// Route completions to the inserter waiting for the job: the worker
	// tells once its transaction (record and completion) has committed.
	var mu sync.Mutex
	waiting := map[int64]chan struct{}{}
	early := map[int64]bool{}
	done := func(id int64) {
		mu.Lock()
		defer mu.Unlock()
		if ch, ok := waiting[id]; ok {
			close(ch)
			delete(waiting, id)
		} else {
			early[id] = true
		}
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &TurnWorker{pool: pool, done: done})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}},
		Workers:           workers,
		FetchCooldown:     cooldown,
		FetchPollInterval: poll,
	})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	defer client.Stop(context.Background())

	var n atomic.Int64
	cpu0 := cpuSeconds()
	lats := make([][]time.Duration, inserters)
	errs := make([]error, inserters)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range inserters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < d {
				t0 := time.Now()
				res, err := client.Insert(ctx, TurnArgs{N: n.Add(1)}, nil)
				if err != nil {
					errs[i] = err
					return
				}
				ch := make(chan struct{})
				mu.Lock()
				if early[res.Job.ID] {
					delete(early, res.Job.ID)
					close(ch)
				} else {
					waiting[res.Job.ID] = ch
				}
				mu.Unlock()
				select {
				case <-ch:
				case <-time.After(30 * time.Second):
					errs[i] = fmt.Errorf("job %d not completed within 30s", res.Job.ID)
					return
				}
				lats[i] = append(lats[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	cpu := cpuSeconds() - cpu0
	var all []time.Duration
	for i := range inserters {
		if errs[i] != nil {
			return errors.Join(errs...)
		}
		all = append(all, lats[i]...)
	}
	slices.Sort(all)
	q := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[int(p*float64(len(all)-1))]) / float64(time.Millisecond)
	}
	var sc, fs string
	pool.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&sc)
	pool.QueryRow(ctx, `SHOW fsync`).Scan(&fs)
	fmt.Printf("river: %d inserters, MaxWorkers %d, FetchCooldown %v, FetchPollInterval %v; PostgreSQL synchronous_commit=%s fsync=%s\n", inserters, maxWorkers, cooldown, poll, sc, fs)
	fmt.Printf("%.1f s: %d lifecycles, %.0f lifecycles/s; lifecycle p50 %.2f ms, p95 %.2f ms, p99 %.2f ms\n", el.Seconds(), len(all), float64(len(all))/el.Seconds(), q(0.5), q(0.95), q(0.99))
	fmt.Printf("CPU %.2f cores (PostgreSQL's processes and this one), %.0f µs per lifecycle\n", cpu/el.Seconds(), 1e6*cpu/float64(max(len(all), 1)))
	return nil
}

// cpuSeconds is the CPU time used so far by this process and every
// process named postgres (the server, its backends and workers), from
// /proc: comparable with turnledger bench's CPU of server and load
// generator.
func cpuSeconds() float64 {
	const ticks = 100 // USER_HZ on Linux
	read := func(stat string) float64 {
		b, err := os.ReadFile(stat)
		if err != nil {
			return 0
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			return 0
		}
		name := s[strings.IndexByte(s, '(')+1 : i]
		if stat != "/proc/self/stat" && name != "postgres" {
			return 0
		}
		f := strings.Fields(s[i+2:])
		if len(f) < 13 {
			return 0
		}
		u, _ := strconv.ParseFloat(f[11], 64)
		k, _ := strconv.ParseFloat(f[12], 64)
		return (u + k) / ticks
	}
	total := read("/proc/self/stat")
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		total += read(st)
	}
	return total
}
