package format

import (
	"bytes"
	"errors"
	"hash/crc32"
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rawSegment assembles a segment from parts, computing a correct v2 CRC, so
// that each test breaks exactly one thing.
func rawSegment(block []byte, code byte, count uint32, version uint16) []byte {
	b := append([]byte(nil), block...)
	b = append(b, code)
	b = le32(b, count)
	if version == SegmentV2 {
		b = le32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	}
	return le16(b, version)
}

// recordBlock is the uncompressed record block of records.
func recordBlock(records ...string) []byte {
	var b []byte
	for _, r := range records {
		b = le32(b, uint32(len(r)))
		b = append(b, r...)
	}
	return b
}

// allocBytes returns the bytes allocated while f runs (TotalAlloc is
// cumulative, so a GC during f does not hide anything).
func allocBytes(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestDecodeSegmentErrors(t *testing.T) {
	hello := recordBlock("hello", "world")
	garbage := []byte("this is not a zstd frame at all")
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"6 bytes", []byte{0, 0, 0, 0, 0, 1}, ErrTruncated},
		{"v2 under 11 bytes", []byte{0, 0, 0, 0, 0, 0, 0, 0, 2, 0}, ErrTruncated},
		{"v2 exactly 7 bytes", []byte{0, 0, 0, 0, 0, 2, 0}, ErrTruncated},
		{"version 0", rawSegment(hello, 0, 2, 0), ErrUnsupportedVersion},
		{"version 3", rawSegment(hello, 0, 2, 3), ErrUnsupportedVersion},
		{"version 0xffff", rawSegment(hello, 0, 2, 0xffff), ErrUnsupportedVersion},
		{"v2 crc mismatch", flip(rawSegment(hello, 0, 2, SegmentV2), 0), ErrCorrupt},
		{"v2 crc field damaged", flip(rawSegment(hello, 0, 2, SegmentV2), len(hello)+5), ErrCorrupt},
		// v2: the CRC comes first even when the compression byte is bad.
		{"v2 crc before compression", flip(rawSegment(hello, 7, 2, SegmentV2), 0), ErrCorrupt},
		{"v1 compression 2", rawSegment(hello, 2, 2, SegmentV1), ErrUnsupportedCompression},
		{"v2 compression 255", rawSegment(hello, 255, 2, SegmentV2), ErrUnsupportedCompression},
		{"v1 zstd garbage", rawSegment(garbage, 1, 0, SegmentV1), ErrCorrupt},
		{"v2 zstd garbage", rawSegment(garbage, 1, 0, SegmentV2), ErrCorrupt},
		{"v1 zstd truncated frame", rawSegment(zstdCompress(nil, hello)[:10], 1, 2, SegmentV1), ErrCorrupt},
		{"count larger than block", rawSegment(hello, 0, 100, SegmentV1), ErrTruncated},
		{"count 0xffffffff", rawSegment(hello, 0, math.MaxUint32, SegmentV1), ErrTruncated},
		{"truncated record length", rawSegment(append(recordBlock("hello"), 1, 0), 0, 2, SegmentV1), ErrTruncated},
		{"record data overrun", rawSegment(append(le32(nil, 10), "abc"...), 0, 1, SegmentV2), ErrTruncated},
		{"bytes after last record", rawSegment(hello, 0, 1, SegmentV1), ErrCorrupt},
		{"v2 bytes after last record", rawSegment(append(recordBlock("a"), 9), 0, 1, SegmentV2), ErrCorrupt},
		{"zero-byte zstd block with records", rawSegment(nil, 1, 1, SegmentV1), ErrTruncated},
		{"zstd block with trailing bytes", rawSegment(zstdCompress(nil, hello), 1, 1, SegmentV2), ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seg, err := DecodeSegment(tc.in)
			require.Error(t, err)
			assert.Nil(t, seg)
			t.Log(err)
			assert.ErrorIs(t, err, tc.want)
			assertOneClass(t, err)
		})
	}
}

// assertOneClass checks err wraps exactly one of the four decoder classes.
func assertOneClass(t *testing.T, err error) {
	t.Helper()
	n := 0
	for _, c := range []error{ErrTruncated, ErrCorrupt, ErrUnsupportedVersion, ErrUnsupportedCompression} {
		if errors.Is(err, c) {
			n++
		}
	}
	assert.Equal(t, 1, n, "error %q must wrap exactly one class", err)
	assert.NotErrorIs(t, err, ErrInvalid)
}

func flip(b []byte, i int) []byte {
	b = append([]byte(nil), b...)
	b[i] ^= 1
	return b
}

func TestDecodeSegmentAccepts(t *testing.T) {
	t.Run("smallest v1", func(t *testing.T) {
		seg, err := DecodeSegment([]byte{0, 0, 0, 0, 0, 1, 0})
		require.NoError(t, err)
		assert.Equal(t, &Segment{Version: SegmentV1, Compression: CompressionNone, Records: [][]byte{}}, seg)
	})
	t.Run("smallest v2", func(t *testing.T) {
		seg, err := DecodeSegment(rawSegment(nil, 0, 0, SegmentV2))
		require.NoError(t, err)
		assert.Empty(t, seg.Records)
		assert.Equal(t, SegmentV2, seg.Version)
	})
	t.Run("zero-byte zstd block reads as empty", func(t *testing.T) {
		seg, err := DecodeSegment(rawSegment(nil, 1, 0, SegmentV2))
		require.NoError(t, err)
		assert.Empty(t, seg.Records)
		assert.Equal(t, CompressionZstd, seg.Compression)
	})
	t.Run("concatenated zstd frames", func(t *testing.T) {
		block := zstdCompress(zstdCompress(nil, recordBlock("a", "bc")), recordBlock("", "def"))
		seg, err := DecodeSegment(rawSegment(block, 1, 4, SegmentV1))
		require.NoError(t, err)
		assertSameRecords(t, [][]byte{[]byte("a"), []byte("bc"), {}, []byte("def")}, seg.Records)
	})
	t.Run("uncompressed records alias the input with clipped capacity", func(t *testing.T) {
		in := rawSegment(recordBlock("ab", "cd"), 0, 2, SegmentV2)
		seg, err := DecodeSegment(in)
		require.NoError(t, err)
		assert.Equal(t, &in[4], &seg.Records[0][0])
		assert.Equal(t, 2, cap(seg.Records[0]))
		_ = append(seg.Records[0], 'X')
		assert.Equal(t, "cd", string(seg.Records[1]))
	})
}

