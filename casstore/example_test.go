package casstore_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/objwal/objwal/casstore"
)

// Open a store by URL, create an object only if it is absent, then replace
// it only while it still has the version that was read: the compare-and-swap
// the write-ahead log commits its manifest with.
func Example() {
	ctx := context.Background()
	s, err := casstore.Open(ctx, "mem://example")
	if err != nil {
		panic(err)
	}
	defer s.Close()

	v1, err := s.Put(ctx, "manifest", []byte("epoch 1"), casstore.IfAbsent())
	fmt.Println("create:", err)

	_, err = s.Put(ctx, "manifest", []byte("epoch 1 again"), casstore.IfAbsent())
	fmt.Println("create again:", errors.Is(err, casstore.ErrAlreadyExists))

	v2, err := s.Put(ctx, "manifest", []byte("epoch 2"), casstore.IfMatch(v1))
	fmt.Println("replace v1:", err)

	_, err = s.Put(ctx, "manifest", []byte("stale writer"), casstore.IfMatch(v1))
	fmt.Println("replace v1 again:", errors.Is(err, casstore.ErrPreconditionFailed))

	data, info, _ := s.Get(ctx, "manifest")
	fmt.Printf("now: %q, version is v2: %v\n", data, info.Version == v2)
	// Output:
	// create: <nil>
	// create again: true
	// replace v1: <nil>
	// replace v1 again: true
	// now: "epoch 2", version is v2: true
}

// A read-modify-write loop: retry from a fresh read whenever another writer
// got in first.
func ExampleIfMatch() {
	ctx := context.Background()
	s, _ := casstore.Open(ctx, "mem://example-ifmatch")
	defer s.Close()
	_, _ = s.Put(ctx, "counter", []byte("41"), casstore.None())

	for {
		b, info, err := s.Get(ctx, "counter")
		if err != nil {
			panic(err)
		}
		var n int
		fmt.Sscan(string(b), &n)
		_, err = s.Put(ctx, "counter", fmt.Appendf(nil, "%d", n+1), casstore.IfMatch(info.Version))
		if errors.Is(err, casstore.ErrPreconditionFailed) || errors.Is(err, casstore.ErrConflict) {
			continue // someone else won this round; read again
		}
		if err != nil {
			panic(err)
		}
		break
	}
	b, _, _ := s.Get(ctx, "counter")
	fmt.Println(string(b))
	// Output: 42
}

// A path in the URL becomes a key prefix, so several logs can share a
// bucket; List returns keys without it.
func ExampleWithPrefix() {
	ctx := context.Background()
	app, _ := casstore.Open(ctx, "mem://example-prefix/logs/app")
	defer app.Close()
	_, _ = app.Put(ctx, "seg/2", []byte("b"), casstore.None())
	_, _ = app.Put(ctx, "seg/1", []byte("a"), casstore.None())

	for info, err := range app.List(ctx, "seg/") {
		if err != nil {
			panic(err)
		}
		fmt.Println(info.Key, info.Size)
	}

	bucket, _ := casstore.Open(ctx, "mem://example-prefix")
	defer bucket.Close()
	_, err := bucket.Stat(ctx, "logs/app/seg/1")
	fmt.Println("stored at logs/app/seg/1:", err == nil)
	// Output:
	// seg/1 1
	// seg/2 1
	// stored at logs/app/seg/1: true
}
