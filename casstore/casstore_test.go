package casstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/objwal/objwal/casstore"
)

func TestOpenErrors(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		url  string
		says []string
	}{
		{"nosuch://bucket/x", []string{`unknown scheme "nosuch"`, "mem", "file"}},
		{"no-scheme-at-all", []string{"no scheme"}},
		{"://broken", []string{"missing protocol scheme"}},
		{"mem://x?bogus=1", []string{"unknown parameter(s) bogus"}},
		{"mem://x?zeta=1&alpha=2", []string{"alpha, zeta"}},
	} {
		s, err := casstore.Open(ctx, tc.url)
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", tc.url)
			continue
		}
		if !errors.Is(err, casstore.ErrInvalidURL) {
			t.Errorf("Open(%q) = %v, want ErrInvalidURL", tc.url, err)
		}
		for _, want := range tc.says {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Open(%q) error %q does not mention %q", tc.url, err, want)
			}
		}
	}
}

func TestOpenRedactsCredentials(t *testing.T) {
	_, err := casstore.Open(t.Context(), "nosuch://user:hunter2@bucket/x")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error %v leaks the password in the URL", err)
	}
	_, err = casstore.Open(t.Context(), "mem://user:hunter2@x?bogus=1")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error %v leaks the password in the URL", err)
	}
	// A credential in a query parameter (a SAS signature, say) is redacted too.
	_, err = casstore.Open(t.Context(), "nosuch://bucket/x?sig=hunter2")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error %v leaks the signature in the URL", err)
	}
	// url.Parse's own error repeats the URL: it must not reach the message.
	_, err = casstore.Open(t.Context(), "s3://user:hunter2@b\x7f")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error %v leaks the password of an unparsable URL", err)
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"s3://bucket/prefix?region=eu-west-1&nested_keys=false": "s3://bucket/prefix?region=eu-west-1&nested_keys=false",
		"s3://AKIA:secret@bucket/p":                             "s3://bucket/p",
		"blob+azblob://c?sig=abc&sv=2024&access_key=xyz":        "blob+azblob://c?access_key=REDACTED&sig=REDACTED&sv=2024",
		"gs://b?X-Goog-Credential=c&token=t":                    "gs://b?X-Goog-Credential=REDACTED&token=REDACTED",
		"mem://x":                                               "mem://x",
		"s3://b\x7f":                                            "(unparsable URL)",
	} {
		if got := casstore.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOpenMemorySharing(t *testing.T) {
	ctx := t.Context()
	name := "sharing-" + rand.Text() // unique per run, also under -count
	a, err := casstore.Open(ctx, "mem://"+name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := casstore.Open(ctx, "mem://"+name)
	if err != nil {
		t.Fatal(err)
	}
	other, err := casstore.Open(ctx, "mem://"+name+"-other")
	if err != nil {
		t.Fatal(err)
	}
	v, err := a.Put(ctx, "k", []byte("shared"), casstore.IfAbsent())
	if err != nil {
		t.Fatal(err)
	}
	got, info, err := b.Get(ctx, "k")
	if err != nil || string(got) != "shared" || info.Version != v {
		t.Errorf("same name: Get = %q %q %v, want %q %q", got, info.Version, err, "shared", v)
	}
	if _, _, err := other.Get(ctx, "k"); !errors.Is(err, casstore.ErrNotFound) {
		t.Errorf("different name: Get = %v, want ErrNotFound", err)
	}
	// Closing one handle leaves the others working.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Get(ctx, "k"); !errors.Is(err, casstore.ErrClosed) {
		t.Errorf("Get on a closed handle = %v, want ErrClosed", err)
	}
	if _, _, err := b.Get(ctx, "k"); err != nil {
		t.Errorf("Get on another handle after Close: %v", err)
	}
	// A path becomes a key prefix on the same data.
	p, err := casstore.Open(ctx, "mem://"+name+"/logs/app")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Put(ctx, "seg", []byte("x"), casstore.None()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat(ctx, "logs/app/seg"); err != nil {
		t.Errorf("mem://name/logs/app wrote elsewhere than logs/app/seg: %v", err)
	}
}

func TestWithPrefix(t *testing.T) {
	ctx := t.Context()
	inner := casstore.NewMemory()
	defer inner.Close()
	if casstore.WithPrefix(inner, "") != casstore.Store(inner) {
		t.Error("WithPrefix with an empty prefix did not return the store itself")
	}
	p := casstore.WithPrefix(inner, "pre/")
	v, err := p.Put(ctx, "a/b", []byte("ab"), casstore.IfAbsent())
	if err != nil {
		t.Fatal(err)
	}
	if got, info, err := inner.Get(ctx, "pre/a/b"); err != nil || string(got) != "ab" || info.Version != v {
		t.Errorf("inner Get(pre/a/b) = %q %q %v", got, info.Version, err)
	}
	if _, err := inner.Put(ctx, "outside", []byte("o"), casstore.None()); err != nil {
		t.Fatal(err)
	}
	if _, err := inner.Put(ctx, "pre/c", []byte("c"), casstore.None()); err != nil {
		t.Fatal(err)
	}
	got, info, err := p.Get(ctx, "a/b")
	if err != nil || string(got) != "ab" || info.Key != "a/b" {
		t.Errorf("prefixed Get = %q key %q %v; want the key without the prefix", got, info.Key, err)
	}
	if st, err := p.Stat(ctx, "c"); err != nil || st.Key != "c" || st.Size != 1 {
		t.Errorf("prefixed Stat = %+v %v", st, err)
	}
	if r, err := p.GetRange(ctx, "a/b", 1, 5); err != nil || string(r) != "b" {
		t.Errorf("prefixed GetRange = %q %v", r, err)
	}
	var keys []string
	for info, err := range p.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, info.Key)
	}
	if !slices.Equal(keys, []string{"a/b", "c"}) {
		t.Errorf("prefixed List = %q, want [a/b c] (prefix stripped, outside keys absent)", keys)
	}
	if _, err := p.Put(ctx, "a/b", nil, casstore.IfMatch("stale")); !errors.Is(err, casstore.ErrPreconditionFailed) {
		t.Errorf("prefixed IfMatch(stale) = %v", err)
	}
	if err := p.Delete(ctx, "a/b", casstore.IfMatch(v)); err != nil {
		t.Fatal(err)
	}
	if _, err := inner.Stat(ctx, "pre/a/b"); !errors.Is(err, casstore.ErrNotFound) {
		t.Errorf("prefixed Delete left pre/a/b: %v", err)
	}
	if p.Capabilities().IfMatch != inner.Capabilities().IfMatch {
		t.Error("prefixed store changed the capabilities")
	}
}

