package format

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// entryBody encodes an entry body (everything after entry_len); counted
// selects the v3/v4 encoding.
func entryBody(counted bool, seq uint64, count uint32, loc string, md ...Metadata) []byte {
	b := le64(nil, seq)
	if counted {
		b = le32(b, count)
	}
	b = le16(b, uint16(len(loc)))
	b = append(b, loc...)
	b = le32(b, uint32(len(md)))
	for _, it := range md {
		b = le32(b, it.StartIndex)
		b = le64(b, uint64(it.IngestionMs))
		b = le32(b, uint32(len(it.Payload)))
		b = append(b, it.Payload...)
	}
	return b
}

// withLen prefixes body with its entry_len.
func withLen(body []byte) []byte { return append(le32(nil, uint32(len(body))), body...) }

type footer struct {
	count      uint32
	next       uint64
	epoch      uint64
	snapLoc    string
	snapLocLen *uint16 // overrides len(snapLoc)
	through    uint64
	created    int64
}

// rawManifest assembles a manifest of version v from an entries region and
// footer fields, with a correct CRC for v4.
func rawManifest(v uint16, region []byte, f footer) []byte {
	b := append([]byte(nil), region...)
	if v >= 2 && v <= 4 {
		b = append(b, f.snapLoc...)
		l := uint16(len(f.snapLoc))
		if f.snapLocLen != nil {
			l = *f.snapLocLen
		}
		b = le16(b, l)
		b = le64(b, f.through)
		b = le64(b, uint64(f.created))
	}
	b = le32(b, f.count)
	b = le64(b, f.next)
	b = le64(b, f.epoch)
	if v == 4 {
		b = le32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	}
	return le16(b, v)
}

