package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// vectorDir holds the shared test vectors, beside the main checkout.
const vectorDir = "../../../shared/vectors"

func vectorPath(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(vectorDir, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("shared vectors missing (want %s beside the main checkout): %v", vectorDir, err)
	}
	return p
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestInspectManifestJSON(t *testing.T) {
	code, out, errOut := runCLI(t, "inspect", "manifest", vectorPath(t, "manifest_v4_snapshot.bin"), "--json")
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, errOut)
	assert.JSONEq(t, `{
		"version": 4, "epoch": 7, "next_sequence": 11, "entries_count": 2,
		"snapshot": {"location": "wal/snapshots/base-0000000000000005.ckpt", "through_seq": 5, "created_ms": 1767225600000},
		"entries": [
			{"sequence": 6, "count": 2, "location": "wal/seg/01JZ8X6E3M4N5P6Q7R8S9T0V1W/0000000000000003",
			 "metadata": [{"start_index": 0, "ingestion_ms": 1767225600123, "payload": "ZzE="}]},
			{"sequence": 8, "count": 3, "location": "wal/seg/01JZ8X6E3M4N5P6Q7R8S9T0V1W/0000000000000004",
			 "metadata": [{"start_index": 0, "ingestion_ms": 1767225600456, "payload": "ZzI="},
			              {"start_index": 1, "ingestion_ms": 1767225600456, "payload": "ZzM="}]}
		]}`, out)
}

func TestInspectManifestJSONEmptyListsAndLegacy(t *testing.T) {
	code, out, _ := runCLI(t, "inspect", "--json", "manifest", vectorPath(t, "manifest_v1_empty.bin"))
	require.Equal(t, 0, code)
	assert.JSONEq(t, `{"version": 1, "epoch": 1, "next_sequence": 0, "entries_count": 0,
		"snapshot": {"location": "", "through_seq": 0, "created_ms": 0}, "entries": []}`, out)

	code, out, _ = runCLI(t, "inspect", "manifest", "--json", vectorPath(t, "manifest_v1_2entries.bin"))
	require.Equal(t, 0, code)
	var doc struct {
		Entries []struct {
			Count    int `json:"count"`
			Metadata []struct {
				Payload *string `json:"payload"`
			} `json:"metadata"`
		} `json:"entries"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	require.Len(t, doc.Entries, 2)
	assert.Equal(t, 0, doc.Entries[0].Count)
	require.Len(t, doc.Entries[0].Metadata, 2)
	require.NotNil(t, doc.Entries[0].Metadata[1].Payload, "an empty payload is \"\", not null")
	assert.Equal(t, "", *doc.Entries[0].Metadata[1].Payload)
	assert.NotNil(t, doc.Entries[1].Metadata, "no metadata is [], not null")
	assert.Contains(t, out, `"metadata": []`)
}

func TestInspectSegmentJSON(t *testing.T) {
	for _, f := range []string{"seg_v1_none.bin", "seg_v1_zstd.bin", "seg_v2_none.bin", "seg_v2_zstd.bin"} {
		code, out, errOut := runCLI(t, "inspect", "segment", "--json", vectorPath(t, f))
		require.Equal(t, 0, code, errOut)
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &doc))
		assert.Equal(t, float64(4), doc["record_count"], f)
		assert.Equal(t, []any{"aGVsbG8=", "d29ybGQ=", "", "AAH+/w=="}, doc["records"], f)
		assert.Contains(t, []any{"none", "zstd"}, doc["compression"])
		assert.Contains(t, []any{float64(1), float64(2)}, doc["version"])
	}
}

func TestInspectSummaries(t *testing.T) {
	code, out, _ := runCLI(t, "inspect", "segment", vectorPath(t, "seg_v2_one_record.bin"))
	require.Equal(t, 0, code)
	assert.Contains(t, out, "version 2")
	assert.Contains(t, out, "compression none, 1 records")
	assert.Contains(t, out, `"put:a=1"`)

	code, out, _ = runCLI(t, "inspect", "segment", vectorPath(t, "seg_v1_none.bin"))
	require.Equal(t, 0, code)
	assert.Contains(t, out, "hex:0001feff", "binary records print as hex")

	code, out, _ = runCLI(t, "inspect", "manifest", vectorPath(t, "manifest_v3.bin"))
	require.Equal(t, 0, code)
	for _, want := range []string{"version 3", "epoch          2", "next_sequence  15", "snapshot       none",
		"[10, 11) count 0", "legacy entry", "[11, 14) count 3", `payload "groupB"`, "2025-06-15T"} {
		assert.Contains(t, out, want)
	}
}

func TestInspectErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o644))
		return p
	}
	good, err := os.ReadFile(vectorPath(t, "manifest_v4_snapshot.bin"))
	require.NoError(t, err)
	flipped := bytes.Clone(good)
	flipped[10] ^= 0x40
	seg, err := os.ReadFile(vectorPath(t, "seg_v2_none.bin"))
	require.NoError(t, err)

	for _, c := range []struct {
		name  string
		args  []string
		code  int
		class string
	}{
		{"corrupt manifest", []string{"manifest", write("flipped", flipped)}, 1, "corrupt: manifest crc32c mismatch"},
		{"corrupt manifest json", []string{"--json", "manifest", write("flipped", flipped)}, 1, "corrupt: "},
		{"truncated segment", []string{"segment", write("short", seg[:5])}, 1, "truncated: "},
		{"segment read as manifest", []string{"manifest", vectorPath(t, "seg_v2_none.bin")}, 1, "corrupt: manifest entries_count"},
		{"manifest read as segment", []string{"segment", vectorPath(t, "manifest_v3.bin")}, 1, "unsupported-version: segment version 3"},
		{"empty file", []string{"segment", write("empty", nil)}, 1, "truncated: segment of 0 bytes"},
		{"missing file", []string{"segment", filepath.Join(dir, "nope")}, 1, "no such file"},
		{"no arguments", nil, 2, "usage: objwal inspect"},
		{"unknown kind", []string{"snapshot", "x"}, 2, "usage: objwal inspect"},
		{"extra argument", []string{"segment", "a", "b"}, 2, "usage: objwal inspect"},
		{"unknown flag", []string{"--yaml", "segment", "a"}, 2, "flag provided but not defined"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, append([]string{"inspect"}, c.args...)...)
			assert.Equal(t, c.code, code)
			assert.Empty(t, out)
			assert.Contains(t, errOut, c.class)
		})
	}
	t.Run("help", func(t *testing.T) {
		code, _, errOut := runCLI(t, "inspect", "-h")
		assert.Equal(t, 0, code)
		assert.Contains(t, errOut, "usage: objwal inspect")
	})
	t.Run("unsupported compression", func(t *testing.T) {
		// A v1 segment with compression code 2: no CRC to fail first.
		b := []byte{2, 0, 0, 0, 0, 1, 0}
		code, _, errOut := runCLI(t, "inspect", "segment", write("code2", b))
		assert.Equal(t, 1, code)
		assert.True(t, strings.HasPrefix(errOut, "objwal inspect: segment "), errOut)
		assert.Contains(t, errOut, "unsupported-compression: segment compression code 2")
	})
}

func TestInspectIsListed(t *testing.T) {
	code, out, _ := runCLI(t)
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "inspect")
}
