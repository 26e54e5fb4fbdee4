package cloudtest

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/casstore/conformance"
)

// CheckUnknownOutcome fails the test unless err, the result of a
// conditional Put whose reply was lost, is an unknown outcome: a non-nil
// error that is none of ErrAlreadyExists, ErrPreconditionFailed and
// ErrConflict. One of those would mean the client retried the write, met
// the write it had just made, and reported a landed write as lost.
func CheckUnknownOutcome(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("Put succeeded although its reply was lost; want a transport error")
	}
	for _, lie := range []error{casstore.ErrAlreadyExists, casstore.ErrPreconditionFailed, casstore.ErrConflict} {
		if errors.Is(err, lie) {
			t.Fatalf("Put whose reply was lost returned %v: a retry reported a landed write as lost", err)
		}
	}
}

// LostReply sends two conditional puts at key through s, a create-only one
// and a replacing one, arming lossy (the transport under s, matching
// Conditional requests) so that the reply to each is lost after the server
// applied it. Each Put must report an unknown outcome (CheckUnknownOutcome),
// a Get must then find the write landed, and lossy must have seen exactly
// two conditional requests: none was retried. The key is deleted first.
func LostReply(t testing.TB, s casstore.Store, lossy *LossyTransport, key string) {
	t.Helper()
	ctx := context.Background()
	_ = s.Delete(ctx, key, casstore.None())

	lossy.Arm(1)
	_, err := s.Put(ctx, key, []byte("first"), casstore.IfAbsent())
	CheckUnknownOutcome(t, err)
	data, info, err := s.Get(ctx, key)
	if err != nil || string(data) != "first" {
		t.Fatalf("after a lost create-only reply: Get = %q, %v; want the write to have landed", data, err)
	}
	lossy.Arm(1)
	_, err = s.Put(ctx, key, []byte("second"), casstore.IfMatch(info.Version))
	CheckUnknownOutcome(t, err)
	if data, _, err := s.Get(ctx, key); err != nil || string(data) != "second" {
		t.Fatalf("after a lost replace reply: Get = %q, %v; want the write to have landed", data, err)
	}
	if matched, lost := lossy.Counts(); matched != 2 || lost != 2 {
		t.Fatalf("conditional requests sent = %d (lost %d); want exactly 2: no retries", matched, lost)
	}
}

// RunLostReply runs LostReply in two subtests, "dropped" (the reply is
// replaced by a transport error) and "503" (by a bare 503 answer), each on a
// store that newStore builds over a fresh LossyTransport matching
// Conditional requests. Were the client to retry a conditional put, the
// retry would meet the write it just made and come back 412 (or 409), which
// the adapter would report as ErrAlreadyExists or ErrPreconditionFailed for
// a write that landed.
func RunLostReply(t *testing.T, newStore func(t *testing.T, rt http.RoundTripper) casstore.Store) {
	for _, tc := range []struct {
		name   string
		status int
	}{{"dropped", 0}, {"503", http.StatusServiceUnavailable}} {
		t.Run(tc.name, func(t *testing.T) {
			lossy := &LossyTransport{Match: Conditional, Status: tc.status}
			s := newStore(t, lossy)
			LostReply(t, s, lossy, "lost-reply/"+tc.name+"/"+strings.ReplaceAll(t.Name(), "/", "_"))
		})
	}
}

// OpenErrorCase is one URL that casstore.Open must refuse, and a piece of
// text its error must contain.
type OpenErrorCase struct {
	URL  string
	Want string
}

// CheckOpenErrors opens every case's URL with casstore.Open and reports an
// error for each that succeeds, or fails with an error that is not
// casstore.ErrInvalidURL or does not mention the case's Want.
func CheckOpenErrors(t testing.TB, cases []OpenErrorCase) {
	t.Helper()
	ctx := context.Background()
	for _, tc := range cases {
		s, err := casstore.Open(ctx, tc.URL)
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded; want an error", tc.URL)
			continue
		}
		if !errors.Is(err, casstore.ErrInvalidURL) || !strings.Contains(err.Error(), tc.Want) {
			t.Errorf("Open(%q) = %v; want ErrInvalidURL mentioning %q", tc.URL, err, tc.Want)
		}
	}
}

// Open opens the store at u with casstore.Open, failing the test if it
// cannot, and closes it when the test ends.
func Open(t testing.TB, u string) casstore.Store {
	t.Helper()
	s, err := casstore.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// RunRealBucket runs the conformance suite against the real bucket whose
// casstore.Open URL is in the environment variable envVar (credentials come
// from the cloud's usual chain), and skips when envVar is empty; what names
// the bucket in the skip message ("real S3 bucket").
func RunRealBucket(t *testing.T, envVar, what string) {
	u := os.Getenv(envVar)
	if u == "" {
		t.Skipf("%s is not set: no %s to test against", envVar, what)
	}
	conformance.Run(t, func(t *testing.T) casstore.Store { return Open(t, u) })
}

// BenchConditionalPut measures the round trip of an IfMatch put of 1 KiB on
// s, each replacing the version the one before returned. Every write
// changes the first byte, so the bytes differ from one write to the next
// even where the version is a content hash (S3 ETags).
func BenchConditionalPut(b *testing.B, s casstore.Store) {
	ctx := context.Background()
	key := "bench/conditional-put"
	data := bytes.Repeat([]byte("x"), 1024)
	v, err := s.Put(ctx, key, data, casstore.None())
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		data[0] = byte(i) // distinct bytes, distinct ETag
		if v, err = s.Put(ctx, key, data, casstore.IfMatch(v)); err != nil {
			b.Fatal(err)
		}
	}
}

// CheckGetIsOneRequest puts an object at key through s and checks that
// s.Get then makes exactly one request, a GET, through rec (the transport
// under s), and takes the Version from that GET's ETag: bytes and version
// come from one response, never from a HEAD and a GET that could see two
// different versions. The object is deleted at the end.
func CheckGetIsOneRequest(t testing.TB, s casstore.Store, rec *Recorder, key string) {
	t.Helper()
	ctx := context.Background()
	v, err := s.Put(ctx, key, []byte("one request"), casstore.None())
	if err != nil {
		t.Fatal(err)
	}
	rec.Take()
	_, info, err := s.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	ex := rec.Take()
	if len(ex) != 1 || ex[0].Method != http.MethodGet {
		t.Fatalf("Get made the requests %+v; want exactly one GET", ex)
	}
	if got := casstore.Version(strings.Trim(ex[0].ETag, `"`)); info.Version != got || info.Version != v {
		t.Fatalf("Get version %q; the GET answered ETag %q, the Put returned %q", info.Version, ex[0].ETag, v)
	}
	_ = s.Delete(ctx, key, casstore.None())
}
