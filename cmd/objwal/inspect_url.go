package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
)

const inspectURLUsage = `
       objwal inspect [--json] [manifest|segment] URL KEY

Reads the object KEY from the store at URL (mem://, file:///dir, s3://,
gs://, azblob://, blob+...) instead of a local file; KEY is relative to the
URL's prefix, as in "wal/manifest". Without a kind, a KEY whose last element
is 16 hex digits (a segment ordinal, wal/seg/<run>/<ordinal>) is read as a
segment and any other as a manifest. A missing object exits with status 1.
`

// runInspectCmd is the inspect verb: the store form (URL KEY) is handled
// here, the local-file form by runInspect.
func runInspectCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, inspectUsage+inspectURLUsage) }
	asJSON := fs.Bool("json", false, "print one JSON document instead of a summary")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	var kind, rawURL, key string
	switch urlAt := slices.IndexFunc(pos, isStoreURL); {
	case urlAt < 0 && len(pos) > 0:
		return runInspect(ctx, args, stdout, stderr) // the local-file form
	case urlAt == 0 && len(pos) == 2:
		rawURL, key = pos[0], pos[1]
		kind = guessKind(key)
	case urlAt == 1 && len(pos) == 3 && (pos[0] == kindManifest || pos[0] == kindSegment):
		kind, rawURL, key = pos[0], pos[1], pos[2]
	default:
		fs.Usage()
		return 2
	}
	data, err := readStoreObject(ctx, rawURL, key)
	if err != nil {
		fmt.Fprintf(stderr, "objwal inspect: %v\n", err)
		return 1
	}
	if err := inspectObject(stdout, kind, key, data, *asJSON); err != nil {
		fmt.Fprintf(stderr, "objwal inspect: %s %s: %s\n", kind, key, describeError(err))
		return 1
	}
	return 0
}

// isStoreURL reports whether s names a store (scheme://...) rather than a
// local file.
func isStoreURL(s string) bool {
	i := strings.Index(s, "://")
	return i > 0 && !strings.ContainsAny(s[:i], "/\\")
}

// guessKind reads a key whose last element is a 16-digit hex ordinal as a
// segment, any other as a manifest.
func guessKind(key string) string {
	base := path.Base(key)
	if len(base) == 16 && strings.Trim(base, "0123456789abcdefABCDEF") == "" {
		return kindSegment
	}
	return kindManifest
}

// readStoreObject reads one object from the store at rawURL.
func readStoreObject(ctx context.Context, rawURL, key string) ([]byte, error) {
	store, err := openStore(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	data, _, err := store.Get(ctx, key)
	return data, err
}
