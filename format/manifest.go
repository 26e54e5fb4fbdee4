package format

import (
	"encoding/binary"
	"hash/crc32"
	"iter"
	"math"
	"slices"
	"sort"
	"strconv"
	"unicode/utf8"
)

// Manifest format versions (the u16 at the end of the object).
const (
	// ManifestV1 is the buffer manifest: legacy (count-less) entries, no
	// snapshot block, no checksum.
	ManifestV1 uint16 = 1
	// ManifestV2 is an older objwal manifest: legacy entries plus the
	// snapshot block.
	ManifestV2 uint16 = 2
	// ManifestV3 is an older objwal manifest: counted entries plus the
	// snapshot block.
	ManifestV3 uint16 = 3
	// ManifestV4 is the current objwal manifest: counted entries, the
	// snapshot block and a CRC-32C. Encode always writes it.
	ManifestV4 uint16 = 4
)

// MaxLocationLen is the longest entry or snapshot location a manifest can
// hold (its length is a u16).
const MaxLocationLen = math.MaxUint16

const (
	legacyEntryMin  = 14 // sequence u64 | loc_len u16 | md_count u32
	countedEntryMin = 18 // sequence u64 | count u32 | loc_len u16 | md_count u32
	mdItemHeader    = 16 // start_index u32 | ingestion_ms i64 | payload_len u32
	snapshotFixed   = 18 // loc_len u16 | through_seq u64 | created_ms i64
	coreFooterV1    = 22 // entries_count u32 | next_sequence u64 | epoch u64 | version u16
	coreFooterV4    = 26 // ... | crc32c u32 | version u16
)

// Metadata is one metadata item of a manifest entry: the run of the
// segment's records that starts at StartIndex (FORMATS.md §4.4).
type Metadata struct {
	// StartIndex is the 0-based index, within the segment, of the run's
	// first record.
	StartIndex uint32
	// IngestionMs is wall-clock milliseconds since the Unix epoch; negative
	// values are legal.
	IngestionMs int64
	// Payload is opaque caller bytes. An empty payload decodes as nil.
	// Decoded payloads alias the manifest's storage: do not modify them.
	Payload []byte
}

// Entry is one manifest entry: it points at one segment object.
type Entry struct {
	// Sequence is the sequence of the entry's first record.
	Sequence uint64
	// Count is the number of records in the segment; 0 marks a legacy
	// entry (from a v1/v2 manifest) that occupies one sequence slot and
	// delivers all of its records with Sequence.
	Count uint32
	// Location is the segment's object key, used as-is.
	Location string
	// Metadata items, in order.
	Metadata []Metadata
}

// End returns the first sequence after this entry: Sequence + max(Count, 1),
// saturating at math.MaxUint64.
func (e Entry) End() uint64 { return seqEnd(e.Sequence, e.Count) }

// RecordSequence returns the sequence of the entry's record i: Sequence+i
// when Count > 0, and Sequence for every record of a legacy (Count 0) entry.
func (e Entry) RecordSequence(i int) uint64 {
	if e.Count == 0 {
		return e.Sequence
	}
	return e.Sequence + uint64(i)
}

// MetadataFor returns the metadata item that covers record i: the last item
// whose StartIndex <= i. It reports false when no item does (records before
// the first item's StartIndex, or an entry without metadata).
func (e Entry) MetadataFor(i int) (Metadata, bool) {
	if i < 0 {
		return Metadata{}, false
	}
	for j := len(e.Metadata) - 1; j >= 0; j-- {
		if uint64(e.Metadata[j].StartIndex) <= uint64(i) {
			return e.Metadata[j], true
		}
	}
	return Metadata{}, false
}

// CheckSegment reports, wrapping ErrCorrupt, a segment whose record count
// differs from the entry's non-zero Count (FORMATS.md §10, D11). A legacy
// entry (Count 0) accepts any number of records.
func (e Entry) CheckSegment(seg *Segment) error {
	if e.Count != 0 && uint64(len(seg.Records)) != uint64(e.Count) {
		return errorf(ErrCorrupt, "segment %s holds %d records but its manifest entry says %d", e.Location, len(seg.Records), e.Count)
	}
	return nil
}

