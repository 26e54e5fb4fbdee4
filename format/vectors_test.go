package format

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// vectorDir is the shared test vectors, reached relative to this package so
// that the test works wherever main and shared are checked out side by side.
const vectorDir = "../../shared/vectors"

type vecBytes struct {
	Base64 []byte `json:"base64"` // encoding/json decodes base64 into []byte
	Len    int    `json:"len"`
}

type vecMetadata struct {
	StartIndex      uint32   `json:"start_index"`
	IngestionTimeMs int64    `json:"ingestion_time_ms"`
	Payload         vecBytes `json:"payload"`
}

type vecEntry struct {
	Sequence    uint64        `json:"sequence"`
	Count       *uint32       `json:"count"`
	RecordRange [2]uint64     `json:"objwal_record_range"`
	Location    string        `json:"location"`
	Metadata    []vecMetadata `json:"metadata"`
}

type vecSnapshot struct {
	Location      string `json:"location"`
	ThroughSeq    uint64 `json:"through_seq"`
	CreatedUnixMs int64  `json:"created_unix_ms"`
	IsZero        bool   `json:"is_zero"`
}

type vector struct {
	File            string       `json:"file"`
	Kind            string       `json:"kind"`
	Version         uint16       `json:"version"`
	Size            int          `json:"size"`
	Compression     string       `json:"compression"`
	CompressionCode uint8        `json:"compression_code"`
	RecordCount     int          `json:"record_count"`
	Records         []vecBytes   `json:"records"`
	Epoch           uint64       `json:"epoch"`
	NextSequence    uint64       `json:"next_sequence"`
	EntriesCount    int          `json:"entries_count"`
	Entries         []vecEntry   `json:"entries"`
	Snapshot        *vecSnapshot `json:"snapshot"`

	data []byte
}