func TestParseManifestErrors(t *testing.T) {
	u16 := func(v uint16) *uint16 { return &v }
	good := func(counted bool) []byte {
		return withLen(entryBody(counted, 0, 1, "seg/a", Metadata{StartIndex: 0, IngestionMs: 5, Payload: []byte("p")}))
	}
	type tc struct {
		name string
		in   []byte
		want error
	}
	cases := []tc{
		{"empty", nil, ErrTruncated},
		{"21 bytes", make([]byte, 21), ErrTruncated},
		{"version 0", rawManifest(0, nil, footer{}), ErrUnsupportedVersion},
		{"version 5", rawManifest(5, nil, footer{}), ErrUnsupportedVersion},
		{"version 0xffff", rawManifest(0xffff, make([]byte, 40), footer{}), ErrUnsupportedVersion},
		{"v4 crc", flip(rawManifest(4, nil, footer{epoch: 1}), 0), ErrCorrupt},
		{"v4 crc field", flip(rawManifest(4, nil, footer{epoch: 1}), 38), ErrCorrupt},
		{"v2 snapshot loc_len overrun", rawManifest(2, nil, footer{snapLocLen: u16(1)}), ErrCorrupt},
		{"v3 snapshot loc_len overrun", rawManifest(3, []byte("ab"), footer{snapLoc: "x", snapLocLen: u16(4)}), ErrCorrupt},
		{"v4 snapshot loc_len overrun", rawManifest(4, nil, footer{snapLocLen: u16(0xffff)}), ErrCorrupt},
	}
	// Below the version minimum (22/40/40/44), with the version word in
	// place: the size check comes before the CRC (D16).
	for v, min := range map[uint16]int{2: 40, 3: 40, 4: 44} {
		for n := 22; n < min; n++ {
			b := make([]byte, n)
			b[n-2] = byte(v)
			cases = append(cases, tc{"v" + string(rune('0'+v)) + " short " + itoa(n), b, ErrTruncated})
		}
	}
	// Entry-level checks, for both entry encodings and every version.
	for _, v := range []uint16{1, 2, 3, 4} {
		counted := v >= 3
		minBody := legacyEntryMin
		if counted {
			minBody = countedEntryMin
		}
		name := func(s string) string { return "v" + itoa(int(v)) + " " + s }
		mk := func(region []byte, count uint32) []byte {
			return rawManifest(v, region, footer{count: count, next: 1})
		}
		body := entryBody(counted, 0, 1, "seg/a", Metadata{Payload: []byte("pay")})
		locAt := 8 + 2
		if counted {
			locAt += 4
		}
		cases = append(cases,
			tc{name("entry_len field truncated"), mk(append(append(good(counted), good(counted)...), 1, 0, 0), 3), ErrCorrupt},
			tc{name("entry past region"), mk(append(le32(nil, uint32(len(body)+1)), body...), 1), ErrCorrupt},
			tc{name("entry_len below minimum"), mk(append(append(le32(nil, uint32(minBody-1)), make([]byte, minBody-1)...), good(counted)...), 2), ErrCorrupt},
			tc{name("location overruns body"), mk(withLen(patch16(body, locAt-2, 200)), 1), ErrCorrupt},
			tc{name("truncated metadata count"), mk(withLen(body[:locAt+5+2]), 1), ErrCorrupt},
			tc{name("metadata count overruns body"), mk(withLen(patch32(body, locAt+5, 2)), 1), ErrCorrupt},
			tc{name("metadata count huge"), mk(withLen(patch32(body, locAt+5, math.MaxUint32)), 1), ErrCorrupt},
			tc{name("truncated metadata header"), mk(withLen(append(patch32(entryBody(counted, 0, 1, "s", Metadata{Payload: make([]byte, 10)}), locAt+1, 2), make([]byte, 10)...)), 1), ErrCorrupt},
			tc{name("payload overruns body"), mk(withLen(body[:len(body)-1]), 1), ErrCorrupt},
			tc{name("payload length huge"), mk(withLen(patch32(body, len(body)-7, math.MaxUint32)), 1), ErrCorrupt},
			tc{name("spare bytes in entry"), mk(withLen(append(slices.Clone(body), 0)), 1), ErrCorrupt},
			tc{name("location not UTF-8"), mk(withLen(entryBody(counted, 0, 1, "seg/\xff")), 1), ErrCorrupt},
			tc{name("fewer entries than entries_count"), mk(good(counted), 2), ErrCorrupt},
			tc{name("more entries than entries_count"), mk(append(good(counted), good(counted)...), 1), ErrCorrupt},
			tc{name("entries_count huge"), mk(good(counted), math.MaxUint32), ErrCorrupt},
			tc{name("entries_count with empty region"), mk(nil, 1), ErrCorrupt},
			tc{name("bytes but entries_count 0"), mk(good(counted), 0), ErrCorrupt},
		)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := ParseManifest(c.in)
			require.Error(t, err)
			assert.Nil(t, m)
			t.Log(err)
			assert.ErrorIs(t, err, c.want)
			assertOneClass(t, err)
		})
	}
}

func itoa(n int) string { return string(appendInt(nil, n)) }

func appendInt(b []byte, n int) []byte {
	if n >= 10 {
		b = appendInt(b, n/10)
	}
	return append(b, byte('0'+n%10))
}

func patch16(b []byte, at int, v uint16) []byte {
	b = slices.Clone(b)
	b[at], b[at+1] = byte(v), byte(v>>8)
	return b
}

func patch32(b []byte, at int, v uint32) []byte {
	b = slices.Clone(b)
	copy(b[at:], le32(nil, v))
	return b
}

// The entries of a v1/v2 manifest are checked against the entry (G's rule),
// where R would check them against the region and read metadata that runs
// into the next entry (D5).
func TestParseManifestEntryBoundsAreTheEntry(t *testing.T) {
	second := withLen(entryBody(false, 1, 0, "b"))
	first := entryBody(false, 0, 0, "a", Metadata{Payload: []byte("xy")})
	// Shrink the first entry's entry_len by 2: its payload now runs into
	// the second entry, which R does not notice.
	region := append(le32(nil, uint32(len(first)-2)), first...)
	region = append(region, second...)
	_, err := ParseManifest(rawManifest(1, region, footer{count: 2, next: 2}))
	assert.ErrorIs(t, err, ErrCorrupt)
}

