package format

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"
)

// The allocation property of the fuzz targets: decoding allocates at most a
// small multiple of its input, whatever the counts inside claim.
//
//   - Uncompressed segments: the record table is 24 bytes per record and a
//     record takes at least 4 bytes, so 6 × len(input); we allow 8 × len +
//     slack (error text, the Segment itself).
//   - Manifests: the copied region (plus 4 bytes per legacy entry), the
//     offset index (8 bytes per entry of at least 18 bytes) and the snapshot
//     location are together under 4 × len(input); we allow 8 × len + slack.
//   - zstd segments: the decoded block is bounded by MaxDecodedBlockSize and
//     by zstd's own worst case of 32 KiB output per input byte (a 4-byte RLE
//     block is 128 KiB). Output buffer growth plus the record table stay
//     under 12 × that bound; we add 1 MiB for the decoder's lazily sized
//     internal buffers.
//
// TotalAlloc is process-wide, so the fuzzing engine's own goroutines add
// noise: each measurement is the least of three decodes of the same input,
// and the slack is 16 KiB. A decoder that trusted a count would allocate
// megabytes or gigabytes here, far above the limit.
const (
	allocFactor    = 8
	allocSlack     = 16 << 10
	zstdRatio      = 32 << 10
	zstdFactor     = 12
	zstdAllocSlack = 1 << 20
)

func segmentAllocLimit(in []byte) uint64 {
	limit := uint64(allocFactor*len(in) + allocSlack)
	if isZstdSegment(in) {
		decoded := min(uint64(MaxDecodedBlockSize), uint64(zstdRatio)*uint64(len(in)))
		limit += zstdFactor*decoded + zstdAllocSlack
	}
	return limit
}

// leastAllocBytes is the least of three allocBytes(f) measurements.
func leastAllocBytes(f func()) uint64 {
	return min(allocBytes(f), allocBytes(f), allocBytes(f))
}

// isZstdSegment reports whether in's footer names zstd compression.
func isZstdSegment(in []byte) bool {
	n := len(in)
	if n < segFooterV1 {
		return false
	}
	switch binary.LittleEndian.Uint16(in[n-2:]) {
	case SegmentV1:
		return in[n-segFooterV1] == byte(CompressionZstd)
	case SegmentV2:
		return n >= segFooterV2 && in[n-segFooterV2] == byte(CompressionZstd)
	}
	return false
}

func seedFromVectors(f *testing.F, kind string) {
	for _, v := range vectorsOf(f, kind) {
		f.Add(v.data)
	}
}

// warmZstd lets every pooled zstd decoder size its internal buffers before
// allocations are measured.
func warmZstd(f *testing.F) {
	v := vectorNamed(f, "seg_v2_zstd.bin")
	for range 16 {
		if _, err := DecodeSegment(v.data); err != nil {
			f.Fatal(err)
		}
	}
}

func FuzzDecodeSegment(f *testing.F) {
	seedFromVectors(f, "segment")
	f.Add(rawSegment(nil, 1, 0, SegmentV2))
	f.Add(rawSegment(append(zstdFrameHeader(1<<17), rleBlock(0, 1<<17, true)...), 1, 1<<15, SegmentV1))
	f.Add(rawSegment(recordBlock("a", "", "bc"), 0, 3, SegmentV1))
	warmZstd(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		var seg *Segment
		var err error
		n := leastAllocBytes(func() { seg, err = DecodeSegment(in) })
		if limit := segmentAllocLimit(in); n > limit {
			t.Fatalf("decoding %d bytes allocated %d bytes (limit %d)", len(in), n, limit)
		}
		if err != nil {
			if ErrorClass(err) == "" || ErrorClass(err) == "invalid" {
				t.Fatalf("error without a class: %v", err)
			}
			if seg != nil {
				t.Fatal("segment returned with an error")
			}
			return
		}
		// Re-encoding gives the same content; uncompressed segments are
		// canonical under the strict reader, so the bytes match too.
		out, err := EncodeSegment(seg.Records, seg.Compression, seg.Version)
		if err != nil {
			t.Fatal(err)
		}
		if seg.Compression == CompressionNone && !bytes.Equal(out, in) {
			t.Fatalf("re-encode differs:\n in %x\nout %x", in, out)
		}
		again, err := DecodeSegment(out)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(seg.Records, again.Records, bytes.Equal) {
			t.Fatal("records differ after a round trip")
		}
	})
}

