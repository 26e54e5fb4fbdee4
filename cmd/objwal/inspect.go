package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/objwal/objwal/format"
)

const inspectUsage = `usage: objwal inspect [--json] manifest|segment FILE

Decodes a manifest or segment object (any format version) from a local file
and prints a readable summary, or with --json one JSON document:

  manifest: {"version", "epoch", "next_sequence", "entries_count",
             "snapshot": {"location", "through_seq", "created_ms"},
             "entries": [{"sequence", "count", "location",
                          "metadata": [{"start_index", "ingestion_ms", "payload"}]}]}
  segment:  {"version", "compression", "record_count", "records": [...]}

Records and payloads are base64 in JSON. An object that does not decode exits
with status 1 and "<class>: <reason>" on stderr, where class is one of
truncated, corrupt, unsupported-version, unsupported-compression.
`

// Object kinds inspect understands.
const (
	kindManifest = "manifest"
	kindSegment  = "segment"
)

// runInspect is the inspect verb: parse arguments, read the object's bytes,
// then decode and render them. Reading is kept apart from decoding so that
// other sources (a store URL and key) only need a new reader.
func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, inspectUsage) }
	asJSON := fs.Bool("json", false, "print one JSON document instead of a summary")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if len(pos) != 2 || (pos[0] != kindManifest && pos[0] != kindSegment) {
		fs.Usage()
		return 2
	}
	kind, name := pos[0], pos[1]
	data, err := readLocalObject(ctx, name)
	if err != nil {
		fmt.Fprintf(stderr, "objwal inspect: %v\n", err)
		return 1
	}
	if err := inspectObject(stdout, kind, name, data, *asJSON); err != nil {
		fmt.Fprintf(stderr, "objwal inspect: %s %s: %s\n", kind, name, describeError(err))
		return 1
	}
	return 0
}

// parseInterspersed parses flags wherever they appear among the positional
// arguments (so both "inspect --json segment F" and "inspect segment F
// --json" work) and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// readLocalObject reads an object from a local file.
func readLocalObject(_ context.Context, path string) ([]byte, error) {
	return os.ReadFile(path)
}

// describeError renders a decoding error as "class: reason", class being
// the format package's error class (truncated, corrupt, ...).
func describeError(err error) string {
	class := format.ErrorClass(err)
	if class == "" {
		return err.Error()
	}
	msg := err.Error()
	for _, s := range []error{format.ErrTruncated, format.ErrCorrupt, format.ErrUnsupportedVersion, format.ErrUnsupportedCompression, format.ErrInvalid} {
		if errors.Is(err, s) {
			msg = strings.TrimPrefix(msg, s.Error()+": ")
			break
		}
	}
	return class + ": " + msg
}

