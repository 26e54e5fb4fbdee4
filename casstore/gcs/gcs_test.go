package gcs_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/casstore/cloud/cloudtest"
	"github.com/objwal/objwal/casstore/conformance"
	"github.com/objwal/objwal/casstore/gcs"
)

const testBucket = "objwal-test"

// emulatorClient returns a client for the fake-gcs-server that
// scripts/emulators.sh started (STORAGE_EMULATOR_HOST), carrying requests
// through rt when it is non-nil, and makes sure the test bucket exists.
func emulatorClient(t testing.TB, rt http.RoundTripper) *storage.Client {
	t.Helper()
	cloudtest.Env(t, "STORAGE_EMULATOR_HOST", "GCS (fake-gcs-server)")
	opts := []option.ClientOption{storage.WithJSONReads()}
	if rt != nil {
		opts = append(opts, option.WithHTTPClient(&http.Client{Transport: rt}))
	}
	client, err := storage.NewClient(context.Background(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	err = client.Bucket(testBucket).Create(context.Background(), "objwal-test-project", nil)
	if err != nil && !strings.Contains(err.Error(), "409") && !strings.Contains(strings.ToLower(err.Error()), "already") {
		t.Fatalf("create bucket %s: %v", testBucket, err)
	}
	return client
}

func newEmulatorStore(t testing.TB, rt http.RoundTripper) *gcs.Store {
	t.Helper()
	s, err := gcs.New(emulatorClient(t, rt), testBucket, gcs.WithEmulatorGaps())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestConformanceEmulator runs the shared suite against fake-gcs-server.
// Its one gap (conditional delete) is declared and shows as a skip.
func TestConformanceEmulator(t *testing.T) {
	client := emulatorClient(t, nil)
	conformance.Run(t, func(t *testing.T) casstore.Store {
		s, err := gcs.New(client, testBucket, gcs.WithEmulatorGaps(), gcs.WithPageSize(7))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// TestConformanceRealBucket runs the suite against a real bucket named by
// OBJWAL_TEST_GCS_URL (application default credentials).
func TestConformanceRealBucket(t *testing.T) {
	u := os.Getenv("OBJWAL_TEST_GCS_URL")
	if u == "" {
		t.Skip("OBJWAL_TEST_GCS_URL is not set: no real GCS bucket to test against")
	}
	conformance.Run(t, func(t *testing.T) casstore.Store {
		s, err := casstore.Open(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// TestOpenURL opens gs:// through casstore.Open against the emulator: the
// path is a key prefix and the emulator gap is declared automatically.
func TestOpenURL(t *testing.T) {
	raw := newEmulatorStore(t, nil)
	ctx := context.Background()
	s, err := casstore.Open(ctx, "gs://"+testBucket+"/via-url")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c := s.Capabilities(); c.DeleteIfMatch || len(c.Gaps) == 0 {
		t.Fatalf("capabilities under STORAGE_EMULATOR_HOST = %+v; want the declared delete gap", c)
	}
	v, err := s.Put(ctx, "k", []byte("hello"), casstore.IfAbsent())
	if err != nil {
		t.Fatal(err)
	}
	data, info, err := raw.Get(ctx, "via-url/k")
	if err != nil || string(data) != "hello" || info.Version != v {
		t.Fatalf("raw Get(via-url/k) = %q, %+v, %v; want hello at version %q", data, info, err, v)
	}
	if err := s.Delete(ctx, "k", casstore.IfMatch(v)); !errors.Is(err, casstore.ErrUnsupported) {
		t.Fatalf("conditional delete on the emulator: %v; want ErrUnsupported (declared gap)", err)
	}
	if err := s.Delete(ctx, "k", casstore.None()); err != nil {
		t.Fatal(err)
	}
}

// TestLostReplyIsNotALoss: see the s3 package's test of the same name.
func TestLostReplyIsNotALoss(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
	}{{"dropped", 0}, {"503", http.StatusServiceUnavailable}} {
		t.Run(tc.name, func(t *testing.T) {
			lossy := &cloudtest.LossyTransport{Match: cloudtest.Conditional, Status: tc.status}
			s := newEmulatorStore(t, lossy)
			ctx := context.Background()
			key := "lost-reply/" + tc.name
			_ = s.Delete(ctx, key, casstore.None())

			lossy.Arm(1)
			_, err := s.Put(ctx, key, []byte("first"), casstore.IfAbsent())
			checkUnknownOutcome(t, err)
			data, info, err := s.Get(ctx, key)
			if err != nil || string(data) != "first" {
				t.Fatalf("after a lost create-only reply: Get = %q, %v; want the write to have landed", data, err)
			}
			lossy.Arm(1)
			_, err = s.Put(ctx, key, []byte("second"), casstore.IfMatch(info.Version))
			checkUnknownOutcome(t, err)
			if data, _, err := s.Get(ctx, key); err != nil || string(data) != "second" {
				t.Fatalf("after a lost replace reply: Get = %q, %v; want the write to have landed", data, err)
			}
			if matched, lost := lossy.Counts(); matched != 2 || lost != 2 {
				t.Fatalf("conditional requests sent = %d (lost %d); want exactly 2: no retries", matched, lost)
			}
		})
	}
}

func checkUnknownOutcome(t *testing.T, err error) {
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

// TestOpenURLErrors checks bad URLs give clear ErrInvalidURL errors.
func TestOpenURLErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ url, want string }{
		{"gs:///prefix", "missing bucket"},
		{"gs://bucket?access_idd=x", "unknown parameter(s) access_idd"},
		{"gs://bucket?anonymous=perhaps", "not a boolean"},
		{"gcs://bucket", "unknown scheme"},
	} {
		s, err := casstore.Open(ctx, tc.url)
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded; want an error", tc.url)
			continue
		}
		if !errors.Is(err, casstore.ErrInvalidURL) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v; want ErrInvalidURL mentioning %q", tc.url, err, tc.want)
		}
	}
}

// BenchmarkConditionalPut measures the round trip of a GenerationMatch put
// on the emulator.
func BenchmarkConditionalPut(b *testing.B) {
	s := newEmulatorStore(b, nil)
	ctx := context.Background()
	key := "bench/conditional-put"
	data := bytes.Repeat([]byte("x"), 1024)
	v, err := s.Put(ctx, key, data, casstore.None())
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if v, err = s.Put(ctx, key, data, casstore.IfMatch(v)); err != nil {
			b.Fatal(err)
		}
	}
}
