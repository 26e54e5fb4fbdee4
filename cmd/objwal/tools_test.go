package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/wal"
)

// testContext bounds a test so that a bug hangs nothing.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// memURL names an in-process store of this test's own.
func memURL(t *testing.T) string {
	return "mem://" + strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()) + "-" + runID()
}

// group is one Append of a test log.
type group struct {
	meta []byte
	recs [][]byte
}

// produce writes groups to the log at the default manifest path of url and
// returns the first sequence of each group.
func produce(t *testing.T, ctx context.Context, url string, groups []group) []uint64 {
	t.Helper()
	store, err := casstore.Open(ctx, url)
	require.NoError(t, err)
	defer store.Close()
	p, err := wal.NewProducer(ctx, store, wal.ProducerConfig{FlushInterval: time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	var ds []*wal.Durability
	for _, g := range groups {
		d, err := p.Append(ctx, g.recs, g.meta)
		require.NoError(t, err)
		ds = append(ds, d)
	}
	var seqs []uint64
	for _, d := range ds {
		seq, err := d.Wait(ctx)
		require.NoError(t, err)
		seqs = append(seqs, seq)
	}
	require.NoError(t, p.Close(ctx))
	return seqs
}

var testGroups = []group{
	{meta: []byte("first"), recs: [][]byte{[]byte("a"), []byte("bb")}},
	{recs: [][]byte{{0x00, 0xff, 0x10}}},
	{meta: []byte{0x01}, recs: [][]byte{[]byte("hello world"), {}}},
}

func TestDemoSmall(t *testing.T) {
	code, out, errOut := runCLI(t, "demo", "--records", "3000", "--keys", "200", "--appenders", "3", "--group", "7")
	require.Equal(t, 0, code, "stderr: %s\nstdout: %s", errOut, out)
	assert.Regexp(t, `(?m)^  records +3000$`, out)
	for _, want := range []string{"write ", "commit latency", "p50", "p99", "replica lag",
		"object-store requests", "put", "bytes written", "bytes read"} {
		assert.Contains(t, out, want)
	}
	assert.Regexp(t, `check: replica-1 == primary \(\d+ keys, cursor at sequence 3000\)`, out)
	assert.Regexp(t, `check: replica-2 == primary \(\d+ keys, cursor at sequence 3000\)`, out)
	// The producer wrote every record once at least: more bytes than the
	// record data, and both replicas read them.
	m := regexp.MustCompile(`(?m)^\s+put\s+(\d+)\s+0\s+0\s+(\d+)$`).FindStringSubmatch(out)
	require.NotNil(t, m, "no put row in:\n%s", out)
	puts, _ := strconv.Atoi(m[1])
	assert.GreaterOrEqual(t, puts, 2, "a claim and at least one commit")
}

func TestDemoOnURL(t *testing.T) {
	url := memURL(t)
	code, out, errOut := runCLI(t, "demo", "--url", url, "--records", "500", "--keys", "50", "--delete-percent", "50")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "objwal demo on "+url)
	assert.Contains(t, out, "check: replica-1 == primary")
	// The objects stay under a fresh prefix of the store.
	store, err := casstore.Open(testContext(t), url)
	require.NoError(t, err)
	m := regexp.MustCompile(`manifest (objwal-demo/[^/]+/)wal/manifest\n`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	n, _, err := countKeys(testContext(t), store, m[1]+"wal/")
	require.NoError(t, err)
	assert.Greater(t, n, 1, "the manifest and segments under %swal/", m[1])

	// tail reads the demo's log by its manifest key.
	code, out, errOut = runCLI(t, "tail", url, "--manifest", m[1]+"wal/manifest")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, 500, strings.Count(out, "\n"))
}

func TestDiffMaps(t *testing.T) {
	a := map[string][]byte{"k": []byte("v"), "j": []byte("w")}
	assert.Empty(t, diffMaps(a, map[string][]byte{"j": []byte("w"), "k": []byte("v")}))
	assert.Contains(t, diffMaps(a, map[string][]byte{"k": []byte("v")}), `key "j" missing`)
	assert.Contains(t, diffMaps(a, map[string][]byte{"k": []byte("x"), "j": []byte("w")}), `key "k" is "x"`)
	assert.Contains(t, diffMaps(a, map[string][]byte{"k": []byte("v"), "j": []byte("w"), "z": nil}), `extra key "z"`)
}

func TestPrimaryMapKeepsHighestSequence(t *testing.T) {
	p := &primaryMap{m: map[string]primaryEntry{}}
	// Groups learn their sequences out of order; the later sequence wins.
	p.apply(10, []kvOp{{key: "a", value: []byte("late")}, {key: "b", del: true}})
	p.apply(0, []kvOp{{key: "a", value: []byte("early")}, {key: "b", value: []byte("early")}, {key: "c", value: []byte("c")}})
	assert.Equal(t, map[string][]byte{"a": []byte("late"), "c": []byte("c")}, p.final())
}

func TestKVOpRoundTrip(t *testing.T) {
	for _, op := range []kvOp{{key: "key-1", value: []byte("v")}, {key: "k", del: true}, {key: "", value: nil}} {
		got, err := decodeKVOp(op.encode())
		require.NoError(t, err)
		assert.Equal(t, op.del, got.del)
		assert.Equal(t, op.key, got.key)
		assert.Equal(t, string(op.value), string(got.value))
	}
	for _, bad := range [][]byte{nil, {'P'}, {'X', 0}, {'P', 5, 'a'}} {
		_, err := decodeKVOp(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestBenchJSON(t *testing.T) {
	code, out, errOut := runCLI(t, "bench", "--json", "--bytes", "256K", "--record-size", "1000", "--appenders", "4", "--inflight", "16K")
	require.Equal(t, 0, code, errOut)
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	for _, f := range []string{"write_mbps", "records_per_s", "commit_p50_ms", "commit_p99_ms", "catchup_mbps", "commits", "segments"} {
		v, ok := res[f].(float64)
		if assert.True(t, ok, "field %s missing or not a number in %s", f, out) {
			assert.Greater(t, v, 0.0, f)
		}
	}
	assert.Equal(t, float64(262), res["records"], "256 KiB in records of 1000 B")
	assert.GreaterOrEqual(t, res["commit_p99_ms"].(float64), res["commit_p50_ms"].(float64))
	assert.Equal(t, "mem://objwal-bench", res["url"])
	assert.Regexp(t, `^objwal-bench/[^/]+/wal/manifest$`, res["manifest"])
}

func TestBenchTextWithLatency(t *testing.T) {
	code, out, errOut := runCLI(t, "bench", "--url", memURL(t), "--latency", "1ms", "--key-write-interval", "2ms",
		"--bytes", "64K", "--record-size", "100", "--appenders", "2", "--group", "4")
	require.Equal(t, 0, code, errOut)
	for _, want := range []string{"latency 1 ms", "key write interval 2 ms", "write throughput", "commit latency", "p90",
		"commit-rate bound", "serialized-flush bound", "replica catch-up", "one-GET-at-a-time bound", "manifest_put="} {
		assert.Contains(t, out, want)
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "4096": 4096, "64K": 64 << 10, "3m": 3 << 20, "1G": 1 << 30} {
		var b byteSize
		require.NoError(t, b.Set(in), in)
		assert.Equal(t, want, int64(b), in)
	}
	for _, in := range []string{"", "K", "12Q", "-1", "1.5M", "0x10"} {
		var b byteSize
		assert.Error(t, b.Set(in), in)
	}
}

func TestTail(t *testing.T) {
	ctx := testContext(t)
	url := memURL(t)
	seqs := produce(t, ctx, url, testGroups)
	require.Equal(t, []uint64{0, 2, 3}, seqs)

	code, out, errOut := runCLI(t, "tail", url)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, `0 "first" "a"
1 "first" "bb"
2 - base64:AP8Q
3 base64:AQ== "hello world"
4 base64:AQ== ""
`, out)

	code, out, errOut = runCLI(t, "tail", "--from", "3", url, "--json")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	var first tailJSON
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	assert.Equal(t, tailJSON{Sequence: 3, Meta: []byte{1}, Data: []byte("hello world")}, first)
	assert.JSONEq(t, `{"sequence": 4, "meta": "AQ==", "data": ""}`, lines[1])
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestTailFollow(t *testing.T) {
	ctx := testContext(t)
	url := memURL(t)
	produce(t, ctx, url, testGroups[:1])

	fctx, stop := context.WithCancel(ctx)
	defer stop()
	var out, errOut syncBuffer
	done := make(chan int)
	go func() { done <- run(fctx, []string{"tail", "--follow", "--poll-interval", "5ms", url}, &out, &errOut) }()

	// A second producer (a failover) appends more; tail must print it.
	produce(t, ctx, url, []group{{meta: []byte("second"), recs: [][]byte{[]byte("c")}}})
	want := "0 \"first\" \"a\"\n1 \"first\" \"bb\"\n2 \"second\" \"c\"\n"
	for out.String() != want {
		select {
		case code := <-done:
			t.Fatalf("tail --follow exited with %d before printing everything: %q, stderr %q", code, out.String(), errOut.String())
		case <-ctx.Done():
			t.Fatalf("tail --follow printed %q, want %q", out.String(), want)
		case <-time.After(5 * time.Millisecond):
		}
	}
	stop()
	assert.Equal(t, 0, <-done, errOut.String())
	assert.Equal(t, want, out.String())
}

func TestInspectURL(t *testing.T) {
	ctx := testContext(t)
	url := "file://" + t.TempDir()
	produce(t, ctx, url, testGroups)

	code, out, errOut := runCLI(t, "inspect", "--json", url, "wal/manifest")
	require.Equal(t, 0, code, errOut)
	var m manifestJSON
	require.NoError(t, json.Unmarshal([]byte(out), &m), out)
	assert.Equal(t, uint64(5), m.NextSequence)
	require.NotEmpty(t, m.Entries)
	assert.Equal(t, uint64(0), m.Entries[0].Sequence)
	assert.Equal(t, "Zmlyc3Q=", m.Entries[0].Metadata[0].Payload) // "first"

	// Every segment the manifest names reads back by URL and key, its kind
	// guessed from the key; together they hold the five records.
	records := 0
	for _, e := range m.Entries {
		code, out, errOut := runCLI(t, "inspect", url, e.Location, "--json")
		require.Equal(t, 0, code, errOut)
		var seg segmentJSON
		require.NoError(t, json.Unmarshal([]byte(out), &seg), out)
		assert.Equal(t, int(e.Count), seg.RecordCount)
		records += seg.RecordCount
	}
	assert.Equal(t, 5, records)

	// The summary form with an explicit kind.
	code, out, errOut = runCLI(t, "inspect", "manifest", url, "wal/manifest")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "manifest wal/manifest: version 4")
	assert.Contains(t, out, "next_sequence  5")

	// A segment read as a manifest is refused with the format's class.
	code, _, errOut = runCLI(t, "inspect", "manifest", url, m.Entries[0].Location)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "objwal inspect: manifest "+m.Entries[0].Location+": ")
}

func TestGuessKind(t *testing.T) {
	assert.Equal(t, kindSegment, guessKind("wal/seg/01JZ8X6E3M4N5P6Q7R8S9T0V1W/0000000000000003"))
	assert.Equal(t, kindSegment, guessKind("00000000000000aF"))
	assert.Equal(t, kindManifest, guessKind("wal/manifest"))
	assert.Equal(t, kindManifest, guessKind("wal/seg/x/000000000000003")) // 15 digits
	assert.True(t, isStoreURL("s3://bucket/p"))
	assert.False(t, isStoreURL("/tmp/a://b"))
	assert.False(t, isStoreURL("manifest"))
}

func TestBadArguments(t *testing.T) {
	missing := memURL(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"demo", "--records", "0"}, 2, "--records must be positive"},
		{[]string{"demo", "--nope"}, 2, "flag provided but not defined: -nope"},
		{[]string{"demo", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"demo", "--url", "nosuch://bucket"}, 1, `unknown scheme "nosuch"`},
		{[]string{"demo", "--url", "file://relative/dir", "--records", "10"}, 1, "file:///absolute/dir"},
		{[]string{"bench", "--url", "nosuch://bucket"}, 1, `unknown scheme "nosuch"`},
		{[]string{"bench", "--bytes", "12Q"}, 2, `"12Q" is not a byte count`},
		{[]string{"bench", "--appenders", "0"}, 2, "must be positive"},
		{[]string{"bench", "--latency", "fast"}, 2, `invalid value "fast" for flag -latency`},
		{[]string{"tail"}, 2, "usage: objwal tail URL"},
		{[]string{"tail", missing}, 1, "no log at " + missing + `: manifest "wal/manifest" does not exist`},
		{[]string{"tail", "nosuch://x"}, 1, `unknown scheme "nosuch"`},
		{[]string{"inspect"}, 2, "objwal inspect [--json] [manifest|segment] URL KEY"},
		{[]string{"inspect", missing}, 2, "objwal inspect [--json] [manifest|segment] URL KEY"},
		{[]string{"inspect", "log", missing, "wal/manifest"}, 2, "usage: objwal inspect"},
		{[]string{"inspect", missing, "wal/manifest"}, 1, "object not found"},
		{[]string{"inspect", "nosuch://x", "k"}, 1, `unknown scheme "nosuch"`},
		{[]string{"nosuch"}, 2, `unknown command "nosuch"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, errOut := runCLI(t, tc.args...)
			assert.Equal(t, tc.code, code, errOut)
			assert.Contains(t, errOut, tc.want)
		})
	}
}

func TestHelpListsVerbs(t *testing.T) {
	code, out, _ := runCLI(t, "help")
	require.Equal(t, 0, code)
	for _, verb := range []string{"demo", "bench", "tail", "inspect"} {
		assert.Contains(t, out, "  "+verb+" ")
	}
	for _, verb := range []string{"demo", "bench", "tail", "inspect"} {
		code, _, errOut := runCLI(t, verb, "-h")
		assert.Equal(t, 0, code, verb)
		assert.Contains(t, errOut, "usage: objwal "+verb, verb)
	}
}
