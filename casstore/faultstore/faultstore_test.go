package faultstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/casstore/faultstore"
)

func TestPassThroughAndStats(t *testing.T) {
	ctx := context.Background()
	s := faultstore.New(casstore.NewMemory(), faultstore.Config{})
	if _, err := s.Put(ctx, "a", []byte("hello"), casstore.IfAbsent()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "a", []byte("x"), casstore.IfAbsent()); !errors.Is(err, casstore.ErrAlreadyExists) {
		t.Fatalf("second create: %v, want ErrAlreadyExists", err)
	}
	b, _, err := s.Get(ctx, "a")
	if err != nil || string(b) != "hello" {
		t.Fatalf("get: %q %v", b, err)
	}
	if _, _, err := s.Get(ctx, "missing"); !errors.Is(err, casstore.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	r, err := s.GetRange(ctx, "a", 1, 2)
	if err != nil || string(r) != "el" {
		t.Fatalf("range: %q %v", r, err)
	}
	n := 0
	for _, err := range s.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("list saw %d keys", n)
	}
	st := s.Stats()
	if st[faultstore.OpPut].Requests != 2 || st[faultstore.OpPut].Errors != 1 || st[faultstore.OpPut].BytesWritten != 5 {
		t.Fatalf("put stats %+v", st[faultstore.OpPut])
	}
	if st[faultstore.OpGet].Requests != 2 || st[faultstore.OpGet].BytesRead != 5 {
		t.Fatalf("get stats %+v", st[faultstore.OpGet])
	}
	if st.Total().Requests != 6 {
		t.Fatalf("total %+v", st.Total())
	}
	if st.String() == "" {
		t.Fatal("empty rendering")
	}
	s.ResetStats()
	if s.Stats().Total().Requests != 0 {
		t.Fatal("reset did not clear")
	}
}

func TestCleanFailureDoesNotWrite(t *testing.T) {
	ctx := context.Background()
	s := faultstore.New(casstore.NewMemory(), faultstore.Config{
		Rules: []faultstore.Rule{{Ops: faultstore.OpsOf(faultstore.OpPut), FailRate: 1}},
	})
	_, err := s.Put(ctx, "k", []byte("v"), casstore.None())
	if !errors.Is(err, faultstore.ErrInjected) {
		t.Fatalf("got %v", err)
	}
	var oe *casstore.OpError
	if !errors.As(err, &oe) || oe.Key != "k" || oe.Op != "put" {
		t.Fatalf("error does not name op and key: %v", err)
	}
	if _, err := s.Inner().Stat(ctx, "k"); !errors.Is(err, casstore.ErrNotFound) {
		t.Fatalf("clean failure wrote: %v", err)
	}
}

func TestLostReplyWrites(t *testing.T) {
	ctx := context.Background()
	s := faultstore.New(casstore.NewMemory(), faultstore.Config{
		Rules: []faultstore.Rule{{Ops: faultstore.Writes, Key: "k", LostReplyRate: 1}},
	})
	if _, err := s.Put(ctx, "k", []byte("v"), casstore.None()); !errors.Is(err, faultstore.ErrLostReply) {
		t.Fatalf("got %v", err)
	}
	if b, _, err := s.Inner().Get(ctx, "k"); err != nil || string(b) != "v" {
		t.Fatalf("lost reply did not land: %q %v", b, err)
	}
	// The rule's key pattern leaves other keys alone.
	if _, err := s.Put(ctx, "other", []byte("v"), casstore.None()); err != nil {
		t.Fatalf("unmatched key failed: %v", err)
	}
}

func TestConflictErr(t *testing.T) {
	s := faultstore.New(casstore.NewMemory(), faultstore.Config{
		Rules: []faultstore.Rule{{FailRate: 1, FailErr: casstore.ErrConflict}},
	})
	if _, err := s.Put(context.Background(), "k", nil, casstore.IfAbsent()); !errors.Is(err, casstore.ErrConflict) {
		t.Fatalf("got %v", err)
	}
}