// seqEnd is seq + max(count, 1), saturating at math.MaxUint64.
func seqEnd(seq uint64, count uint32) uint64 {
	r := uint64(max(count, 1))
	if seq > math.MaxUint64-r {
		return math.MaxUint64
	}
	return seq + r
}

// Snapshot is the manifest's pointer to a base snapshot (FORMATS.md §4.5).
type Snapshot struct {
	// Location is the snapshot object's key; "" means no snapshot.
	Location string
	// ThroughSeq is the highest sequence, inclusive, whose effects the
	// snapshot contains.
	ThroughSeq uint64
	// CreatedMs is the wall-clock creation time in Unix milliseconds.
	CreatedMs int64
}

// IsZero reports whether there is no snapshot (Location is empty); the other
// fields are then meaningless.
func (s Snapshot) IsZero() bool { return s.Location == "" }

// Validate reports, wrapping ErrInvalid, a snapshot that cannot be encoded:
// a location longer than MaxLocationLen.
func (s Snapshot) Validate() error {
	if len(s.Location) > MaxLocationLen {
		return errorf(ErrInvalid, "snapshot location of %d bytes exceeds %d", len(s.Location), MaxLocationLen)
	}
	return nil
}

// Manifest is a parsed or new manifest. It keeps its entries encoded (as v4
// counted entries) with an offset index: parsing validates every entry once,
// Entry decodes one lazily, Append encodes the new entry onto a side buffer
// without touching the others, and Encode is a copy plus the footer.
//
// A Manifest is not safe for concurrent mutation; Clone gives an independent
// copy cheaply.
type Manifest struct {
	version  uint16
	epoch    uint64
	next     uint64
	snapshot Snapshot
	// base holds counted entries from parsing or TruncateThrough. It is
	// never modified after creation, so clones share it.
	base []byte
	// tail holds counted entries appended since base was made. Clones get
	// it with clipped capacity, so appends on either side never write into
	// bytes the other sees.
	tail []byte
	// baseOffs[i] is where entry i starts in base; like base it is never
	// modified, so clones share it.
	baseOffs []int
	// tailOffs[j] is where entry len(baseOffs)+j starts in tail. Clipped in
	// clones like tail, so a clone's first Append copies only the tail.
	tailOffs []int
}

// NewManifest returns an empty manifest: epoch 0, next sequence 0, no
// snapshot, Version 4.
func NewManifest() *Manifest { return &Manifest{version: ManifestV4} }

// Version returns the version the manifest was parsed from (ManifestV4 for
// NewManifest). Encode always writes ManifestV4 regardless.
func (m *Manifest) Version() uint16 { return m.version }

// Epoch returns the writer-fencing epoch.
func (m *Manifest) Epoch() uint64 { return m.epoch }

// SetEpoch replaces the epoch.
func (m *Manifest) SetEpoch(e uint64) { m.epoch = e }

// NextSequence returns the sequence the next appended record will get.
func (m *Manifest) NextSequence() uint64 { return m.next }

// Len returns the number of entries.
func (m *Manifest) Len() int { return len(m.baseOffs) + len(m.tailOffs) }

// Snapshot returns the snapshot pointer (the zero Snapshot when none).
func (m *Manifest) Snapshot() Snapshot { return m.snapshot }

// SetSnapshot replaces the snapshot pointer. It panics if the location is
// longer than MaxLocationLen (check with Snapshot.Validate first when the
// location comes from outside the program).
func (m *Manifest) SetSnapshot(s Snapshot) {
	if err := s.Validate(); err != nil {
		panic("format: SetSnapshot: " + err.Error())
	}
	m.snapshot = s
}

