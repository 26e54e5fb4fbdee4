package main

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/casstore/conformance"
)

// blindIfMatch is a store that writes an IfMatch put unconditionally: the
// lost-update bug the suite exists to catch.
type blindIfMatch struct{ casstore.Store }

func (b blindIfMatch) Put(ctx context.Context, key string, data []byte, cond casstore.Condition) (casstore.Version, error) {
	if cond.Kind() == casstore.CondIfMatch {
		cond = casstore.None()
	}
	return b.Store.Put(ctx, key, data, cond)
}

// unreachable is a store whose every call fails as a missing bucket does.
type unreachable struct{ casstore.Store }

func (unreachable) List(context.Context, string) iter.Seq2[casstore.ObjectInfo, error] {
	return func(yield func(casstore.ObjectInfo, error) bool) {
		yield(casstore.ObjectInfo{}, errors.New("NoSuchBucket: The specified bucket does not exist"))
	}
}

func init() {
	casstore.Register("test-unreachable", func(ctx context.Context, u *url.URL) (casstore.Store, error) {
		return unreachable{casstore.NewMemory()}, nil
	})
	casstore.Register("test-blind-ifmatch", func(ctx context.Context, u *url.URL) (casstore.Store, error) {
		s, err := casstore.Open(ctx, "mem://"+u.Host+u.Path)
		if err != nil {
			return nil, err
		}
		return blindIfMatch{s}, nil
	})
}

var caseLine = regexp.MustCompile(`(?m)^(PASS|FAIL|SKIP)  (\S+) \(\d+\.\d\ds\)$`)

func TestConformanceMemory(t *testing.T) {
	code, out, errOut := runCLI(t, "conformance", memURL(t))
	require.Equal(t, 0, code, "stderr: %s\nstdout: %s", errOut, out)
	lines := caseLine.FindAllStringSubmatch(out, -1)
	require.Len(t, lines, len(conformance.Cases()), out)
	for i, m := range lines {
		assert.Equal(t, conformance.Cases()[i], m[2])
		want := "PASS"
		if m[2] == "UnsupportedConditions" {
			want = "SKIP"
		}
		assert.Equal(t, want, m[1], m[2])
	}
	assert.Contains(t, out, "      store declares IfAbsent and IfMatch: no Put condition to refuse\n", "a SKIP shows its reason indented")
	assert.Regexp(t, `(?m)^22 cases in \d+\.\d\ds: 21 passed, 0 failed, 1 skipped: the store honours`, out)
	assert.Empty(t, errOut)
}

func TestConformanceJSON(t *testing.T) {
	code, out, errOut := runCLI(t, "conformance", "--json", "--quick", "mem://user:hunter2@conformance-json/some/prefix")
	require.Equal(t, 0, code, "stderr: %s\nstdout: %s", errOut, out)
	var doc struct {
		URL   string `json:"url"`
		Cases []struct {
			Name       string   `json:"name"`
			Outcome    string   `json:"outcome"`
			DurationMS *float64 `json:"duration_ms"`
			Messages   []string `json:"messages"`
		} `json:"cases"`
		Passed, Failed, Skipped int
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	assert.Equal(t, "mem://conformance-json/some/prefix", doc.URL, "user information is not printed")
	assert.NotContains(t, out, "hunter2")
	assert.Positive(t, doc.Passed)
	assert.Zero(t, doc.Failed)
	assert.Equal(t, 1, doc.Skipped)
	require.Len(t, doc.Cases, len(conformance.Cases()))
	for _, c := range doc.Cases {
		assert.NotNil(t, c.DurationMS, c.Name)
		assert.NotNil(t, c.Messages, "%s: messages is a list, never null", c.Name)
		if c.Name == "Race" {
			assert.True(t, slices.ContainsFunc(c.Messages, func(m string) bool { return strings.HasPrefix(m, "4 writers × 5 attempts") }),
				"--quick races 4 writers × 5 attempts; Race logged %q", c.Messages)
		}
	}
}

func TestConformanceFile(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCLI(t, "conformance", "--quick", "file://"+dir)
	require.Equal(t, 0, code, "stderr: %s\nstdout: %s", errOut, out)
	assert.Regexp(t, `(?m)^PASS  RoundTrip `, out)
	assert.Regexp(t, `(?m)^22 cases in .*0 failed`, out)
}

func TestConformanceRun(t *testing.T) {
	code, out, errOut := runCLI(t, "conformance", memURL(t), "--run", "RoundTrip")
	require.Equal(t, 0, code, "stderr: %s\nstdout: %s", errOut, out)
	lines := caseLine.FindAllStringSubmatch(out, -1)
	require.Len(t, lines, 1, out)
	assert.Equal(t, []string{lines[0][0], "PASS", "RoundTrip"}, lines[0])
	assert.Regexp(t, `(?m)^1 cases in .*: 1 passed, 0 failed, 0 skipped`, out)
}

func TestConformanceFailingStore(t *testing.T) {
	code, out, errOut := runCLI(t, "conformance", "--quick", "test-blind-ifmatch://"+strings.ReplaceAll(t.Name(), "/", "-"), "--run", "^(IfMatch|Delete)$")
	require.Equal(t, 1, code, "stderr: %s\nstdout: %s", errOut, out)
	assert.Regexp(t, `(?m)^FAIL  IfMatch \(`, out)
	assert.Regexp(t, `(?m)^PASS  Delete \(`, out)
	assert.Regexp(t, `(?m)^FAIL  IfMatch .*\n      \S`, out, "the failure's messages follow, indented")
	assert.Contains(t, out, "1 failed")
	assert.Contains(t, out, "does NOT honour")
}

func TestConformanceUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"nosuchscheme://bucket"}, `unknown scheme "nosuchscheme"`},
		{[]string{"just-a-path"}, "no scheme"},
		{[]string{"file://relative/dir"}, "absolute"},
		{[]string{"test-unreachable://user:pw@bucket"}, "cannot use the store at test-unreachable://bucket (does the bucket exist, may these credentials read it?): NoSuchBucket"},
		{[]string{"mem://x", "--run", "("}, "--run: error parsing regexp"},
		{[]string{"mem://x", "--run", "NoSuchCase"}, `--run "NoSuchCase" matches no case (cases: RoundTrip, `},
		{[]string{}, "usage: objwal conformance URL"},
		{[]string{"mem://x", "mem://y"}, "usage: objwal conformance URL"},
		{[]string{"mem://x", "--bogus"}, "flag provided but not defined"},
	} {
		code, out, errOut := runCLI(t, append([]string{"conformance"}, tc.args...)...)
		assert.Equal(t, 2, code, "%q: stdout %s", tc.args, out)
		assert.Contains(t, errOut, tc.want, "%q", tc.args)
		assert.NotContains(t, out, "PASS", "%q ran cases", tc.args)
	}
}

func TestUsageListsConformance(t *testing.T) {
	code, out, _ := runCLI(t, "help")
	require.Equal(t, 0, code)
	assert.Regexp(t, `(?m)^  conformance +check that a store`, out)
}
