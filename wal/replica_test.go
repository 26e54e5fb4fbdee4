package wal_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/casstore/faultstore"
	"github.com/objwal/objwal/format"
	"github.com/objwal/objwal/wal"
)

// produce writes n single-record groups in segments of about segBytes and
// returns the store.
func produce(t *testing.T, ctx context.Context, n, segBytes int) *casstore.Memory {
	t.Helper()
	mem := casstore.NewMemory()
	cfg := fastConfig()
	cfg.SegmentMaxBytes = segBytes
	p, err := wal.NewProducer(ctx, mem, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var last *wal.Durability
	for i := range n {
		meta := []byte(fmt.Sprintf("m%d", i/3)) // runs of three groups share a meta
		if last, err = p.Append(ctx, [][]byte{rec(i)}, meta); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := last.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return mem
}

// TestReplicaRestartsWithFailingApplier: a replica is killed at random
// points (its context cancelled mid-apply) and its applier fails at random;
// each restart resumes from the saved cursor. No record may be skipped or
// reordered; re-delivery is allowed (at least once).
func TestReplicaRestartsWithFailingApplier(t *testing.T) {
	seed := seedFor(t)
	ctx := testCtx(t, 60*time.Second)
	const n = 400
	mem := produce(t, ctx, n, 200)
	r := rand.New(rand.NewPCG(seed, 3))
	file := wal.NewFileCursorStore(filepath.Join(t.TempDir(), "cursor"))
	var maxSeen int64 = -1
	delivered := 0
	restarts := 0
	for maxSeen < n-1 {
		restarts++
		if restarts > 2000 {
			t.Fatalf("no progress: max applied %d", maxSeen)
		}
		pctx, kill := context.WithCancel(ctx)
		killAfter := r.IntN(60)
		calls := 0
		app := wal.ApplyFunc(func(_ context.Context, rc wal.Record) error {
			calls++
			if calls == killAfter {
				kill() // the process dies here
			}
			if r.IntN(25) == 0 {
				return errors.New("applier hiccup")
			}
			s := int64(rc.Sequence)
			if s > maxSeen+1 {
				t.Fatalf("skipped: applied %d after %d", s, maxSeen)
			}
			if !bytes.Equal(rc.Data, rec(int(s))) || string(rc.GroupMeta) != fmt.Sprintf("m%d", s/3) {
				t.Fatalf("record %d: data %q meta %q", s, rc.Data, rc.GroupMeta)
			}
			maxSeen = max(maxSeen, s)
			delivered++
			return nil
		})
		// A killed process saves no cursor after its death.
		cursor := &crashCursor{CursorStore: file, dead: pctx}
		rep := wal.NewReplica(mem, app, wal.ReplicaConfig{Cursor: cursor, Prefetch: 1 + r.IntN(8), Logger: quiet()})
		for pctx.Err() == nil {
			got, err := rep.Poll(pctx)
			if err != nil {
				if pctx.Err() == nil && !errors.Is(err, wal.ErrApply) {
					t.Fatalf("poll: %v", err)
				}
				break
			}
			if got == 0 {
				break
			}
		}
		kill()
	}
	t.Logf("%d restarts, %d deliveries for %d records", restarts, delivered, n)
	// A last replica from the final cursor has nothing left to apply.
	final := wal.NewReplica(mem, wal.ApplyFunc(func(context.Context, wal.Record) error { return nil }), wal.ReplicaConfig{Cursor: file, Logger: quiet()})
	if got, err := final.Poll(ctx); err != nil || final.Next() != n {
		t.Fatalf("final poll applied %d (%v), cursor %d", got, err, final.Next())
	}
}

// crashCursor drops saves once its process is dead.
type crashCursor struct {
	wal.CursorStore
	dead context.Context
}

func (c *crashCursor) Save(ctx context.Context, next uint64) error {
	if c.dead.Err() != nil {
		return errors.New("process is dead")
	}
	return c.CursorStore.Save(ctx, next)
}

func TestApplierErrorStopsAtRecord(t *testing.T) {
	ctx := testCtx(t, 20*time.Second)
	mem := produce(t, ctx, 10, 1<<20)
	fail := true
	var seen []uint64
	app := wal.ApplyFunc(func(_ context.Context, r wal.Record) error {
		if r.Sequence == 4 && fail {
			fail = false
			return errors.New("boom")
		}
		seen = append(seen, r.Sequence)
		return nil
	})
	cur := wal.NewMemoryCursorStore()
	rep := wal.NewReplica(mem, app, wal.ReplicaConfig{Cursor: cur, Logger: quiet()})
	if _, err := rep.Poll(ctx); !errors.Is(err, wal.ErrApply) {
		t.Fatalf("poll: %v", err)
	}
	if next, ok, _ := cur.Load(ctx); !ok || next != 4 {
		t.Fatalf("cursor saved at %d, want 4", next)
	}
	if err := rep.Run(cancelWhen(ctx, func() bool { return rep.Next() == 10 })); err != nil {
		t.Fatal(err)
	}
	for i, s := range seen {
		if s != uint64(i) {
			t.Fatalf("applied %v", seen)
		}
	}
}

// cancelWhen returns a context cancelled once cond holds (polled).
func cancelWhen(ctx context.Context, cond func() bool) context.Context {
	c, cancel := context.WithCancel(ctx)
	go func() {
		defer cancel()
		for !cond() {
			select {
			case <-c.Done():
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return c
}

// TestReplicaRunTailsLiveProducer: Run follows a producer as it writes, then
// returns nil when its context ends.
func TestReplicaRunTailsLiveProducer(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	mem := casstore.NewMemory()
	p, err := wal.NewProducer(ctx, mem, fastConfig())
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{}
	rep := wal.NewReplica(mem, c, wal.ReplicaConfig{PollInterval: time.Millisecond, Logger: quiet()})
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- rep.Run(rctx) }()
	for i := range 100 {
		if _, err := p.Append(ctx, [][]byte{rec(i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	p.Close(ctx)
	for rep.Next() < 100 {
		time.Sleep(time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	for i, r := range c.records() {
		if r.Sequence != uint64(i) || !bytes.Equal(r.Data, rec(i)) {
			t.Fatalf("record %d wrong", i)
		}
	}
	if st := rep.Stats(); st.Applied != 100 || st.Lag != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestUnchangedManifestNotReloaded: a caught-up replica's polls cost one
// Stat each, not a download of the manifest.
func TestUnchangedManifestNotReloaded(t *testing.T) {
	ctx := testCtx(t, 20*time.Second)
	mem := produce(t, ctx, 20, 1<<20)
	fs := faultstore.New(mem, faultstore.Config{})
	rep := wal.NewReplica(fs, &collector{}, wal.ReplicaConfig{Logger: quiet()})
	if _, err := rep.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	before := fs.Stats()
	for range 10 {
		if n, err := rep.Poll(ctx); err != nil || n != 0 {
			t.Fatalf("idle poll: %d %v", n, err)
		}
	}
	d := fs.Stats().Sub(before)
	if d[faultstore.OpGet].Requests != 0 || d[faultstore.OpStat].Requests != 10 {
		t.Fatalf("10 idle polls cost %d gets and %d stats", d[faultstore.OpGet].Requests, d[faultstore.OpStat].Requests)
	}
}

// TestReplicaRidesOutTransientErrors: Run retries failing and corrupted
// reads and still applies everything in order.
func TestReplicaRidesOutTransientErrors(t *testing.T) {
	seed := seedFor(t)
	ctx := testCtx(t, 30*time.Second)
	mem := produce(t, ctx, 200, 300)
	fs := faultstore.New(mem, faultstore.Config{Seed: seed, Rules: []faultstore.Rule{
		{Ops: faultstore.Reads, FailRate: 0.2, LostReplyRate: 0.1, CorruptRate: 0.1},
	}})
	c := &collector{}
	rep := wal.NewReplica(fs, c, wal.ReplicaConfig{PollInterval: time.Millisecond, Logger: quiet()})
	if err := rep.Run(cancelWhen(ctx, func() bool { return rep.Next() >= 200 })); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatal("did not catch up")
	}
	for i, r := range c.records() {
		if r.Sequence != uint64(i) {
			t.Fatalf("record %d at sequence %d", i, r.Sequence)
		}
	}
}

// flipBit returns a copy of b with bit i flipped.
func flipBit(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i/8] ^= 1 << (i % 8)
	return c
}

// TestEverySegmentBitFlipDetected: two segments; every single-bit flip of
// the second is detected. The replica applies the first segment's records,
// none of the second's, and stops with ErrCorrupt naming the key.
func TestEverySegmentBitFlipDetected(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	mem := produce(t, ctx, 6, 60) // a few records per segment
	b, _, _ := mem.Get(ctx, "wal/manifest")
	m, err := format.ParseManifest(b)
	if err != nil || m.Len() < 2 {
		t.Fatalf("want >= 2 segments, have %d (%v)", m.Len(), err)
	}
	first, victim := m.Entry(0), m.Entry(1)
	orig, _, err := mem.Get(ctx, victim.Location)
	if err != nil {
		t.Fatal(err)
	}
	for bit := range len(orig) * 8 {
		if _, err := mem.Put(ctx, victim.Location, flipBit(orig, bit), casstore.None()); err != nil {
			t.Fatal(err)
		}
		c := &collector{}
		rep := wal.NewReplica(mem, c, wal.ReplicaConfig{Logger: quiet()})
		_, err := rep.Poll(ctx)
		if !errors.Is(err, wal.ErrCorrupt) || !bytes.Contains([]byte(err.Error()), []byte(victim.Location)) {
			t.Fatalf("bit %d: %v, want ErrCorrupt naming %s", bit, err, victim.Location)
		}
		got := c.records()
		if len(got) != int(first.Count) || rep.Next() != victim.Sequence {
			t.Fatalf("bit %d: applied %d records, cursor %d", bit, len(got), rep.Next())
		}
		if err := rep.Run(ctx); !errors.Is(err, wal.ErrCorrupt) {
			t.Fatalf("bit %d: Run went on past corruption: %v", bit, err)
		}
	}
	t.Logf("%d single-bit flips of a %d-byte segment detected", len(orig)*8, len(orig))
}

// TestEveryManifestBitFlipDetected: every single-bit flip of the manifest
// stops a replica with ErrCorrupt before it applies anything, and stops a
// producer's claim.
func TestEveryManifestBitFlipDetected(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	mem := produce(t, ctx, 6, 60)
	orig, _, _ := mem.Get(ctx, "wal/manifest")
	for bit := range len(orig) * 8 {
		if _, err := mem.Put(ctx, "wal/manifest", flipBit(orig, bit), casstore.None()); err != nil {
			t.Fatal(err)
		}
		c := &collector{}
		rep := wal.NewReplica(mem, c, wal.ReplicaConfig{Logger: quiet()})
		if _, err := rep.Poll(ctx); !errors.Is(err, wal.ErrCorrupt) || len(c.records()) != 0 {
			t.Fatalf("bit %d: %v after %d records, want ErrCorrupt and none", bit, err, len(c.records()))
		}
		if bit%7 == 0 { // a producer refuses to claim it too (sampled: claims are slower)
			if _, err := wal.NewProducer(ctx, mem, fastConfig()); !errors.Is(err, wal.ErrCorrupt) {
				t.Fatalf("bit %d: claim: %v", bit, err)
			}
		}
	}
	t.Logf("%d single-bit flips of a %d-byte manifest detected", len(orig)*8, len(orig))
}

// legacyStore lays out the v1 vector manifest (epoch 3, entries 5 and 6,
// next 7) with v1 segments at its locations.
func legacyStore(t *testing.T, ctx context.Context) *casstore.Memory {
	t.Helper()
	mem := casstore.NewMemory()
	b, err := os.ReadFile("../../shared/vectors/manifest_v1_2entries.bin")
	if err != nil {
		t.Logf("vector not found (%v); building the same manifest", err)
		b = buildV1Manifest(t)
	}
	m, err := format.ParseManifest(b)
	if err != nil || m.Version() != format.ManifestV1 {
		t.Fatalf("v1 manifest: %v", err)
	}
	mustPut(t, ctx, mem, "wal/manifest", b)
	for i, recs := range [][][]byte{{[]byte("a0"), []byte("a1"), []byte("a2")}, {[]byte("b0")}} {
		seg, err := format.EncodeSegment(recs, format.CompressionNone, format.SegmentV1)
		if err != nil {
			t.Fatal(err)
		}
		mustPut(t, ctx, mem, m.Entry(i).Location, seg)
	}
	return mem
}

func buildV1Manifest(t *testing.T) []byte {
	// The same content as the vector, built with the format package: a
	// v1 manifest cannot be appended to directly, so encode v1 entries by
	// parsing an upgraded copy is not possible; write the bytes by hand.
	var out []byte
	le := func(v uint64, n int) {
		for i := range n {
			out = append(out, byte(v>>(8*i)))
		}
	}
	entry := func(seq uint64, loc string, md [][2]any) {
		body := 14 + len(loc)
		for _, x := range md {
			body += 16 + len(x[1].(string))
		}
		le(uint64(body), 4)
		le(seq, 8)
		le(uint64(len(loc)), 2)
		out = append(out, loc...)
		le(uint64(len(md)), 4)
		for _, x := range md {
			le(uint64(x[0].(int)), 4)
			le(1712345678000, 8)
			le(uint64(len(x[1].(string))), 4)
			out = append(out, x[1].(string)...)
		}
	}
	entry(5, "ingest/01J5T4R3KXBMZ7QV9N2WG8YDHP.batch", [][2]any{{0, "my-metadata"}, {2, ""}})
	entry(6, "ingest/01J5T4R7NP39QWXYZ5678ABCDE.batch", nil)
	le(2, 4)
	le(7, 8)
	le(3, 8)
	le(1, 2)
	return out
}

func mustPut(t *testing.T, ctx context.Context, s casstore.Store, key string, b []byte) {
	t.Helper()
	if _, err := s.Put(ctx, key, b, casstore.None()); err != nil {
		t.Fatal(err)
	}
}

// TestLegacyV1ManifestTailing: a replica tails a buffer (v1) manifest as
// is; every record of a legacy entry carries the entry's sequence.
func TestLegacyV1ManifestTailing(t *testing.T) {
	ctx := testCtx(t, 20*time.Second)
	mem := legacyStore(t, ctx)
	got := tailAll(t, ctx, mem)
	want := []struct {
		seq      uint64
		data, md string
	}{{5, "a0", "my-metadata"}, {5, "a1", "my-metadata"}, {5, "a2", ""}, {6, "b0", ""}}
	if len(got) != len(want) {
		t.Fatalf("got %d records", len(got))
	}
	for i, w := range want {
		if got[i].Sequence != w.seq || string(got[i].Data) != w.data || string(got[i].GroupMeta) != w.md {
			t.Fatalf("record %d: %+v, want %+v", i, got[i], w)
		}
	}
	if b, _, _ := mem.Get(ctx, "wal/manifest"); b[len(b)-2] != 1 {
		t.Fatal("a replica rewrote the manifest")
	}
}

// TestProducerRefusesV1WithoutOptIn: claiming a v1 manifest needs
// AllowManifestUpgrade; with it, the log continues at next_sequence.
func TestProducerRefusesV1WithoutOptIn(t *testing.T) {
	ctx := testCtx(t, 20*time.Second)
	mem := legacyStore(t, ctx)
	if _, err := wal.NewProducer(ctx, mem, fastConfig()); !errors.Is(err, wal.ErrLegacyManifest) {
		t.Fatalf("claim without opt-in: %v", err)
	}
	if b, _, _ := mem.Get(ctx, "wal/manifest"); b[len(b)-2] != 1 {
		t.Fatal("a refused claim changed the manifest")
	}
	cfg := fastConfig()
	cfg.AllowManifestUpgrade = true
	p, err := wal.NewProducer(ctx, mem, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p.Epoch() != 4 {
		t.Fatalf("epoch %d, want 4", p.Epoch())
	}
	d, _ := p.Append(ctx, [][]byte{[]byte("c0"), []byte("c1"), []byte("c2")}, nil)
	if seq, err := d.Wait(ctx); err != nil || seq != 7 {
		t.Fatalf("first upgraded append at %d (%v), want 7", seq, err)
	}
	p.Close(ctx)
	got := tailAll(t, ctx, mem)
	if len(got) != 7 || got[6].Sequence != 9 || string(got[6].Data) != "c2" {
		t.Fatalf("after upgrade: %d records", len(got))
	}
}

func TestCursorStores(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "c")
	for _, cs := range []wal.CursorStore{wal.NewMemoryCursorStore(), wal.NewFileCursorStore(path)} {
		if _, ok, err := cs.Load(ctx); ok || err != nil {
			t.Fatalf("fresh store: %v %v", ok, err)
		}
		for _, v := range []uint64{1, 1 << 40, 7} {
			if err := cs.Save(ctx, v); err != nil {
				t.Fatal(err)
			}
			if got, ok, err := cs.Load(ctx); !ok || err != nil || got != v {
				t.Fatalf("load %d %v %v, want %d", got, ok, err, v)
			}
		}
	}
	if got, ok, _ := wal.NewFileCursorStore(path).Load(ctx); !ok || got != 7 {
		t.Fatal("file cursor did not persist")
	}
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, flipBit(b, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := wal.NewFileCursorStore(path).Load(ctx); !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("damaged cursor: %v", err)
	}
}

func TestTypedApplier(t *testing.T) {
	type op struct{ k, v string }
	var got []op
	app := wal.TypedApplier(func(b []byte) (op, error) {
		k, v, ok := bytes.Cut(b, []byte("="))
		if !ok {
			return op{}, errors.New("no =")
		}
		return op{string(k), string(v)}, nil
	}, func(_ context.Context, seq uint64, o op) error {
		got = append(got, o)
		return nil
	})
	if err := app.Apply(context.Background(), wal.Record{Data: []byte("a=1")}); err != nil || got[0] != (op{"a", "1"}) {
		t.Fatalf("%v %v", err, got)
	}
	if err := app.Apply(context.Background(), wal.Record{Sequence: 9, Data: []byte("bad")}); err == nil {
		t.Fatal("decode error not returned")
	}
}

// TestStartAtAndTruncatedLog: StartAt skips a prefix the application
// restored from a snapshot; a cursor behind a truncated manifest is
// ErrLogTruncated, while a fresh replica starts where the log starts.
func TestStartAtAndTruncatedLog(t *testing.T) {
	ctx := testCtx(t, 20*time.Second)
	mem := produce(t, ctx, 12, 60)
	c := &collector{}
	rep := wal.NewReplica(mem, c, wal.ReplicaConfig{StartAt: 5, Logger: quiet()})
	if _, err := rep.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.records(); len(got) != 7 || got[0].Sequence != 5 {
		t.Fatalf("StartAt 5: %d records from %d", len(got), got[0].Sequence)
	}

	b, info, _ := mem.Get(ctx, "wal/manifest")
	m, err := format.ParseManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	if m.TruncateThrough(4) == 0 {
		t.Fatal("nothing truncated")
	}
	first := m.Entry(0).Sequence
	if _, err := mem.Put(ctx, "wal/manifest", m.Encode(), casstore.IfMatch(info.Version)); err != nil {
		t.Fatal(err)
	}
	cur := wal.NewMemoryCursorStore()
	cur.Save(ctx, 1)
	if _, err := wal.NewReplica(mem, &collector{}, wal.ReplicaConfig{Cursor: cur, Logger: quiet()}).Poll(ctx); !errors.Is(err, wal.ErrLogTruncated) {
		t.Fatalf("cursor behind the log: %v", err)
	}
	got := tailAll(t, ctx, mem)
	if len(got) == 0 || got[0].Sequence != first || got[len(got)-1].Sequence != 11 {
		t.Fatalf("fresh replica on a truncated log: %d records", len(got))
	}
}

// TestReplicaBeforeProducer: a replica may start before the log exists.
func TestReplicaBeforeProducer(t *testing.T) {
	ctx := testCtx(t, 20*time.Second)
	mem := casstore.NewMemory()
	c := &collector{}
	rep := wal.NewReplica(mem, c, wal.ReplicaConfig{Logger: quiet()})
	for range 2 {
		if n, err := rep.Poll(ctx); n != 0 || err != nil {
			t.Fatalf("poll of a missing log: %d %v", n, err)
		}
	}
	p, err := wal.NewProducer(ctx, mem, fastConfig())
	if err != nil {
		t.Fatal(err)
	}
	d, _ := p.Append(ctx, [][]byte{rec(0)}, nil)
	d.Wait(ctx)
	p.Close(ctx)
	if n, err := rep.Poll(ctx); n != 1 || err != nil {
		t.Fatalf("poll after the first commit: %d %v", n, err)
	}
}