// NextEpoch returns the epoch after e: e+1, skipping math.MaxUint64 so that
// no epoch can mean "unset" (math.MaxUint64-1 is followed by 0; FORMATS.md
// §10).
func NextEpoch(e uint64) uint64 {
	n := e + 1
	if n == math.MaxUint64 {
		return 0
	}
	return n
}

// raw returns entry i's encoded bytes, entry_len included.
func (m *Manifest) raw(i int) []byte {
	var b []byte
	if i < len(m.baseOffs) {
		b = m.base[m.baseOffs[i]:]
	} else {
		b = m.tail[m.tailOffs[i-len(m.baseOffs)]:]
	}
	return b[:4+binary.LittleEndian.Uint32(b)]
}

func (m *Manifest) seqAt(i int) uint64 { return binary.LittleEndian.Uint64(m.raw(i)[4:]) }

func (m *Manifest) endAt(i int) uint64 {
	r := m.raw(i)
	return seqEnd(binary.LittleEndian.Uint64(r[4:]), binary.LittleEndian.Uint32(r[12:]))
}

// Entry decodes entry i (0 <= i < Len(); it panics otherwise, like an index
// expression). Payloads alias the manifest's storage.
func (m *Manifest) Entry(i int) Entry {
	body := m.raw(i)[4:]
	e := Entry{
		Sequence: binary.LittleEndian.Uint64(body),
		Count:    binary.LittleEndian.Uint32(body[8:]),
	}
	locLen := int(binary.LittleEndian.Uint16(body[12:]))
	q := 14
	e.Location = string(body[q : q+locLen])
	q += locLen
	md := int(binary.LittleEndian.Uint32(body[q:]))
	q += 4
	if md > 0 {
		e.Metadata = make([]Metadata, md)
		for j := range e.Metadata {
			it := &e.Metadata[j]
			it.StartIndex = binary.LittleEndian.Uint32(body[q:])
			it.IngestionMs = int64(binary.LittleEndian.Uint64(body[q+4:]))
			pl := int(binary.LittleEndian.Uint32(body[q+12:]))
			q += mdItemHeader
			if pl > 0 {
				it.Payload = body[q : q+pl : q+pl]
			}
			q += pl
		}
	}
	return e
}

// Entries iterates over every entry in order.
func (m *Manifest) Entries() iter.Seq[Entry] {
	return m.entriesFromIndex(0)
}

// EntriesFrom iterates, in order, over the entries with End() > seq: the
// entry holding seq (if any) and every later one. It finds the first by
// binary search, which assumes the entries are sorted by sequence (as every
// writer leaves them; see CheckSequences).
func (m *Manifest) EntriesFrom(seq uint64) iter.Seq[Entry] {
	return m.entriesFromIndex(m.search(seq))
}

func (m *Manifest) entriesFromIndex(start int) iter.Seq[Entry] {
	return func(yield func(Entry) bool) {
		for i := start; i < m.Len(); i++ {
			if !yield(m.Entry(i)) {
				return
			}
		}
	}
}

// search returns the index of the first entry with End() > seq.
func (m *Manifest) search(seq uint64) int {
	return sort.Search(m.Len(), func(i int) bool { return m.endAt(i) > seq })
}

// Locate returns the entry whose sequence range [Sequence, End()) holds seq,
// its index, and true. On a miss it returns the zero Entry, the index of the
// first entry that starts after seq (Len() if none), and false. Like
// EntriesFrom it assumes sorted entries.
func (m *Manifest) Locate(seq uint64) (Entry, int, bool) {
	i := m.search(seq)
	if i < m.Len() && m.seqAt(i) <= seq {
		return m.Entry(i), i, true
	}
	return Entry{}, i, false
}