// inspectObject decodes data as kind ("manifest" or "segment") and writes
// it to w, as JSON or as a summary; name labels the summary. It returns the
// decoding error, wrapping one of the format package's classes.
func inspectObject(w io.Writer, kind, name string, data []byte, asJSON bool) error {
	var doc any
	switch kind {
	case kindManifest:
		m, err := format.ParseManifest(data)
		if err != nil {
			return err
		}
		if !asJSON {
			return writeManifestSummary(w, name, len(data), m)
		}
		doc = manifestDoc(m)
	case kindSegment:
		seg, err := format.DecodeSegment(data)
		if err != nil {
			return err
		}
		if !asJSON {
			return writeSegmentSummary(w, name, len(data), seg)
		}
		doc = segmentDoc(seg)
	default:
		return fmt.Errorf("unknown object kind %q (want manifest or segment)", kind)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

// The JSON documents. Field names are part of the tool's interface.
type (
	manifestJSON struct {
		Version      uint16       `json:"version"`
		Epoch        uint64       `json:"epoch"`
		NextSequence uint64       `json:"next_sequence"`
		EntriesCount int          `json:"entries_count"`
		Snapshot     snapshotJSON `json:"snapshot"`
		Entries      []entryJSON  `json:"entries"`
	}
	snapshotJSON struct {
		Location   string `json:"location"`
		ThroughSeq uint64 `json:"through_seq"`
		CreatedMs  int64  `json:"created_ms"`
	}
	entryJSON struct {
		Sequence uint64         `json:"sequence"`
		Count    uint32         `json:"count"`
		Location string         `json:"location"`
		Metadata []metadataJSON `json:"metadata"`
	}
	metadataJSON struct {
		StartIndex  uint32 `json:"start_index"`
		IngestionMs int64  `json:"ingestion_ms"`
		Payload     string `json:"payload"` // base64
	}
	segmentJSON struct {
		Version     uint16   `json:"version"`
		Compression string   `json:"compression"`
		RecordCount int      `json:"record_count"`
		Records     []string `json:"records"` // base64
	}
)

func manifestDoc(m *format.Manifest) manifestJSON {
	s := m.Snapshot()
	doc := manifestJSON{
		Version:      m.Version(),
		Epoch:        m.Epoch(),
		NextSequence: m.NextSequence(),
		EntriesCount: m.Len(),
		Snapshot:     snapshotJSON{Location: s.Location, ThroughSeq: s.ThroughSeq, CreatedMs: s.CreatedMs},
		Entries:      make([]entryJSON, 0, m.Len()),
	}
	for e := range m.Entries() {
		ej := entryJSON{Sequence: e.Sequence, Count: e.Count, Location: e.Location, Metadata: make([]metadataJSON, 0, len(e.Metadata))}
		for _, md := range e.Metadata {
			ej.Metadata = append(ej.Metadata, metadataJSON{StartIndex: md.StartIndex, IngestionMs: md.IngestionMs, Payload: base64.StdEncoding.EncodeToString(md.Payload)})
		}
		doc.Entries = append(doc.Entries, ej)
	}
	return doc
}

func segmentDoc(seg *format.Segment) segmentJSON {
	doc := segmentJSON{
		Version:     seg.Version,
		Compression: seg.Compression.String(),
		RecordCount: len(seg.Records),
		Records:     make([]string, 0, len(seg.Records)),
	}
	for _, r := range seg.Records {
		doc.Records = append(doc.Records, base64.StdEncoding.EncodeToString(r))
	}
	return doc
}

func writeManifestSummary(w io.Writer, name string, size int, m *format.Manifest) error {
	ew := &errWriter{w: w}
	ew.printf("manifest %s: version %d, %d bytes\n", name, m.Version(), size)
	ew.printf("  epoch          %d\n", m.Epoch())
	ew.printf("  next_sequence  %d\n", m.NextSequence())
	ew.printf("  entries        %d\n", m.Len())
	if s := m.Snapshot(); s.IsZero() {
		ew.printf("  snapshot       none\n")
	} else {
		ew.printf("  snapshot       %s through %d, created %s\n", s.Location, s.ThroughSeq, millis(s.CreatedMs))
	}
	for e := range m.Entries() {
		note := ""
		if e.Count == 0 {
			note = " (legacy entry: every record has sequence " + fmt.Sprint(e.Sequence) + ")"
		}
		ew.printf("  [%d, %d) count %d  %s%s\n", e.Sequence, e.End(), e.Count, e.Location, note)
		for _, md := range e.Metadata {
			ew.printf("      from record %d: ingested %s, payload %s\n", md.StartIndex, millis(md.IngestionMs), printable(md.Payload))
		}
	}
	return ew.err
}

func writeSegmentSummary(w io.Writer, name string, size int, seg *format.Segment) error {
	ew := &errWriter{w: w}
	total := 0
	for _, r := range seg.Records {
		total += len(r)
	}
	ew.printf("segment %s: version %d, %d bytes, compression %s, %d records, %d record bytes\n",
		name, seg.Version, size, seg.Compression, len(seg.Records), total)
	for i, r := range seg.Records {
		ew.printf("  %6d  %6d B  %s\n", i, len(r), printable(r))
	}
	return ew.err
}

// millis renders Unix milliseconds as UTC time plus the raw number.
func millis(ms int64) string {
	return fmt.Sprintf("%s (%d)", time.UnixMilli(ms).UTC().Format(time.RFC3339Nano), ms)
}

// printable shows bytes as a quoted string when they are UTF-8 text and as
// hex otherwise, cut at 64 bytes.
func printable(b []byte) string {
	const limit = 64
	cut := ""
	if len(b) > limit {
		b, cut = b[:limit], fmt.Sprintf("... (%d more bytes)", len(b)-limit)
	}
	if utf8.Valid(b) && !strings.ContainsFunc(string(b), func(r rune) bool { return r < ' ' && r != '\t' }) {
		return fmt.Sprintf("%q%s", b, cut)
	}
	return fmt.Sprintf("hex:%x%s", b, cut)
}

// errWriter keeps the first write error so rendering code stays linear.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
