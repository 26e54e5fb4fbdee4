package format

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"slices"
	"strconv"
)

// Compression is a segment's compression code (FORMATS.md §2.2).
type Compression uint8

// The compression codes. Codes 2-255 are reserved; readers reject them.
const (
	// CompressionNone stores the record block byte for byte.
	CompressionNone Compression = 0
	// CompressionZstd stores the whole record block as one zstd frame.
	CompressionZstd Compression = 1
)

// String returns "none", "zstd" or "unknown(N)".
func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionZstd:
		return "zstd"
	}
	return "unknown(" + strconv.Itoa(int(c)) + ")"
}

// Segment format versions (the u16 at the end of the object).
const (
	// SegmentV1 is the buffer "data batch": a 7-byte footer, no checksum.
	SegmentV1 uint16 = 1
	// SegmentV2 is objwal's default: an 11-byte footer with a CRC-32C.
	SegmentV2 uint16 = 2
)

const (
	segFooterV1 = 7  // compression u8 | record_count u32 | version u16
	segFooterV2 = 11 // compression u8 | record_count u32 | crc32c u32 | version u16
)

// castagnoli is the CRC-32C table; it is never written after
// initialisation, so it is a constant in all but name.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Segment is a decoded segment object.
type Segment struct {
	// Version is SegmentV1 or SegmentV2.
	Version uint16
	// Compression is how the record block was stored.
	Compression Compression
	// Records are the records in append order. When the segment was not
	// compressed they alias the decoded bytes (each with its capacity
	// clipped, so appending to one never overwrites the next).
	Records [][]byte
}

// EncodeSegment frames records into a segment object of the given version
// (SegmentV1 or SegmentV2) and compression. It returns an error wrapping
// ErrInvalid when a record is longer than 2^32-1 bytes, there are more than
// 2^32-1 records, or a zstd block would exceed MaxDecodedBlockSize; and one
// wrapping ErrUnsupportedVersion or ErrUnsupportedCompression for an unknown
// version or code. For CompressionNone the output is byte-identical to the
// objwal and buffer writers'.
func EncodeSegment(records [][]byte, c Compression, version uint16) ([]byte, error) {
	return AppendSegment(nil, records, c, version)
}

// AppendSegment is EncodeSegment appending the object to dst, so callers can
// reuse a buffer. On error dst is returned unchanged (though bytes past its
// length may have been written).
func AppendSegment(dst []byte, records [][]byte, c Compression, version uint16) ([]byte, error) {
	if version != SegmentV1 && version != SegmentV2 {
		return dst, errorf(ErrUnsupportedVersion, "cannot write segment version %d", version)
	}
	if c != CompressionNone && c != CompressionZstd {
		return dst, errorf(ErrUnsupportedCompression, "cannot write segment compression %s", c)
	}
	if err := checkU32Len("record count", len(records)); err != nil {
		return dst, err
	}
	blockLen := 0
	for i, r := range records {
		if uint64(len(r)) > math.MaxUint32 {
			return dst, checkU32Len("record "+strconv.Itoa(i)+" length", len(r))
		}
		blockLen += 4 + len(r)
	}
	start := len(dst)
	out := dst
	if c == CompressionNone {
		out = appendRecordBlock(slices.Grow(out, blockLen+segFooterV2), records)
	} else {
		if blockLen > MaxDecodedBlockSize {
			return dst, errorf(ErrInvalid, "record block of %d bytes exceeds the zstd limit of %d bytes", blockLen, MaxDecodedBlockSize)
		}
		raw := appendRecordBlock(make([]byte, 0, blockLen), records)
		out = zstdCompress(out, raw)
	}
	out = append(out, byte(c))
	out = binary.LittleEndian.AppendUint32(out, uint32(len(records)))
	if version == SegmentV2 {
		out = binary.LittleEndian.AppendUint32(out, crc32.Checksum(out[start:], castagnoli))
	}
	out = binary.LittleEndian.AppendUint16(out, version)
	return out, nil
}

