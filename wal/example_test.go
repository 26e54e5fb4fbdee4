package wal_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/wal"
)

// A producer appends key=value records; a replica applies them to a map.
func Example() {
	ctx := context.Background()
	store := casstore.NewMemory()

	p, err := wal.NewProducer(ctx, store, wal.ProducerConfig{
		ManifestPath:  "wal/manifest",
		SegmentPrefix: "wal/seg",
		FlushInterval: 5 * time.Millisecond,
	})
	if err != nil {
		panic(err)
	}
	d, err := p.Append(ctx, [][]byte{[]byte("a=1"), []byte("b=2")}, []byte("batch-1"))
	if err != nil {
		panic(err)
	}
	seq, err := d.Wait(ctx) // durable and ordered once Wait returns
	if err != nil {
		panic(err)
	}
	fmt.Println("first sequence:", seq)
	if err := p.Close(ctx); err != nil {
		panic(err)
	}

	kv := map[string]string{}
	applier := wal.TypedApplier(
		func(b []byte) ([2]string, error) {
			k, v, _ := strings.Cut(string(b), "=")
			return [2]string{k, v}, nil
		},
		func(_ context.Context, seq uint64, op [2]string) error {
			kv[op[0]] = op[1] // idempotent: delivery is at least once
			return nil
		},
	)
	r := wal.NewReplica(store, applier, wal.ReplicaConfig{ManifestPath: "wal/manifest"})
	n, err := r.Poll(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("applied:", n, "a =", kv["a"], "b =", kv["b"], "next:", r.Next())
	// Output:
	// first sequence: 0
	// applied: 2 a = 1 b = 2 next: 2
}

// Run tails the log until its context ends; Append does not wait for the
// commit, so many groups can be in flight at once.
func ExampleReplica_Run() {
	ctx := context.Background()
	store := casstore.NewMemory()
	p, err := wal.NewProducer(ctx, store, wal.ProducerConfig{})
	if err != nil {
		panic(err)
	}
	var last *wal.Durability
	for i := range 100 {
		if last, err = p.Append(ctx, [][]byte{fmt.Appendf(nil, "record %d", i)}, nil); err != nil {
			panic(err)
		}
	}
	if _, err := last.Wait(ctx); err != nil {
		panic(err)
	}

	applied := 0
	r := wal.NewReplica(store, wal.ApplyFunc(func(_ context.Context, rec wal.Record) error {
		applied++
		return nil
	}), wal.ReplicaConfig{PollInterval: time.Millisecond})
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- r.Run(rctx) }()
	for r.Next() < 100 {
		time.Sleep(time.Millisecond)
	}
	stop()
	fmt.Println("Run:", <-done, "applied:", applied)
	if err := p.Close(ctx); err != nil {
		panic(err)
	}
	// Output: Run: <nil> applied: 100
}
