package format

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// decodeAny runs the decoder for the vector's kind.
func decodeAny(kind string, b []byte) error {
	if kind == "segment" {
		_, err := DecodeSegment(b)
		return err
	}
	_, err := ParseManifest(b)
	return err
}

// Every prefix of every vector (a physically cut-off object) is rejected
// with one of the four classes, and never panics; every suffix (leading
// bytes lost) never panics either.
func TestVectorTruncations(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.File, func(t *testing.T) {
			for n := range len(v.data) {
				err := decodeAny(v.Kind, v.data[:n])
				if assert.Error(t, err, "prefix of %d bytes", n) {
					assertOneClass(t, err)
				}
				if err := decodeAny(v.Kind, v.data[len(v.data)-n:]); err != nil {
					assertOneClass(t, err)
				}
			}
		})
	}
}

// Every single-bit flip of a checksummed object (segment v2, manifest v4)
// is detected; in the other versions a flip never panics and any error has
// a class.
func TestVectorBitFlips(t *testing.T) {
	for _, v := range loadVectors(t) {
		checksummed := (v.Kind == "segment" && v.Version == SegmentV2) || (v.Kind == "manifest" && v.Version == ManifestV4)
		t.Run(v.File, func(t *testing.T) {
			require.NoError(t, decodeAny(v.Kind, v.data))
			b := append([]byte(nil), v.data...)
			for i := range b {
				for bit := range 8 {
					b[i] ^= 1 << bit
					err := decodeAny(v.Kind, b)
					if checksummed {
						assert.Error(t, err, "byte %d bit %d", i, bit)
					}
					if err != nil {
						assertOneClass(t, err)
					}
					b[i] ^= 1 << bit
				}
			}
		})
	}
}
