package format

import (
	"sync"

	"github.com/klauspost/compress/zstd"
)

// MaxDecodedBlockSize bounds the size of a decompressed segment record block
// (128 MiB, the window limit libzstd applies by default). The shared decoder
// refuses a frame that declares a larger content size before allocating, and
// stops a frame without a declared size once its output passes the limit, so
// a zstd bomb costs at most this much memory. Short of the limit, the
// decoder allocates at most min(declared content size, 32 KiB × compressed
// length): 32 KiB per compressed byte is zstd's own worst case (a 4-byte RLE
// block expands to 128 KiB). EncodeSegment refuses to zstd-compress a block
// larger than this, so it never writes a segment DecodeSegment cannot read.
const MaxDecodedBlockSize = 128 << 20

// zstdCodec holds the package's only mutable state: one encoder and one
// decoder, created on first use and shared. EncodeAll and DecodeAll are safe
// for concurrent use.
var zstdCodec = sync.OnceValues(func() (*zstd.Encoder, *zstd.Decoder) {
	// Default level (about zstd level 3) and options, like objwal's writer:
	// one frame, XXH64 content checksum, an empty input still gives a
	// complete frame (FORMATS.md §2.2).
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		panic("format: zstd encoder: " + err.Error()) // options are constant
	}
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderMaxMemory(MaxDecodedBlockSize),
		zstd.WithDecoderMaxWindow(MaxDecodedBlockSize),
	)
	if err != nil {
		panic("format: zstd decoder: " + err.Error()) // options are constant
	}
	return enc, dec
})

func zstdCompress(dst, src []byte) []byte {
	enc, _ := zstdCodec()
	return enc.EncodeAll(src, dst)
}

func zstdDecompress(src []byte) ([]byte, error) {
	_, dec := zstdCodec()
	return dec.DecodeAll(src, nil)
}