func TestEncodeSegment(t *testing.T) {
	records := [][]byte{[]byte("hello"), nil, bytes.Repeat([]byte("xyz"), 1000)}
	for _, v := range []uint16{SegmentV1, SegmentV2} {
		for _, c := range []Compression{CompressionNone, CompressionZstd} {
			b, err := EncodeSegment(records, c, v)
			require.NoError(t, err)
			seg, err := DecodeSegment(b)
			require.NoError(t, err)
			assert.Equal(t, v, seg.Version)
			assert.Equal(t, c, seg.Compression)
			assertSameRecords(t, records, seg.Records)

			// AppendSegment leaves the prefix alone and appends the same.
			pre := []byte("prefix")
			b2, err := AppendSegment(pre, records, c, v)
			require.NoError(t, err)
			assert.Equal(t, "prefix", string(b2[:6]))
			seg2, err := DecodeSegment(b2[6:])
			require.NoError(t, err)
			assertSameRecords(t, records, seg2.Records)
		}
	}
	t.Run("zstd compresses", func(t *testing.T) {
		b, err := EncodeSegment(records, CompressionZstd, SegmentV2)
		require.NoError(t, err)
		assert.Less(t, len(b), 3000)
	})
	t.Run("empty zstd segment still holds a frame", func(t *testing.T) {
		b, err := EncodeSegment(nil, CompressionZstd, SegmentV2)
		require.NoError(t, err)
		assert.Greater(t, len(b), segFooterV2, "an empty block is one complete frame, not zero bytes")
		assert.Equal(t, []byte{0x28, 0xb5, 0x2f, 0xfd}, b[:4])
		seg, err := DecodeSegment(b)
		require.NoError(t, err)
		assert.Empty(t, seg.Records)
	})
	t.Run("unknown version", func(t *testing.T) {
		_, err := EncodeSegment(records, CompressionNone, 3)
		assert.ErrorIs(t, err, ErrUnsupportedVersion)
	})
	t.Run("unknown compression", func(t *testing.T) {
		_, err := EncodeSegment(records, Compression(2), SegmentV2)
		assert.ErrorIs(t, err, ErrUnsupportedCompression)
		assert.ErrorContains(t, err, "unknown(2)")
	})
	t.Run("u32 limits", func(t *testing.T) {
		// A real 4 GiB record is too big for a unit test; the check itself:
		assert.NoError(t, checkU32Len("x", math.MaxUint32))
		assert.ErrorIs(t, checkU32Len("x", math.MaxUint32+1), ErrInvalid)
	})
}

func TestCompressionString(t *testing.T) {
	assert.Equal(t, "none", CompressionNone.String())
	assert.Equal(t, "zstd", CompressionZstd.String())
	assert.Equal(t, "unknown(7)", Compression(7).String())
}

// zstdFrameHeader returns a zstd frame header, single segment, declaring
// contentSize as its 4-byte content size.
func zstdFrameHeader(contentSize uint32) []byte {
	b := []byte{0x28, 0xb5, 0x2f, 0xfd, 0xa0} // magic; FCS 4 bytes, single segment
	return le32(b, contentSize)
}

// rleBlock is a zstd RLE block repeating b n times (n <= 128 KiB).
func rleBlock(b byte, n int, last bool) []byte {
	h := uint32(n)<<3 | 1<<1
	if last {
		h |= 1
	}
	return []byte{byte(h), byte(h >> 8), byte(h >> 16), b}
}

func TestDecodeSegmentZstdBomb(t *testing.T) {
	// A frame claiming 1 GiB of content is refused before any allocation.
	bomb := append(zstdFrameHeader(1<<30), rleBlock(0, 1<<17, true)...)
	in := rawSegment(bomb, 1, 0, SegmentV2)
	var err error
	n := allocBytes(func() { _, err = DecodeSegment(in) })
	assert.ErrorIs(t, err, ErrCorrupt)
	assert.Less(t, n, uint64(1<<20), "bytes allocated")

	// A frame that lies about its size is caught too.
	short := append(zstdFrameHeader(100), rleBlock(0, 1<<17, true)...)
	_, err = DecodeSegment(rawSegment(short, 1, 0, SegmentV2))
	assert.ErrorIs(t, err, ErrCorrupt)

	// Honest expansion is fine: 4 bytes of RLE block become 128 KiB of
	// zero-length records.
	ok := append(zstdFrameHeader(1<<17), rleBlock(0, 1<<17, true)...)
	seg, err := DecodeSegment(rawSegment(ok, 1, 1<<15, SegmentV1))
	require.NoError(t, err)
	assert.Len(t, seg.Records, 1<<15)
}

func TestDecodeSegmentHugeCountDoesNotAllocate(t *testing.T) {
	in := rawSegment(recordBlock("a"), 0, math.MaxUint32, SegmentV1)
	n := allocBytes(func() { _, _ = DecodeSegment(in) })
	assert.Less(t, n, uint64(4096))
}