func TestParseManifestHugeCountsDoNotAllocate(t *testing.T) {
	in := rawManifest(4, withLen(patch32(entryBody(true, 0, 1, "s"), 15, math.MaxUint32)), footer{count: math.MaxUint32})
	n := allocBytes(func() { _, _ = ParseManifest(in) })
	assert.Less(t, n, uint64(4096))
}

func TestParseManifestDoesNotRetainInput(t *testing.T) {
	v := vectorNamed(t, "manifest_v4_snapshot.bin")
	in := slices.Clone(v.data)
	m, err := ParseManifest(in)
	require.NoError(t, err)
	for i := range in {
		in[i] = 0xAA
	}
	assert.Equal(t, v.data, m.Encode())
}

// FORMATS.md §4.7: TruncateThrough(5) on [0,3) [3,6) [6,8) [8,11) leaves
// exactly manifest_v4_snapshot.bin.
func TestTruncateThroughExample(t *testing.T) {
	v := vectorNamed(t, "manifest_v4_snapshot.bin")
	const seg = "wal/seg/01JZ8X6E3M4N5P6Q7R8S9T0V1W/"
	m := NewManifest()
	m.SetEpoch(7)
	for _, a := range []struct {
		count uint32
		loc   string
		md    []Metadata
	}{
		{3, seg + "0000000000000001", []Metadata{{0, 1767225599000, []byte("g0")}}},
		{3, seg + "0000000000000002", nil},
		{2, seg + "0000000000000003", []Metadata{{0, 1767225600123, []byte("g1")}}},
		{3, seg + "0000000000000004", []Metadata{{0, 1767225600456, []byte("g2")}, {1, 1767225600456, []byte("g3")}}},
	} {
		_, err := m.Append(a.loc, a.count, a.md)
		require.NoError(t, err)
	}
	m.SetSnapshot(Snapshot{Location: "wal/snapshots/base-0000000000000005.ckpt", ThroughSeq: 5, CreatedMs: 1767225600000})
	before := m.Clone()

	assert.Equal(t, 2, m.TruncateThrough(5))
	assert.Equal(t, v.data, m.Encode())
	assert.Equal(t, uint64(11), m.NextSequence())
	assert.Equal(t, 4, before.Len(), "the clone is unaffected")

	// Nothing more to drop: nothing changes.
	assert.Equal(t, 0, m.TruncateThrough(5))
	assert.Equal(t, 0, m.TruncateThrough(6), "[6,8) straddles 6 and is kept whole")
	assert.Equal(t, v.data, m.Encode())
	assert.Equal(t, 1, m.TruncateThrough(7))
	assert.Equal(t, 1, m.TruncateThrough(math.MaxUint64))
	assert.Equal(t, 0, m.Len())
	assert.Equal(t, uint64(11), m.NextSequence(), "next_sequence never decreases")
	assert.Equal(t, uint64(7), m.Epoch())
	assert.Equal(t, uint64(5), m.Snapshot().ThroughSeq)
}

// G's rule filters every entry, not just a prefix (D3), and a count-0 entry
// goes when its one slot is <= t.
func TestTruncateThroughFiltersAllEntries(t *testing.T) {
	region := withLen(entryBody(true, 10, 1, "late"))
	region = append(region, withLen(entryBody(true, 2, 0, "legacy"))...)
	region = append(region, withLen(entryBody(true, 3, 5, "straddle"))...)
	m, err := ParseManifest(rawManifest(3, region, footer{count: 3, next: 11}))
	require.NoError(t, err)
	assert.Error(t, m.CheckSequences())
	assert.Equal(t, 1, m.TruncateThrough(5))
	assert.Equal(t, []string{"late", "straddle"}, m.TailLocations(10))
}

