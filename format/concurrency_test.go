package format

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The shared zstd encoder/decoder and clones of one manifest are used from
// many goroutines at once; run under -race.
func TestConcurrentUse(t *testing.T) {
	base := NewManifest()
	for i := range 10 {
		_, err := base.Append(fmt.Sprint("seg/", i), 2, nil)
		require.NoError(t, err)
	}
	want := base.Encode()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			records := [][]byte{[]byte(fmt.Sprint("goroutine ", g)), make([]byte, 1000*g)}
			for range 20 {
				b, err := EncodeSegment(records, CompressionZstd, SegmentV2)
				if !assert.NoError(t, err) {
					return
				}
				seg, err := DecodeSegment(b)
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, string(records[0]), string(seg.Records[0]))

				c := base.Clone()
				_, err = c.Append(fmt.Sprint("g", g), 1, nil)
				assert.NoError(t, err)
				c.TruncateThrough(3)
				_, err = ParseManifest(c.Encode())
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, want, base.Encode())
}