// TailLocations returns the locations of the last n entries, oldest first
// (all of them when n >= Len(), none when n <= 0). A writer whose commit had
// an uncertain outcome looks for its own segment keys here.
func (m *Manifest) TailLocations(n int) []string {
	n = min(n, m.Len())
	if n <= 0 {
		return nil
	}
	out := make([]string, 0, n)
	for i := m.Len() - n; i < m.Len(); i++ {
		body := m.raw(i)[4:]
		l := int(binary.LittleEndian.Uint16(body[12:]))
		out = append(out, string(body[14:14+l]))
	}
	return out
}

// Append adds an entry for a segment of count records at location, with the
// given metadata items, and returns its sequence: the old NextSequence,
// which then grows by count. It encodes only the new entry (O(size of the
// entry)). It returns an error wrapping ErrInvalid, and changes nothing,
// when count is 0, the location is longer than MaxLocationLen or not UTF-8,
// a payload or the entry does not fit its u32 length, or the sequence would
// overflow.
func (m *Manifest) Append(location string, count uint32, md []Metadata) (uint64, error) {
	if count == 0 {
		return 0, errorf(ErrInvalid, "append: count must be at least 1")
	}
	if len(location) > MaxLocationLen {
		return 0, errorf(ErrInvalid, "append: location of %d bytes exceeds %d", len(location), MaxLocationLen)
	}
	if !utf8.ValidString(location) {
		return 0, errorf(ErrInvalid, "append: location %q is not UTF-8", location)
	}
	if m.next > math.MaxUint64-uint64(count) {
		return 0, errorf(ErrInvalid, "append: next sequence %d + count %d overflows", m.next, count)
	}
	if uint64(m.Len()) >= math.MaxUint32 {
		return 0, errorf(ErrInvalid, "append: manifest already holds %d entries", m.Len())
	}
	if err := checkU32Len("append: metadata item count", len(md)); err != nil {
		return 0, err
	}
	body := uint64(countedEntryMin + len(location))
	for j, it := range md {
		if uint64(len(it.Payload)) > math.MaxUint32 {
			return 0, checkU32Len("append: metadata item "+strconv.Itoa(j)+" payload length", len(it.Payload))
		}
		body += mdItemHeader + uint64(len(it.Payload))
	}
	if body > math.MaxUint32 {
		return 0, errorf(ErrInvalid, "append: entry of %d bytes does not fit a u32 length", body)
	}
	seq := m.next
	m.tailOffs = append(m.tailOffs, len(m.tail))
	t := slices.Grow(m.tail, 4+int(body)) // amortised: slices.Grow doubles
	t = binary.LittleEndian.AppendUint32(t, uint32(body))
	t = binary.LittleEndian.AppendUint64(t, seq)
	t = binary.LittleEndian.AppendUint32(t, count)
	t = binary.LittleEndian.AppendUint16(t, uint16(len(location)))
	t = append(t, location...)
	t = binary.LittleEndian.AppendUint32(t, uint32(len(md)))
	for _, it := range md {
		t = binary.LittleEndian.AppendUint32(t, it.StartIndex)
		t = binary.LittleEndian.AppendUint64(t, uint64(it.IngestionMs))
		t = binary.LittleEndian.AppendUint32(t, uint32(len(it.Payload)))
		t = append(t, it.Payload...)
	}
	m.tail = t
	m.next += uint64(count)
	return seq, nil
}

// TruncateThrough drops every entry whose last record sequence,
// Sequence + max(Count,1) - 1, is <= t (G's rule, FORMATS.md §4.7): an entry
// straddling t is kept whole. It returns how many entries it dropped.
// NextSequence, the epoch and the snapshot are unchanged; when nothing is
// dropped nothing changes at all.
func (m *Manifest) TruncateThrough(t uint64) int {
	dropped, size := 0, 0
	for i := range m.Len() {
		if m.endAt(i)-1 <= t {
			dropped++
		} else {
			size += len(m.raw(i))
		}
	}
	if dropped == 0 {
		return 0
	}
	// Build new storage: base may be shared with clones and is never
	// modified in place.
	base := make([]byte, 0, size)
	offs := make([]int, 0, m.Len()-dropped)
	for i := range m.Len() {
		if m.endAt(i)-1 <= t {
			continue
		}
		offs = append(offs, len(base))
		base = append(base, m.raw(i)...)
	}
	m.base, m.baseOffs, m.tail, m.tailOffs = base, offs, nil, nil
	return dropped
}

