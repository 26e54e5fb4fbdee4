package wal_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/wal"
)

// testCtx bounds a test so that a bug hangs nothing.
func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// quiet is a logger that drops everything (tests inject faults on purpose).
func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fastConfig is a producer config with short timings for tests.
func fastConfig() wal.ProducerConfig {
	return wal.ProducerConfig{
		ManifestPath:  "wal/manifest",
		SegmentPrefix: "wal/seg",
		FlushInterval: 2 * time.Millisecond,
		RetryWindow:   5 * time.Second,
		Logger:        quiet(),
	}
}

// collector is an Applier that records what it was given, in order.
type collector struct {
	mu   sync.Mutex
	recs []wal.Record
}

func (c *collector) Apply(_ context.Context, r wal.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	r.Data = append([]byte(nil), r.Data...)
	r.GroupMeta = append([]byte(nil), r.GroupMeta...)
	c.recs = append(c.recs, r)
	return nil
}

func (c *collector) records() []wal.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]wal.Record(nil), c.recs...)
}

// tailAll polls a fresh replica until it stops finding records.
func tailAll(t *testing.T, ctx context.Context, store casstore.Store) []wal.Record {
	t.Helper()
	c := &collector{}
	r := wal.NewReplica(store, c, wal.ReplicaConfig{ManifestPath: "wal/manifest", Logger: quiet()})
	for {
		n, err := r.Poll(ctx)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if n == 0 {
			return c.records()
		}
	}
}

func rec(i int) []byte { return []byte(fmt.Sprintf("record-%06d", i)) }

// seedFor returns a seed for a randomized test and logs it so a failure
// replays: set WAL_SEED to reuse one.
func seedFor(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("WAL_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("seed %d (rerun with WAL_SEED=%d)", seed, seed)
	return seed
}