func TestCorruptReadFlipsOneBit(t *testing.T) {
	ctx := context.Background()
	inner := casstore.NewMemory()
	data := bytes.Repeat([]byte{0x5a}, 64)
	if _, err := inner.Put(ctx, "k", data, casstore.None()); err != nil {
		t.Fatal(err)
	}
	s := faultstore.New(inner, faultstore.Config{Seed: 7, Rules: []faultstore.Rule{{Ops: faultstore.Reads, CorruptRate: 1}}})
	b, _, err := s.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	diff := 0
	for i := range b {
		for x := b[i] ^ data[i]; x != 0; x &= x - 1 {
			diff++
		}
	}
	if diff != 1 {
		t.Fatalf("%d bits differ, want 1", diff)
	}
	if st, _, _ := inner.Get(ctx, "k"); !bytes.Equal(st, data) {
		t.Fatal("stored object changed")
	}
}

func TestKeyWriteIntervalRejects(t *testing.T) {
	ctx := context.Background()
	s := faultstore.New(casstore.NewMemory(), faultstore.Config{KeyWriteInterval: time.Hour, KeyWriteKey: "hot"})
	if _, err := s.Put(ctx, "hot", nil, casstore.None()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "hot", nil, casstore.None()); !errors.Is(err, faultstore.ErrThrottled) {
		t.Fatalf("second write within the interval: %v", err)
	}
	if _, err := s.Put(ctx, "cold", nil, casstore.None()); err != nil {
		t.Fatalf("other key: %v", err)
	}
	if _, err := s.Put(ctx, "cold", nil, casstore.None()); err != nil {
		t.Fatalf("unmatched key throttled: %v", err)
	}
	if got := s.Stats()[faultstore.OpPut].Throttled; got != 1 {
		t.Fatalf("throttled=%d", got)
	}
}

func TestKeyWriteIntervalDelayHonoursContext(t *testing.T) {
	s := faultstore.New(casstore.NewMemory(), faultstore.Config{KeyWriteInterval: time.Hour, KeyWriteDelay: true})
	if _, err := s.Put(context.Background(), "k", nil, casstore.None()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Put(ctx, "k", []byte("2"), casstore.None()); !errors.Is(err, context.Canceled) {
		t.Fatalf("delayed write with a dead context: %v", err)
	}
}

func TestLatencyHonoursContext(t *testing.T) {
	s := faultstore.New(casstore.NewMemory(), faultstore.Config{Rules: []faultstore.Rule{{Latency: time.Hour}}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := s.Stat(ctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
}

// decisions records which of n Puts to each of a few keys fail.
func decisions(seed uint64, n int) string {
	s := faultstore.New(casstore.NewMemory(), faultstore.Config{Seed: seed,
		Rules: []faultstore.Rule{{FailRate: 0.5}}})
	var out []byte
	for i := range n {
		for _, k := range []string{"a", "b"} {
			_, err := s.Put(context.Background(), k, []byte(fmt.Sprint(i)), casstore.None())
			if err != nil {
				out = append(out, '1')
			} else {
				out = append(out, '0')
			}
		}
	}
	return string(out)
}

func TestSeedReproducible(t *testing.T) {
	a, b, c := decisions(1, 64), decisions(1, 64), decisions(2, 64)
	if a != b {
		t.Fatalf("same seed, different faults:\n%s\n%s", a, b)
	}
	if a == c {
		t.Fatalf("different seeds, same faults: %s", a)
	}
}

func TestSetRulesStopsFaults(t *testing.T) {
	s := faultstore.New(casstore.NewMemory(), faultstore.Config{Rules: []faultstore.Rule{{FailRate: 1}}})
	if _, err := s.Stat(context.Background(), "k"); !errors.Is(err, faultstore.ErrInjected) {
		t.Fatalf("got %v", err)
	}
	s.SetRules(nil)
	if _, err := s.Stat(context.Background(), "k"); !errors.Is(err, casstore.ErrNotFound) {
		t.Fatalf("after SetRules(nil): %v", err)
	}
}

func TestSlowReplyLandsThenTimesOut(t *testing.T) {
	s := faultstore.New(casstore.NewMemory(), faultstore.Config{
		Rules: []faultstore.Rule{{Ops: faultstore.Writes, SlowReplyRate: 1, SlowReply: time.Hour}},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := s.Put(ctx, "k", []byte("v"), casstore.None()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	if _, err := s.Inner().Stat(context.Background(), "k"); err != nil {
		t.Fatalf("the slow write did not land: %v", err)
	}
}