// CheckSequences reports, wrapping ErrCorrupt, the semantic problems the
// strict reader does not reject (FORMATS.md §3.7 step 10): entries that do
// not tile the sequence space (each Sequence equal to the previous End()),
// or a last entry whose End() is not NextSequence. Whether to refuse such a
// manifest is the caller's policy.
func (m *Manifest) CheckSequences() error {
	for i := 1; i < m.Len(); i++ {
		if prev, s := m.endAt(i-1), m.seqAt(i); s != prev {
			return errorf(ErrCorrupt, "manifest entry %d has sequence %d, want %d (end of entry %d)", i, s, prev, i-1)
		}
	}
	if n := m.Len(); n > 0 {
		if end := m.endAt(n - 1); end != m.next {
			return errorf(ErrCorrupt, "manifest last entry ends at %d but next_sequence is %d", end, m.next)
		}
	}
	return nil
}

// Clone returns a copy that can be mutated (Append, TruncateThrough,
// SetEpoch, SetSnapshot) without affecting m, and vice versa. It is O(1):
// the encoded entries are shared until one side appends.
func (m *Manifest) Clone() *Manifest {
	c := *m
	c.tail = m.tail[:len(m.tail):len(m.tail)]
	c.tailOffs = m.tailOffs[:len(m.tailOffs):len(m.tailOffs)]
	return &c
}

// Encode returns the manifest as a v4 object. Entries read from a v1/v2
// manifest are written as counted entries with count 0 (FORMATS.md §3.5).
func (m *Manifest) Encode() []byte { return m.AppendEncode(nil) }

// AppendEncode is Encode appending the object to dst.
func (m *Manifest) AppendEncode(dst []byte) []byte {
	start := len(dst)
	loc := m.snapshot.Location
	dst = slices.Grow(dst, len(m.base)+len(m.tail)+len(loc)+snapshotFixed+coreFooterV4)
	dst = append(dst, m.base...)
	dst = append(dst, m.tail...)
	dst = append(dst, loc...)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(loc)))
	dst = binary.LittleEndian.AppendUint64(dst, m.snapshot.ThroughSeq)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(m.snapshot.CreatedMs))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(m.Len()))
	dst = binary.LittleEndian.AppendUint64(dst, m.next)
	dst = binary.LittleEndian.AppendUint64(dst, m.epoch)
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
	return binary.LittleEndian.AppendUint16(dst, ManifestV4)
}

// EncodeManifestV1 writes m as a buffer (v1) manifest, the form the Rust
// buffer reads. It fails, wrapping ErrInvalid, when v1 cannot hold m: an
// entry has Count > 0 (v1 sequences are per entry) or a snapshot pointer
// (any non-zero field) is set.
func EncodeManifestV1(m *Manifest) ([]byte, error) {
	if m.snapshot != (Snapshot{}) {
		return nil, errorf(ErrInvalid, "manifest v1 cannot hold a snapshot pointer")
	}
	size := coreFooterV1
	for i := range m.Len() {
		r := m.raw(i)
		if c := binary.LittleEndian.Uint32(r[12:]); c != 0 {
			return nil, errorf(ErrInvalid, "manifest v1 cannot hold entry %d with count %d", i, c)
		}
		size += len(r) - 4
	}
	out := make([]byte, 0, size)
	for i := range m.Len() {
		r := m.raw(i)
		out = binary.LittleEndian.AppendUint32(out, binary.LittleEndian.Uint32(r)-4)
		out = append(out, r[4:12]...) // sequence
		out = append(out, r[16:]...)  // loc_len onwards
	}
	out = binary.LittleEndian.AppendUint32(out, uint32(m.Len()))
	out = binary.LittleEndian.AppendUint64(out, m.next)
	out = binary.LittleEndian.AppendUint64(out, m.epoch)
	return binary.LittleEndian.AppendUint16(out, ManifestV1), nil
}