// FORMATS.md §4.1: v1 entries 5 and 6 with next_sequence 7, then an append
// of 3 records, give [7, 10); the result is written as v4.
func TestUpgradeV1ToV4(t *testing.T) {
	v := vectorNamed(t, "manifest_v1_2entries.bin")
	m, err := ParseManifest(v.data)
	require.NoError(t, err)
	require.Equal(t, ManifestV1, m.Version())
	seq, err := m.Append("wal/seg/run/0000000000000000", 3, []Metadata{{0, 42, nil}})
	require.NoError(t, err)
	assert.Equal(t, uint64(7), seq)
	assert.Equal(t, uint64(10), m.NextSequence())

	b := m.Encode()
	assert.Equal(t, ManifestV4, binary.LittleEndian.Uint16(b[len(b)-2:]), "written as v4")
	up, err := ParseManifest(b)
	require.NoError(t, err)
	assert.Equal(t, ManifestV4, up.Version())
	assert.Equal(t, uint64(3), up.Epoch())
	assert.NoError(t, up.CheckSequences())
	var got [][3]uint64
	for e := range up.Entries() {
		got = append(got, [3]uint64{e.Sequence, uint64(e.Count), e.End()})
	}
	assert.Equal(t, [][3]uint64{{5, 0, 6}, {6, 0, 7}, {7, 3, 10}}, got)

	// Legacy entries deliver every record with their one sequence.
	e := up.Entry(0)
	assert.Equal(t, uint64(5), e.RecordSequence(0))
	assert.Equal(t, uint64(5), e.RecordSequence(3))
	assert.Equal(t, uint64(8), up.Entry(2).RecordSequence(1))

	// The upgraded manifest cannot go back to v1: it has a counted entry.
	_, err = EncodeManifestV1(up)
	assert.ErrorIs(t, err, ErrInvalid)
}

func TestEncodeManifestV1Refuses(t *testing.T) {
	m := NewManifest()
	m.SetSnapshot(Snapshot{Location: "s"})
	_, err := EncodeManifestV1(m)
	assert.ErrorIs(t, err, ErrInvalid)
	m.SetSnapshot(Snapshot{CreatedMs: 1})
	_, err = EncodeManifestV1(m)
	assert.ErrorIs(t, err, ErrInvalid, "a non-zero pointer would be lost")
	b, err := EncodeManifestV1(NewManifest())
	require.NoError(t, err)
	assert.Equal(t, rawManifest(1, nil, footer{}), b)
}

func TestManifestAppendErrors(t *testing.T) {
	m := NewManifest()
	before := m.Encode()
	for name, f := range map[string]func() error{
		"count 0":           func() error { _, err := m.Append("a", 0, nil); return err },
		"location too long": func() error { _, err := m.Append(string(make([]byte, MaxLocationLen+1)), 1, nil); return err },
		"location not utf8": func() error { _, err := m.Append("a\xff", 1, nil); return err },
	} {
		assert.ErrorIs(t, f(), ErrInvalid, name)
	}
	assert.Equal(t, before, m.Encode(), "failed appends change nothing")
	_, err := m.Append(string(make([]byte, MaxLocationLen)), 1, nil)
	assert.NoError(t, err, "the longest location fits")

	// Sequence overflow.
	hi, err := ParseManifest(rawManifest(4, nil, footer{next: math.MaxUint64 - 2}))
	require.NoError(t, err)
	_, err = hi.Append("a", 3, nil)
	assert.ErrorIs(t, err, ErrInvalid)
	seq, err := hi.Append("a", 2, nil)
	require.NoError(t, err)
	assert.Equal(t, uint64(math.MaxUint64-2), seq)
	assert.Equal(t, uint64(math.MaxUint64), hi.NextSequence())
}

func TestSnapshotValidate(t *testing.T) {
	long := Snapshot{Location: string(make([]byte, MaxLocationLen+1))}
	assert.ErrorIs(t, long.Validate(), ErrInvalid)
	assert.NoError(t, Snapshot{Location: "x"}.Validate())
	assert.Panics(t, func() { NewManifest().SetSnapshot(long) })
}