// checkU32Len reports a length that does not fit a u32 field.
func checkU32Len(what string, n int) error {
	if uint64(n) > math.MaxUint32 {
		return errorf(ErrInvalid, "%s %d does not fit a u32", what, n)
	}
	return nil
}

func appendRecordBlock(b []byte, records [][]byte) []byte {
	for _, r := range records {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(r)))
		b = append(b, r...)
	}
	return b
}

// DecodeSegment decodes a segment object of any version with the strict
// reader of FORMATS.md §2.7, including its optional strict extra: bytes left
// after the last record are ErrCorrupt. In order:
//
//   - fewer than 7 bytes, or a v2 object under 11 bytes: ErrTruncated;
//   - a version other than 1 or 2: ErrUnsupportedVersion;
//   - v2 CRC-32C mismatch: ErrCorrupt (checked before anything else is read);
//   - a compression code other than 0 or 1: ErrUnsupportedCompression;
//   - a zstd failure, or a block decompressing past MaxDecodedBlockSize:
//     ErrCorrupt (a zero-byte zstd block reads as an empty block);
//   - record_count larger than the block could hold, or a record length or
//     data running past the block: ErrTruncated.
//
// Memory use is bounded by the input: the record table is at most 6 times
// the record block (24 bytes of slice header per record of at least 4
// bytes), and an uncompressed segment's records alias b. For zstd see
// MaxDecodedBlockSize.
func DecodeSegment(b []byte) (*Segment, error) {
	n := len(b)
	if n < segFooterV1 {
		return nil, errorf(ErrTruncated, "segment of %d bytes is too small for a footer (at least %d)", n, segFooterV1)
	}
	version := binary.LittleEndian.Uint16(b[n-2:])
	var footer int
	switch version {
	case SegmentV1:
		footer = segFooterV1
	case SegmentV2:
		footer = segFooterV2
		if n < footer {
			return nil, errorf(ErrTruncated, "segment of %d bytes is too small for a v2 footer (at least %d)", n, footer)
		}
		stored := binary.LittleEndian.Uint32(b[n-6:])
		if got := crc32.Checksum(b[:n-6], castagnoli); got != stored {
			return nil, errorf(ErrCorrupt, "segment crc32c mismatch: stored %08x, computed %08x", stored, got)
		}
	default:
		return nil, errorf(ErrUnsupportedVersion, "segment version %d", version)
	}
	c := Compression(b[n-footer])
	count := binary.LittleEndian.Uint32(b[n-footer+1:])
	block := b[:n-footer]
	switch c {
	case CompressionNone:
	case CompressionZstd:
		raw, err := zstdDecompress(block)
		if err != nil {
			return nil, errorf(ErrCorrupt, "segment zstd block of %d bytes: %v", len(block), err)
		}
		block = raw
	default:
		return nil, errorf(ErrUnsupportedCompression, "segment compression code %d", uint8(c))
	}
	if uint64(count) > uint64(len(block)/4) {
		return nil, errorf(ErrTruncated, "segment record_count %d cannot fit a record block of %d bytes", count, len(block))
	}
	records := make([][]byte, count)
	p := 0
	for i := range records {
		if len(block)-p < 4 {
			return nil, errorf(ErrTruncated, "segment record %d: truncated record length at offset %d", i, p)
		}
		l := uint64(binary.LittleEndian.Uint32(block[p:]))
		p += 4
		if l > uint64(len(block)-p) {
			return nil, errorf(ErrTruncated, "segment record %d: length %d runs past the block end (%d bytes left)", i, l, len(block)-p)
		}
		end := p + int(l)
		records[i] = block[p:end:end]
		p = end
	}
	if p != len(block) {
		return nil, errorf(ErrCorrupt, "segment has %d bytes after its %d records", len(block)-p, count)
	}
	return &Segment{Version: version, Compression: c, Records: records}, nil
}