func FuzzParseManifest(f *testing.F) {
	seedFromVectors(f, "manifest")
	f.Add(rawManifest(3, withLen(entryBody(true, 3, 0, "x", Metadata{Payload: []byte("p")})), footer{count: 1, next: 4}))
	f.Fuzz(func(t *testing.T, in []byte) {
		var m *Manifest
		var err error
		n := leastAllocBytes(func() { m, err = ParseManifest(in) })
		if limit := uint64(allocFactor*len(in) + allocSlack); n > limit {
			t.Fatalf("parsing %d bytes allocated %d bytes (limit %d)", len(in), n, limit)
		}
		if err != nil {
			if ErrorClass(err) == "" || ErrorClass(err) == "invalid" {
				t.Fatalf("error without a class: %v", err)
			}
			return
		}
		out := m.Encode()
		if m.Version() == ManifestV4 && !bytes.Equal(out, in) {
			t.Fatalf("v4 re-encode differs:\n in %x\nout %x", in, out)
		}
		if m.Version() == ManifestV1 {
			if v1, err := EncodeManifestV1(m); err != nil || !bytes.Equal(v1, in) {
				t.Fatalf("v1 re-encode differs (%v):\n in %x\nout %x", err, in, v1)
			}
		}
		m2, err := ParseManifest(out)
		if err != nil {
			t.Fatalf("own encoding rejected: %v", err)
		}
		if m2.Epoch() != m.Epoch() || m2.NextSequence() != m.NextSequence() || m2.Snapshot() != m.Snapshot() || m2.Len() != m.Len() {
			t.Fatal("footer differs after a round trip")
		}
		i := 0
		for e := range m.Entries() {
			if e2 := m2.Entry(i); e2.Sequence != e.Sequence || e2.Count != e.Count || e2.Location != e.Location || len(e2.Metadata) != len(e.Metadata) {
				t.Fatalf("entry %d differs after a round trip", i)
			}
			// Navigation never panics, whatever the order of sequences.
			m.Locate(e.Sequence)
			for range m.EntriesFrom(e.End()) {
			}
			i++
		}
		_ = m.CheckSequences()
		m.TailLocations(3)
		c := m.Clone()
		c.TruncateThrough(m.NextSequence() / 2)
		if !bytes.Equal(m.Encode(), out) {
			t.Fatal("truncating a clone changed the original")
		}
	})
}

// FuzzSegmentRoundTrip encodes records cut from data at the given lengths
// and decodes them back.
func FuzzSegmentRoundTrip(f *testing.F) {
	f.Add([]byte("hello world"), []byte{5, 0, 6}, false, false)
	f.Add([]byte{}, []byte{}, true, true)
	f.Add(bytes.Repeat([]byte("abc"), 100), []byte{0, 0, 255, 3}, true, false)
	f.Fuzz(func(t *testing.T, data, cuts []byte, zstd, v1 bool) {
		var records [][]byte
		for _, c := range cuts {
			n := int(c) % (len(data) + 1)
			records = append(records, data[:n])
			data = data[n:]
		}
		if len(data) > 0 {
			records = append(records, data)
		}
		c, v := CompressionNone, SegmentV2
		if zstd {
			c = CompressionZstd
		}
		if v1 {
			v = SegmentV1
		}
		b, err := EncodeSegment(records, c, v)
		if err != nil {
			t.Fatal(err)
		}
		seg, err := DecodeSegment(b)
		if err != nil {
			t.Fatal(err)
		}
		if seg.Version != v || seg.Compression != c || !slices.EqualFunc(records, seg.Records, bytes.Equal) {
			t.Fatalf("round trip differs: %q -> %q", records, seg.Records)
		}
	})
}

// FuzzManifestOps drives Append, TruncateThrough, Clone and SetEpoch from
// the fuzzer's bytes and checks that Encode and ParseManifest agree with the
// in-memory state after every step.
func FuzzManifestOps(f *testing.F) {
	f.Add([]byte{1, 2, 3, 0x80, 4, 0x40})
	f.Add([]byte{0xff, 0x01, 0xc1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		// Every op re-encodes and re-parses the whole manifest, so a run is
		// quadratic in its ops; 256 reach every op kind many times over and
		// keep one run near a millisecond, so the fuzzer does not stall
		// minimizing long inputs.
		ops = ops[:min(len(ops), 256)]
		m := NewManifest()
		var want []Entry
		for i, op := range ops {
			switch op >> 6 {
			case 0, 1: // append
				count := uint32(op&7) + 1
				md := []Metadata{{StartIndex: uint32(op & 3), IngestionMs: -int64(i), Payload: bytes.Repeat([]byte{op}, int(op&3))}}
				if op&4 == 0 {
					md = nil
				} else if len(md[0].Payload) == 0 {
					md[0].Payload = nil
				}
				loc := "seg/" + itoa(i)
				seq, err := m.Append(loc, count, md)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, Entry{Sequence: seq, Count: count, Location: loc, Metadata: md})
			case 2: // truncate
				through := m.NextSequence() * uint64(op&0x3f) / 64
				kept := want[:0:0]
				for _, e := range want {
					if e.End()-1 > through {
						kept = append(kept, e)
					}
				}
				if got := m.TruncateThrough(through); got != len(want)-len(kept) {
					t.Fatalf("TruncateThrough(%d) dropped %d, want %d", through, got, len(want)-len(kept))
				}
				want = kept
			case 3: // clone and keep using the clone; the original must not change
				before := m.Encode()
				c := m.Clone()
				c.SetEpoch(uint64(op))
				if _, err := c.Append("clone", 1, nil); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(before, m.Encode()) {
					t.Fatal("mutating a clone changed the original")
				}
				m = c
				want = append(want, Entry{Sequence: c.Entry(c.Len() - 1).Sequence, Count: 1, Location: "clone"})
			}
			p, err := ParseManifest(m.Encode())
			if err != nil {
				t.Fatal(err)
			}
			if err := p.CheckSequences(); err != nil {
				t.Fatalf("after op %d: %v", i, err)
			}
			got := slices.Collect(p.Entries())
			if len(got) != len(want) {
				t.Fatalf("after op %d: %d entries, want %d", i, len(got), len(want))
			}
			for j := range want {
				if g, w := got[j], want[j]; g.Sequence != w.Sequence || g.Count != w.Count || g.Location != w.Location ||
					!slices.EqualFunc(g.Metadata, w.Metadata, func(a, b Metadata) bool {
						return a.StartIndex == b.StartIndex && a.IngestionMs == b.IngestionMs && bytes.Equal(a.Payload, b.Payload)
					}) {
					t.Fatalf("after op %d: entry %d = %+v, want %+v", i, j, g, w)
				}
			}
		}
	})
}
