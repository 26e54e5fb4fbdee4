package format_test

import (
	"errors"
	"fmt"

	"github.com/objwal/objwal/format"
)

func ExampleEncodeSegment() {
	records := [][]byte{[]byte("put:a=1"), []byte("put:b=2"), {}}
	b, err := format.EncodeSegment(records, format.CompressionZstd, format.SegmentV2)
	if err != nil {
		panic(err)
	}
	seg, err := format.DecodeSegment(b)
	if err != nil {
		panic(err)
	}
	fmt.Println(seg.Version, seg.Compression, len(seg.Records))
	for _, r := range seg.Records {
		fmt.Printf("%q\n", r)
	}
	// Output:
	// 2 zstd 3
	// "put:a=1"
	// "put:b=2"
	// ""
}

func ExampleDecodeSegment() {
	b, _ := format.EncodeSegment([][]byte{[]byte("hello")}, format.CompressionNone, format.SegmentV2)
	b[0] ^= 0xff // damage the object
	_, err := format.DecodeSegment(b)
	fmt.Println(errors.Is(err, format.ErrCorrupt), format.ErrorClass(err))
	_, err = format.DecodeSegment(b[:5])
	fmt.Println(errors.Is(err, format.ErrTruncated))
	// Output:
	// true corrupt
	// true
}

func ExampleManifest() {
	m := format.NewManifest()
	m.SetEpoch(format.NextEpoch(m.Epoch()))
	for i, n := range []uint32{3, 3, 2, 3} {
		md := []format.Metadata{{StartIndex: 0, IngestionMs: 1767225600000, Payload: []byte(fmt.Sprint("group", i))}}
		seq, err := m.Append(fmt.Sprintf("wal/seg/run/%016x", i), n, md)
		if err != nil {
			panic(err)
		}
		fmt.Println("appended", seq)
	}
	m.SetSnapshot(format.Snapshot{Location: "wal/snapshots/base.ckpt", ThroughSeq: 5})
	fmt.Println("dropped", m.TruncateThrough(5))

	parsed, err := format.ParseManifest(m.Encode())
	if err != nil {
		panic(err)
	}
	e, _, _ := parsed.Locate(9)
	fmt.Println("record 9 is in", e.Location, "at index", 9-e.Sequence)
	for e := range parsed.EntriesFrom(7) {
		fmt.Printf("v%d [%d,%d) %s\n", parsed.Version(), e.Sequence, e.End(), e.Location)
	}
	fmt.Println("next", parsed.NextSequence(), "epoch", parsed.Epoch(), "snapshot", parsed.Snapshot().Location)
	// Output:
	// appended 0
	// appended 3
	// appended 6
	// appended 8
	// dropped 2
	// record 9 is in wal/seg/run/0000000000000003 at index 1
	// v4 [6,8) wal/seg/run/0000000000000002
	// v4 [8,11) wal/seg/run/0000000000000003
	// next 11 epoch 1 snapshot wal/snapshots/base.ckpt
}
