package format

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchRecords returns records of size bytes filling about 1 MiB: a
// log-like mix of a repeated key prefix and random hex, so zstd has about
// as much to work with as on real key/value traffic (roughly 2:1).
func benchRecords(size int) [][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	const hex = "0123456789abcdef"
	n := (1 << 20) / (size + 4)
	records := make([][]byte, n)
	for i := range records {
		r := make([]byte, size)
		p := copy(r, fmt.Sprintf(`{"key":"user-%06d","op":"put","value":"`, i%100000))
		for ; p < size; p++ {
			r[p] = hex[rng.IntN(16)]
		}
		records[i] = r
	}
	return records
}

func recordBytes(records [][]byte) int64 {
	var n int64
	for _, r := range records {
		n += int64(len(r))
	}
	return n
}

var segmentBenchCases = []struct {
	name string
	size int
	c    Compression
}{
	{"none/100B", 100, CompressionNone},
	{"none/4KiB", 4096, CompressionNone},
	{"zstd/100B", 100, CompressionZstd},
	{"zstd/4KiB", 4096, CompressionZstd},
}

// BenchmarkEncodeSegment measures framing ~1 MiB of records into a v2
// segment, reusing the output buffer. MB/s counts record bytes.
func BenchmarkEncodeSegment(b *testing.B) {
	for _, bc := range segmentBenchCases {
		b.Run(bc.name, func(b *testing.B) {
			records := benchRecords(bc.size)
			buf, err := EncodeSegment(records, bc.c, SegmentV2)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(recordBytes(records))
			b.ReportAllocs()
			for b.Loop() {
				if buf, err = AppendSegment(buf[:0], records, bc.c, SegmentV2); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(buf)), "seg-bytes")
		})
	}
}

// BenchmarkDecodeSegment measures decoding a ~1 MiB v2 segment (CRC,
// decompression, record table). MB/s counts record bytes.
func BenchmarkDecodeSegment(b *testing.B) {
	for _, bc := range segmentBenchCases {
		b.Run(bc.name, func(b *testing.B) {
			records := benchRecords(bc.size)
			buf, err := EncodeSegment(records, bc.c, SegmentV2)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(recordBytes(records))
			b.ReportAllocs()
			for b.Loop() {
				seg, err := DecodeSegment(buf)
				if err != nil || len(seg.Records) != len(records) {
					b.Fatal(err)
				}
			}
		})
	}
}

const benchEntries = 10000

// benchManifest returns a manifest of 10,000 entries shaped like objwal's:
// a 50-byte location, 64 records, one metadata item with a small payload.
func benchManifest(b *testing.B) *Manifest {
	m := NewManifest()
	m.SetEpoch(3)
	for i := range benchEntries {
		appendBenchEntry(b, m, i)
	}
	return m
}

func appendBenchEntry(b *testing.B, m *Manifest, i int) {
	loc := fmt.Sprintf("wal/seg/01JZ8X6E3M4N5P6Q7R8S9T0V1W/%016x", i)
	if _, err := m.Append(loc, 64, []Metadata{{StartIndex: 0, IngestionMs: 1767225600000 + int64(i), Payload: []byte("tenant-7")}}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkManifestAppend measures one Append onto a manifest that already
// holds 10,000 entries (parsed, so they sit in the shared base), after a
// Clone: the writer's commit path.
func BenchmarkManifestAppend(b *testing.B) {
	m, err := ParseManifest(benchManifest(b).Encode())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := benchEntries
	for b.Loop() {
		c := m.Clone()
		appendBenchEntry(b, c, i)
		i++
	}
}

// BenchmarkManifestAppend10000 builds a 10,000-entry manifest from empty.
func BenchmarkManifestAppend10000(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		benchManifest(b)
	}
}

// BenchmarkManifestParse parses (and fully validates) a 10,000-entry v4
// manifest.
func BenchmarkManifestParse(b *testing.B) {
	buf := benchManifest(b).Encode()
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		m, err := ParseManifest(buf)
		if err != nil || m.Len() != benchEntries {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(buf)), "manifest-bytes")
}

// BenchmarkManifestEncode encodes a 10,000-entry manifest into a reused
// buffer.
func BenchmarkManifestEncode(b *testing.B) {
	m := benchManifest(b)
	buf := m.Encode()
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = m.AppendEncode(buf[:0])
	}
}

// BenchmarkManifestLocate looks up a record sequence among 10,000 entries.
func BenchmarkManifestLocate(b *testing.B) {
	m := benchManifest(b)
	b.ReportAllocs()
	seq := uint64(0)
	for b.Loop() {
		if _, _, ok := m.Locate(seq % m.NextSequence()); !ok {
			b.Fatal("miss")
		}
		seq += 6151
	}
}