// ParseManifest decodes a manifest of any version (1-4) with the strict
// reader of FORMATS.md §3.7. In order:
//
//   - fewer than 22 bytes: ErrTruncated;
//   - a version other than 1-4: ErrUnsupportedVersion;
//   - fewer bytes than the version's minimum (22/40/40/44): ErrTruncated;
//   - v4 CRC-32C mismatch: ErrCorrupt (before anything else is read);
//   - a snapshot location longer than the space in front of it: ErrCorrupt;
//   - any entry that overruns its region or its own entry_len, is shorter
//     than the minimum, has spare bytes, or has a location that is not
//     UTF-8: ErrCorrupt;
//   - a number of entries different from entries_count: ErrCorrupt.
//
// Every entry is validated here, so Entry and the iterators never fail.
// ParseManifest does not retain b. Memory use is bounded by len(b): counts
// are checked against the bytes present before anything is allocated.
func ParseManifest(b []byte) (*Manifest, error) {
	n := len(b)
	if n < coreFooterV1 {
		return nil, errorf(ErrTruncated, "manifest of %d bytes is too short for a footer (at least %d)", n, coreFooterV1)
	}
	version := binary.LittleEndian.Uint16(b[n-2:])
	var minLen, core int
	switch version {
	case ManifestV1:
		minLen, core = coreFooterV1, coreFooterV1
	case ManifestV2, ManifestV3:
		minLen, core = coreFooterV1+snapshotFixed, coreFooterV1
	case ManifestV4:
		minLen, core = coreFooterV4+snapshotFixed, coreFooterV4
	default:
		return nil, errorf(ErrUnsupportedVersion, "manifest version %d", version)
	}
	if n < minLen {
		return nil, errorf(ErrTruncated, "manifest v%d of %d bytes is too short (at least %d)", version, n, minLen)
	}
	if version == ManifestV4 {
		stored := binary.LittleEndian.Uint32(b[n-6:])
		if got := crc32.Checksum(b[:n-6], castagnoli); got != stored {
			return nil, errorf(ErrCorrupt, "manifest crc32c mismatch: stored %08x, computed %08x", stored, got)
		}
	}
	f := n - core
	m := &Manifest{
		version: version,
		next:    binary.LittleEndian.Uint64(b[f+4:]),
		epoch:   binary.LittleEndian.Uint64(b[f+12:]),
	}
	entriesCount := binary.LittleEndian.Uint32(b[f:])
	regionEnd := f
	if version >= ManifestV2 {
		p := f - snapshotFixed
		locLen := int(binary.LittleEndian.Uint16(b[p:]))
		if locLen > p {
			return nil, errorf(ErrCorrupt, "manifest snapshot location length %d overruns the %d bytes in front of it", locLen, p)
		}
		m.snapshot = Snapshot{
			Location:   string(b[p-locLen : p]),
			ThroughSeq: binary.LittleEndian.Uint64(b[p+2:]),
			CreatedMs:  int64(binary.LittleEndian.Uint64(b[p+10:])),
		}
		regionEnd = p - locLen
	}
	region := b[:regionEnd]
	counted := version >= ManifestV3
	minEntry := 4 + legacyEntryMin
	if counted {
		minEntry = 4 + countedEntryMin
	}
	if uint64(entriesCount) > uint64(len(region)/minEntry) {
		return nil, errorf(ErrCorrupt, "manifest entries_count %d cannot fit an entries region of %d bytes", entriesCount, len(region))
	}
	// Both allocations are bounded by len(b) now.
	offs := make([]int, 0, entriesCount)
	var base []byte
	if counted {
		base = make([]byte, 0, len(region))
	} else {
		base = make([]byte, 0, len(region)+4*int(entriesCount))
	}
	for p := 0; p < len(region); {
		if len(offs) == int(entriesCount) {
			return nil, errorf(ErrCorrupt, "manifest entries region has %d bytes after entries_count (%d) entries", len(region)-p, entriesCount)
		}
		l, err := checkEntry(region[p:], counted, len(offs))
		if err != nil {
			return nil, err
		}
		e := region[p : p+l]
		offs = append(offs, len(base))
		if counted {
			base = append(base, e...)
		} else {
			// Re-encode as a counted entry with count 0: the body grows
			// by 4 bytes, so the new entry_len is the old one + 4 = l.
			if uint64(l) > math.MaxUint32 {
				return nil, errorf(ErrCorrupt, "manifest entry %d: legacy entry of %d bytes is too long to upgrade", len(offs), l)
			}
			base = binary.LittleEndian.AppendUint32(base, uint32(l))
			base = append(base, e[4:12]...)
			base = append(base, 0, 0, 0, 0)
			base = append(base, e[12:]...)
		}
		p += l
	}
	if len(offs) != int(entriesCount) {
		return nil, errorf(ErrCorrupt, "manifest holds %d entries but entries_count is %d", len(offs), entriesCount)
	}
	if len(base) > 0 {
		m.base = base
	}
	m.baseOffs = offs
	return m, nil
}