func TestManifestNavigation(t *testing.T) {
	m, err := ParseManifest(vectorNamed(t, "manifest_v3.bin").data)
	require.NoError(t, err)
	require.NoError(t, m.CheckSequences())
	// Entries: [10,11) count 0, [11,14), [14,15).
	for _, c := range []struct {
		seq   uint64
		idx   int
		found bool
	}{{0, 0, false}, {9, 0, false}, {10, 0, true}, {11, 1, true}, {13, 1, true}, {14, 2, true}, {15, 3, false}, {math.MaxUint64, 3, false}} {
		e, i, ok := m.Locate(c.seq)
		assert.Equal(t, c.found, ok, "seq %d", c.seq)
		assert.Equal(t, c.idx, i, "seq %d", c.seq)
		if ok {
			assert.Equal(t, m.Entry(i), e)
			assert.True(t, e.Sequence <= c.seq && c.seq < e.End())
		} else {
			assert.Equal(t, Entry{}, e)
		}
	}
	seqs := func(from uint64) []uint64 {
		var out []uint64
		for e := range m.EntriesFrom(from) {
			out = append(out, e.Sequence)
		}
		return out
	}
	assert.Equal(t, []uint64{10, 11, 14}, seqs(0))
	assert.Equal(t, []uint64{11, 14}, seqs(11))
	assert.Equal(t, []uint64{11, 14}, seqs(13))
	assert.Equal(t, []uint64{14}, seqs(14))
	assert.Nil(t, seqs(15))
	for range m.EntriesFrom(0) {
		break // early exit must not panic
	}

	assert.Equal(t, []string{"wal/seg/01JZ8X6E3M4N5P6Q7R8S9T0V1W/0000000000000001"}, m.TailLocations(1))
	assert.Len(t, m.TailLocations(2), 2)
	assert.Len(t, m.TailLocations(100), 3)
	assert.Nil(t, m.TailLocations(0))
	assert.Nil(t, m.TailLocations(-1))

	e := m.Entry(1) // metadata {0 groupA} {2 groupB}
	for i, want := range map[int]string{0: "groupA", 1: "groupA", 2: "groupB", 99: "groupB"} {
		md, ok := e.MetadataFor(i)
		assert.True(t, ok)
		assert.Equal(t, want, string(md.Payload), "record %d", i)
	}
	_, ok := e.MetadataFor(-1)
	assert.False(t, ok)
	_, ok = m.Entry(0).MetadataFor(0)
	assert.False(t, ok, "no metadata at all")
	_, ok = Entry{Metadata: []Metadata{{StartIndex: 2}}}.MetadataFor(1)
	assert.False(t, ok, "before the first run")
	assert.Equal(t, uint64(12), e.RecordSequence(1))
	assert.Equal(t, uint64(math.MaxUint64), Entry{Sequence: math.MaxUint64 - 1, Count: 5}.End(), "End saturates")
}