// loadVectors reads vectors.json and every file it names. A missing
// directory fails the test: the vectors are the contract.
func loadVectors(t testing.TB) []vector {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(vectorDir, "vectors.json"))
	if err != nil {
		t.Fatalf("shared vectors missing (want %s beside the main checkout): %v", vectorDir, err)
	}
	var doc struct {
		Vectors []vector `json:"vectors"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	require.NotEmpty(t, doc.Vectors)
	for i := range doc.Vectors {
		v := &doc.Vectors[i]
		v.data, err = os.ReadFile(filepath.Join(vectorDir, v.File))
		require.NoError(t, err)
		require.Len(t, v.data, v.Size, v.File)
	}
	return doc.Vectors
}

func vectorsOf(t testing.TB, kind string) []vector {
	var out []vector
	for _, v := range loadVectors(t) {
		if v.Kind == kind {
			out = append(out, v)
		}
	}
	require.NotEmpty(t, out, kind)
	return out
}

func vectorNamed(t testing.TB, file string) vector {
	for _, v := range loadVectors(t) {
		if v.File == file {
			return v
		}
	}
	t.Fatalf("vector %s not in vectors.json", file)
	return vector{}
}

func TestVectorsAllKnownKinds(t *testing.T) {
	vs := loadVectors(t)
	assert.Len(t, vs, 11)
	for _, v := range vs {
		assert.Contains(t, []string{"segment", "manifest"}, v.Kind, v.File)
	}
}

func TestSegmentVectors(t *testing.T) {
	for _, v := range vectorsOf(t, "segment") {
		t.Run(v.File, func(t *testing.T) {
			seg, err := DecodeSegment(v.data)
			require.NoError(t, err)
			assert.Equal(t, v.Version, seg.Version)
			assert.Equal(t, Compression(v.CompressionCode), seg.Compression)
			assert.Equal(t, v.Compression, seg.Compression.String())
			require.Len(t, seg.Records, v.RecordCount)
			want := make([][]byte, len(v.Records))
			for i, r := range v.Records {
				require.Len(t, r.Base64, r.Len)
				assert.Equal(t, string(r.Base64), string(seg.Records[i]), "record %d", i)
				want[i] = r.Base64
			}

			// Re-encoding reproduces the bytes exactly when uncompressed;
			// zstd bytes are not canonical (D9), so compare content.
			enc, err := EncodeSegment(want, seg.Compression, seg.Version)
			require.NoError(t, err)
			if seg.Compression == CompressionNone {
				assert.Equal(t, v.data, enc)
			}
			again, err := DecodeSegment(enc)
			require.NoError(t, err)
			assert.Equal(t, seg.Version, again.Version)
			assert.Equal(t, seg.Compression, again.Compression)
			assertSameRecords(t, seg.Records, again.Records)
		})
	}
}

func assertSameRecords(t *testing.T, want, got [][]byte) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		assert.Equal(t, string(want[i]), string(got[i]), "record %d", i)
	}
}

func TestManifestVectors(t *testing.T) {
	for _, v := range vectorsOf(t, "manifest") {
		t.Run(v.File, func(t *testing.T) {
			m, err := ParseManifest(v.data)
			require.NoError(t, err)
			assertManifestMatches(t, v, m)

			// Every version re-encodes as v4 with the same content.
			m2, err := ParseManifest(m.Encode())
			require.NoError(t, err)
			assert.Equal(t, ManifestV4, m2.Version())
			assertManifestContent(t, v, m2)

			switch v.Version {
			case ManifestV4:
				assert.Equal(t, v.data, m.Encode(), "v4 re-encode is byte-identical")
				assert.Equal(t, v.data, m.AppendEncode(nil))
				pre := []byte("prefix")
				assert.Equal(t, append([]byte("prefix"), v.data...), m.AppendEncode(pre))
			case ManifestV1:
				b, err := EncodeManifestV1(m)
				require.NoError(t, err)
				assert.Equal(t, v.data, b, "v1 re-encode is byte-identical")
			}
			// Rebuilding the content from scratch gives the same v4 bytes.
			assert.Equal(t, m.Encode(), buildFromVector(t, v).Encode())
		})
	}
}

func assertManifestMatches(t *testing.T, v vector, m *Manifest) {
	t.Helper()
	assert.Equal(t, v.Version, m.Version())
	assertManifestContent(t, v, m)
}

func assertManifestContent(t *testing.T, v vector, m *Manifest) {
	t.Helper()
	assert.Equal(t, v.Epoch, m.Epoch())
	assert.Equal(t, v.NextSequence, m.NextSequence())
	assert.Equal(t, v.EntriesCount, m.Len())
	if v.Snapshot != nil {
		assert.Equal(t, Snapshot{Location: v.Snapshot.Location, ThroughSeq: v.Snapshot.ThroughSeq, CreatedMs: v.Snapshot.CreatedUnixMs}, m.Snapshot())
		assert.Equal(t, v.Snapshot.IsZero, m.Snapshot().IsZero())
	} else {
		assert.True(t, m.Snapshot().IsZero())
		assert.Equal(t, Snapshot{}, m.Snapshot())
	}
	require.Len(t, v.Entries, v.EntriesCount)
	i := 0
	for e := range m.Entries() {
		want := v.Entries[i]
		assert.Equal(t, want.Sequence, e.Sequence)
		wantCount := uint32(0) // legacy entries read as count 0
		if want.Count != nil {
			wantCount = *want.Count
		}
		assert.Equal(t, wantCount, e.Count)
		assert.Equal(t, want.Location, e.Location)
		assert.Equal(t, want.RecordRange, [2]uint64{e.Sequence, e.End()})
		require.Len(t, e.Metadata, len(want.Metadata))
		for j, md := range want.Metadata {
			assert.Equal(t, md.StartIndex, e.Metadata[j].StartIndex)
			assert.Equal(t, md.IngestionTimeMs, e.Metadata[j].IngestionMs)
			assert.Equal(t, string(md.Payload.Base64), string(e.Metadata[j].Payload))
			assert.Len(t, e.Metadata[j].Payload, md.Payload.Len)
		}
		assert.Equal(t, e, m.Entry(i))
		i++
	}
	assert.Equal(t, v.EntriesCount, i)
}

// buildFromVector constructs the vector's content through the public API
// only. Legacy (count 0) entries cannot be appended, so they are brought in
// by parsing a v1 manifest holding just them.
func buildFromVector(t *testing.T, v vector) *Manifest {
	t.Helper()
	m := NewManifest()
	var legacy []vecEntry
	for _, e := range v.Entries {
		if e.Count == nil || *e.Count == 0 {
			legacy = append(legacy, e)
		}
	}
	if len(legacy) > 0 {
		m = legacyManifest(t, legacy)
	}
	for _, e := range v.Entries[len(legacy):] {
		require.NotNil(t, e.Count)
		if m.Len() == 0 && e.Sequence > m.NextSequence() {
			// Start later than 0: fill the gap, then truncate it away.
			_, err := m.Append("filler", uint32(e.Sequence-m.NextSequence()), nil)
			require.NoError(t, err)
			require.Equal(t, 1, m.TruncateThrough(e.Sequence-1))
		}
		md := make([]Metadata, len(e.Metadata))
		for j, x := range e.Metadata {
			md[j] = Metadata{StartIndex: x.StartIndex, IngestionMs: x.IngestionTimeMs, Payload: x.Payload.Base64}
		}
		seq, err := m.Append(e.Location, *e.Count, md)
		require.NoError(t, err)
		require.Equal(t, e.Sequence, seq)
	}
	m.SetEpoch(v.Epoch)
	if v.Snapshot != nil {
		m.SetSnapshot(Snapshot{Location: v.Snapshot.Location, ThroughSeq: v.Snapshot.ThroughSeq, CreatedMs: v.Snapshot.CreatedUnixMs})
	}
	require.Equal(t, v.NextSequence, m.NextSequence())
	return m
}

// legacyManifest hand-encodes a v1 manifest holding the given entries, the
// only way to obtain count-0 entries.
func legacyManifest(t *testing.T, es []vecEntry) *Manifest {
	t.Helper()
	var b []byte
	for _, e := range es {
		var body []byte
		body = le64(body, e.Sequence)
		body = le16(body, uint16(len(e.Location)))
		body = append(body, e.Location...)
		body = le32(body, uint32(len(e.Metadata)))
		for _, md := range e.Metadata {
			body = le32(body, md.StartIndex)
			body = le64(body, uint64(md.IngestionTimeMs))
			body = le32(body, uint32(len(md.Payload.Base64)))
			body = append(body, md.Payload.Base64...)
		}
		b = le32(b, uint32(len(body)))
		b = append(b, body...)
	}
	last := es[len(es)-1]
	b = le32(b, uint32(len(es)))
	b = le64(b, last.Sequence+1)
	b = le64(b, 0)
	b = le16(b, 1)
	m, err := ParseManifest(b)
	require.NoError(t, err)
	return m
}