// checkEntry validates the entry at the start of b (legacy or counted) and
// returns its length including the entry_len field. Every field is checked
// against the end of the entry (G's rule, stricter than R's).
func checkEntry(b []byte, counted bool, idx int) (int, error) {
	if len(b) < 4 {
		return 0, errorf(ErrCorrupt, "manifest entry %d: truncated entry length field (%d bytes left)", idx, len(b))
	}
	l := binary.LittleEndian.Uint32(b)
	minBody := legacyEntryMin
	if counted {
		minBody = countedEntryMin
	}
	if uint64(l) > uint64(len(b)-4) {
		return 0, errorf(ErrCorrupt, "manifest entry %d: entry_len %d overruns the entries region (%d bytes left)", idx, l, len(b)-4)
	}
	if l < uint32(minBody) {
		return 0, errorf(ErrCorrupt, "manifest entry %d: entry_len %d is below the minimum %d", idx, l, minBody)
	}
	body := b[4 : 4+int(l)]
	q := 8
	if counted {
		q += 4
	}
	locLen := int(binary.LittleEndian.Uint16(body[q:]))
	q += 2
	if locLen > len(body)-q {
		return 0, errorf(ErrCorrupt, "manifest entry %d: location length %d overruns the entry body", idx, locLen)
	}
	if !utf8.Valid(body[q : q+locLen]) {
		return 0, errorf(ErrCorrupt, "manifest entry %d: location is not UTF-8", idx)
	}
	q += locLen
	if len(body)-q < 4 {
		return 0, errorf(ErrCorrupt, "manifest entry %d: truncated metadata count", idx)
	}
	md := binary.LittleEndian.Uint32(body[q:])
	q += 4
	if uint64(md) > uint64((len(body)-q)/mdItemHeader) {
		return 0, errorf(ErrCorrupt, "manifest entry %d: metadata count %d overruns the entry body", idx, md)
	}
	for j := range int(md) {
		if len(body)-q < mdItemHeader {
			return 0, errorf(ErrCorrupt, "manifest entry %d: truncated metadata item %d header", idx, j)
		}
		pl := uint64(binary.LittleEndian.Uint32(body[q+12:]))
		q += mdItemHeader
		if pl > uint64(len(body)-q) {
			return 0, errorf(ErrCorrupt, "manifest entry %d: metadata item %d payload of %d bytes overruns the entry body", idx, j, pl)
		}
		q += int(pl)
	}
	if q != len(body) {
		return 0, errorf(ErrCorrupt, "manifest entry %d: %d spare bytes inside the entry", idx, len(body)-q)
	}
	return 4 + int(l), nil
}