func TestQuery(t *testing.T) {
	u, err := url.Parse("x://b?on=true&off=0&bad=maybe&extra=1")
	if err != nil {
		t.Fatal(err)
	}
	q := casstore.NewQuery(u)
	if !q.Bool("on") || q.Bool("off") || q.Bool("absent") {
		t.Error("Bool read on/off/absent wrong")
	}
	q.Bool("bad")
	err = q.Err()
	if !errors.Is(err, casstore.ErrInvalidURL) {
		t.Fatalf("Err = %v, want ErrInvalidURL", err)
	}
	for _, want := range []string{`bad="maybe" is not a boolean`, "unknown parameter(s) extra", "known: absent, bad, off, on"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Err %q does not mention %q", err, want)
		}
	}
	q2 := casstore.NewQuery(u)
	for _, n := range []string{"on", "off", "bad", "extra"} {
		q2.String(n)
	}
	if err := q2.Err(); err != nil {
		t.Errorf("every parameter read as a string: Err = %v", err)
	}
}

func TestPrefixFromPath(t *testing.T) {
	for in, want := range map[string]string{"": "", "/": "", "/logs": "logs/", "/logs/app/": "logs/app/", "logs//": "logs/"} {
		if got := casstore.PrefixFromPath(in); got != want {
			t.Errorf("PrefixFromPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWrapAndOpError(t *testing.T) {
	if casstore.Wrap("get", "k", nil) != nil {
		t.Error("Wrap(nil) is not nil")
	}
	err := casstore.Wrap("get", "logs/k", casstore.ErrNotFound)
	if got, want := err.Error(), `casstore: get "logs/k": object not found`; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
	if !errors.Is(err, casstore.ErrNotFound) {
		t.Error("errors.Is does not see through OpError")
	}
	if again := casstore.Wrap("get", "logs/k", err); again != err {
		t.Errorf("re-wrapping for the same op and key stacked: %v", again)
	}
	outer := casstore.Wrap("put", "other", err)
	var oe *casstore.OpError
	if !errors.As(outer, &oe) || oe.Op != "put" || oe.Key != "other" || !errors.Is(outer, casstore.ErrNotFound) {
		t.Errorf("wrapping for a different op/key: %v", outer)
	}
	// Store errors name the operation and key.
	m := casstore.NewMemory()
	_, err = m.Put(context.Background(), "k", nil, casstore.IfMatch("nope"))
	if !errors.As(err, &oe) || oe.Op != "put" || oe.Key != "k" {
		t.Errorf("memory Put error %v is not an OpError for put k", err)
	}
}

func TestConditions(t *testing.T) {
	for _, tc := range []struct {
		c    casstore.Condition
		kind casstore.ConditionKind
		v    casstore.Version
		s    string
	}{
		{casstore.None(), casstore.Unconditional, "", "unconditional"},
		{casstore.Condition{}, casstore.Unconditional, "", "unconditional"},
		{casstore.IfAbsent(), casstore.CondIfAbsent, "", "if-absent"},
		{casstore.IfMatch("v7"), casstore.CondIfMatch, "v7", "if-match(v7)"},
	} {
		if tc.c.Kind() != tc.kind || tc.c.Version() != tc.v || tc.c.String() != tc.s {
			t.Errorf("%v: kind %d version %q string %q", tc.c, tc.c.Kind(), tc.c.Version(), tc.c.String())
		}
	}
}

func TestRegister(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", name)
			}
		}()
		f()
	}
	open := func(context.Context, *url.URL) (casstore.Store, error) { return casstore.NewMemory(), nil }
	mustPanic("Register(mem) twice", func() { casstore.Register("mem", open) })
	mustPanic("Register empty scheme", func() { casstore.Register("", open) })
	mustPanic("Register nil opener", func() { casstore.Register("nil-opener", nil) })
	if s := casstore.Schemes(); !slices.Contains(s, "mem") || !slices.Contains(s, "file") || !slices.IsSorted(s) {
		t.Errorf("Schemes() = %q", s)
	}
	scheme := fmt.Sprintf("test-%p", t)
	casstore.Register(scheme, open)
	s, err := casstore.Open(t.Context(), scheme+"://x")
	if err != nil {
		t.Fatalf("Open with a newly registered scheme: %v", err)
	}
	s.Close()
}

func TestMemoryGetRangeLimits(t *testing.T) {
	// The overflow guard: off + n past MaxInt64 must not wrap around.
	ctx := t.Context()
	m := casstore.NewMemory()
	if _, err := m.Put(ctx, "k", []byte("0123456789"), casstore.None()); err != nil {
		t.Fatal(err)
	}
	if got, err := m.GetRange(ctx, "k", 5, 1<<63-1); err != nil || string(got) != "56789" {
		t.Errorf("GetRange(5, MaxInt64) = %q %v", got, err)
	}
}