func TestManifestAppendAndClone(t *testing.T) {
	m := NewManifest()
	assert.Equal(t, ManifestV4, m.Version())
	assert.Equal(t, 0, m.Len())
	var want []Entry
	for i := range 50 {
		md := []Metadata{{StartIndex: 0, IngestionMs: int64(i) - 25, Payload: bytes.Repeat([]byte{byte(i)}, i%3)}}
		if i%3 == 0 {
			md[0].Payload = nil
		}
		seq, err := m.Append("seg/"+itoa(i), uint32(i%4+1), md)
		require.NoError(t, err)
		want = append(want, Entry{Sequence: seq, Count: uint32(i%4 + 1), Location: "seg/" + itoa(i), Metadata: md})
	}
	assertEntries(t, want, m)
	require.NoError(t, m.CheckSequences())

	// Parse, then clone and append on both sides: neither sees the other.
	p, err := ParseManifest(m.Encode())
	require.NoError(t, err)
	assertEntries(t, want, p)
	_, err = p.Append("p/0", 1, nil)
	require.NoError(t, err)
	c := p.Clone()
	_, err = p.Append("p/1", 1, nil)
	require.NoError(t, err)
	_, err = c.Append("c/1", 2, nil)
	require.NoError(t, err)
	c.SetEpoch(9)
	c.SetSnapshot(Snapshot{Location: "snap"})
	assert.Equal(t, []string{"p/0", "p/1"}, p.TailLocations(2))
	assert.Equal(t, []string{"p/0", "c/1"}, c.TailLocations(2))
	assert.Equal(t, uint64(0), p.Epoch())
	assert.True(t, p.Snapshot().IsZero())
	c.TruncateThrough(100)
	assert.Equal(t, 52, p.Len())
	assertEntries(t, want, &Manifest{base: p.base, baseOffs: p.baseOffs})

	rp, err := ParseManifest(p.Encode())
	require.NoError(t, err)
	assert.Equal(t, p.Encode(), rp.Encode())
	require.NoError(t, rp.CheckSequences())
}

func assertEntries(t *testing.T, want []Entry, m *Manifest) {
	t.Helper()
	require.Equal(t, len(want), m.Len())
	i := 0
	for e := range m.Entries() {
		assert.Equal(t, want[i], e, "entry %d", i)
		i++
	}
}

func TestCheckSequences(t *testing.T) {
	gap := append(withLen(entryBody(true, 0, 2, "a")), withLen(entryBody(true, 3, 1, "b"))...)
	m, err := ParseManifest(rawManifest(4, gap, footer{count: 2, next: 4}))
	require.NoError(t, err, "the reader does not reject gaps")
	assert.ErrorIs(t, m.CheckSequences(), ErrCorrupt)
	m, err = ParseManifest(rawManifest(4, withLen(entryBody(true, 0, 2, "a")), footer{count: 1, next: 5}))
	require.NoError(t, err)
	assert.ErrorIs(t, m.CheckSequences(), ErrCorrupt, "next_sequence past the last entry")
	assert.NoError(t, NewManifest().CheckSequences())
}

func TestNextEpoch(t *testing.T) {
	assert.Equal(t, uint64(1), NextEpoch(0))
	assert.Equal(t, uint64(8), NextEpoch(7))
	assert.Equal(t, uint64(math.MaxUint64-1), NextEpoch(math.MaxUint64-2))
	assert.Equal(t, uint64(0), NextEpoch(math.MaxUint64-1), "MaxUint64 is skipped")
	assert.Equal(t, uint64(0), NextEpoch(math.MaxUint64))
}

func TestErrorClass(t *testing.T) {
	_, err := DecodeSegment(nil)
	assert.Equal(t, "truncated", ErrorClass(err))
	_, err = DecodeSegment(rawSegment(nil, 0, 0, 9))
	assert.Equal(t, "unsupported-version", ErrorClass(err))
	_, err = DecodeSegment(rawSegment(nil, 9, 0, 1))
	assert.Equal(t, "unsupported-compression", ErrorClass(err))
	_, err = ParseManifest(flip(rawManifest(4, nil, footer{}), 0))
	assert.Equal(t, "corrupt", ErrorClass(err))
	_, err = NewManifest().Append("", 0, nil)
	assert.Equal(t, "invalid", ErrorClass(err))
	assert.Equal(t, "", ErrorClass(assert.AnError))
	assert.Equal(t, "", ErrorClass(nil))
}

func TestEntryCheckSegment(t *testing.T) {
	seg := &Segment{Records: [][]byte{{1}, {2}}}
	assert.NoError(t, Entry{Count: 2}.CheckSegment(seg))
	assert.NoError(t, Entry{Count: 0}.CheckSegment(seg), "legacy entries hold any number")
	err := Entry{Count: 3, Location: "seg/x"}.CheckSegment(seg)
	assert.ErrorIs(t, err, ErrCorrupt)
	assert.ErrorContains(t, err, "seg/x")
}
