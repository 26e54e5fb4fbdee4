package wal_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/casstore/faultstore"
	"github.com/objwal/objwal/format"
	"github.com/objwal/objwal/wal"
)

func TestProduceThenTail(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	store := casstore.NewMemory()
	p, err := wal.NewProducer(ctx, store, fastConfig())
	if err != nil {
		t.Fatal(err)
	}
	if p.Epoch() != 1 {
		t.Fatalf("first claim epoch %d, want 1", p.Epoch())
	}
	var ds []*wal.Durability
	var metas [][]byte
	for i := 0; i < 50; i++ {
		meta := []byte(nil)
		if i%3 == 0 {
			meta = []byte{byte(i)}
		}
		d, err := p.Append(ctx, [][]byte{rec(2 * i), rec(2*i + 1)}, meta)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
		metas = append(metas, meta)
	}
	for i, d := range ds {
		seq, err := d.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if seq != uint64(2*i) {
			t.Fatalf("group %d at %d, want %d", i, seq, 2*i)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got := tailAll(t, ctx, store)
	if len(got) != 100 {
		t.Fatalf("replica saw %d records, want 100", len(got))
	}
	for i, r := range got {
		if r.Sequence != uint64(i) || !bytes.Equal(r.Data, rec(i)) {
			t.Fatalf("record %d: seq %d data %q", i, r.Sequence, r.Data)
		}
		if want := metas[i/2]; !bytes.Equal(r.GroupMeta, want) {
			t.Fatalf("record %d meta %v, want %v", i, r.GroupMeta, want)
		}
	}
}

func TestEmptyGroupAndClosedErrors(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	store := casstore.NewMemory()
	p, err := wal.NewProducer(ctx, store, fastConfig())
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := p.Append(ctx, [][]byte{rec(0)}, nil)
	d2, err := p.Append(ctx, nil, []byte("empty"))
	if err != nil {
		t.Fatal(err)
	}
	d3, _ := p.Append(ctx, [][]byte{rec(1)}, nil)
	for i, d := range []*wal.Durability{d1, d2, d3} {
		seq, err := d.Wait(ctx)
		if err != nil || seq != uint64(min(i, 1)) {
			t.Fatalf("group %d: seq %d err %v", i, seq, err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := p.Append(ctx, [][]byte{rec(2)}, nil); !errors.Is(err, wal.ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if got := tailAll(t, ctx, store); len(got) != 2 {
		t.Fatalf("replica saw %d records", len(got))
	}
}

func TestTooLarge(t *testing.T) {
	ctx := testCtx(t, 10*time.Second)
	cfg := fastConfig()
	cfg.SegmentMaxBytes = 1024
	p, err := wal.NewProducer(ctx, casstore.NewMemory(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if _, err := p.Append(ctx, [][]byte{make([]byte, 2000)}, nil); !errors.Is(err, wal.ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	if _, err := p.Append(ctx, [][]byte{make([]byte, 510), make([]byte, 510)}, nil); !errors.Is(err, wal.ErrTooLarge) {
		t.Fatalf("group over the segment limit: %v", err)
	}
	d, err := p.Append(ctx, [][]byte{make([]byte, 900)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestGroupCommit: many concurrent appenders against a store with a slow
// manifest CAS share few commits.
func TestGroupCommit(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	fs := faultstore.New(casstore.NewMemory(), faultstore.Config{
		Rules: []faultstore.Rule{{Ops: faultstore.Writes, Latency: 10 * time.Millisecond}},
	})
	p, err := wal.NewProducer(ctx, fs, fastConfig())
	if err != nil {
		t.Fatal(err)
	}
	const appenders, each = 32, 20
	var wg sync.WaitGroup
	errs := make(chan error, appenders)
	for a := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				d, err := p.Append(ctx, [][]byte{rec(a*each + i)}, nil)
				if err == nil {
					_, err = d.Wait(ctx)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	t.Logf("%d appends, %d commits, %d segments", appenders*each, st.Commits, st.Segments)
	if st.Records != appenders*each {
		t.Fatalf("committed %d records", st.Records)
	}
	// Serial appends would need one commit each; group commit shares them.
	if st.Commits > appenders*each/4 {
		t.Fatalf("%d commits for %d appends: not grouped", st.Commits, appenders*each)
	}
	if got := tailAll(t, ctx, fs.Inner()); len(got) != appenders*each {
		t.Fatalf("replica saw %d", len(got))
	}
}

func TestCompressionAndLegacySegments(t *testing.T) {
	for _, tc := range []struct {
		name   string
		legacy bool
		comp   format.Compression
	}{{"v2-zstd", false, format.CompressionZstd}, {"v1-none", true, format.CompressionNone}, {"v1-zstd", true, format.CompressionZstd}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t, 20*time.Second)
			store := casstore.NewMemory()
			cfg := fastConfig()
			cfg.Compression, cfg.LegacySegmentFormat = tc.comp, tc.legacy
			p, err := wal.NewProducer(ctx, store, cfg)
			if err != nil {
				t.Fatal(err)
			}
			d, _ := p.Append(ctx, [][]byte{rec(0), rec(1), bytes.Repeat([]byte("z"), 1000)}, nil)
			if _, err := d.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			if err := p.Close(ctx); err != nil {
				t.Fatal(err)
			}
			got := tailAll(t, ctx, store)
			if len(got) != 3 || len(got[2].Data) != 1000 {
				t.Fatalf("replica saw %d records", len(got))
			}
			for k, err := range store.List(ctx, "wal/seg/") {
				if err != nil {
					t.Fatal(err)
				}
				b, _, _ := store.Get(ctx, k.Key)
				seg, err := format.DecodeSegment(b)
				if err != nil {
					t.Fatal(err)
				}
				wantV := format.SegmentV2
				if tc.legacy {
					wantV = format.SegmentV1
				}
				if seg.Version != wantV || seg.Compression != tc.comp {
					t.Fatalf("segment %s is v%d/%v", k.Key, seg.Version, seg.Compression)
				}
			}
		})
	}
}

func TestSegmentKeysAndManifestFormat(t *testing.T) {
	ctx := testCtx(t, 10*time.Second)
	store := casstore.NewMemory()
	p, err := wal.NewProducer(ctx, store, fastConfig())
	if err != nil {
		t.Fatal(err)
	}
	d, _ := p.Append(ctx, [][]byte{rec(0)}, nil)
	if _, err := d.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	p.Close(ctx)
	b, _, err := store.Get(ctx, "wal/manifest")
	if err != nil {
		t.Fatal(err)
	}
	m, err := format.ParseManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	if m.Version() != format.ManifestV4 || m.Len() != 1 || m.Epoch() != 1 {
		t.Fatalf("manifest v%d with %d entries at epoch %d", m.Version(), m.Len(), m.Epoch())
	}
	want := "wal/seg/" + p.RunID() + "/0000000000000000"
	if loc := m.Entry(0).Location; loc != want {
		t.Fatalf("segment key %q, want %q", loc, want)
	}
}

var _ = context.Background

// TestCommitIsOneCAS: in the healthy path a commit is exactly one manifest
// PUT with IfMatch; the producer never re-reads the manifest it wrote.
func TestCommitIsOneCAS(t *testing.T) {
	ctx := testCtx(t, 20*time.Second)
	fs := faultstore.New(casstore.NewMemory(), faultstore.Config{})
	p, err := wal.NewProducer(ctx, fs, fastConfig())
	if err != nil {
		t.Fatal(err)
	}
	afterClaim := fs.Stats()
	for i := range 10 {
		d, _ := p.Append(ctx, [][]byte{rec(i)}, nil)
		if _, err := d.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	p.Close(ctx)
	d := fs.Stats().Sub(afterClaim)
	st := p.Stats()
	if st.Commits != 10 || st.Segments != 10 {
		t.Fatalf("%d commits of %d segments", st.Commits, st.Segments)
	}
	// 10 segment PUTs + 10 manifest CASes, and no reads at all.
	if d[faultstore.OpPut].Requests != 20 || d[faultstore.OpGet].Requests+d[faultstore.OpStat].Requests+d[faultstore.OpGetRange].Requests != 0 {
		t.Fatalf("10 commits cost %d puts and %d gets", d[faultstore.OpPut].Requests, d[faultstore.OpGet].Requests)
	}
}
