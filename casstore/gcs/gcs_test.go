package gcs_test

import (
	"context"
	"errors"
	"net/http"
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
	cloudtest.RunRealBucket(t, "OBJWAL_TEST_GCS_URL", "real GCS bucket")
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

// TestLostReplyIsNotALoss: see cloudtest.RunLostReply.
func TestLostReplyIsNotALoss(t *testing.T) {
	cloudtest.RunLostReply(t, func(t *testing.T, rt http.RoundTripper) casstore.Store { return newEmulatorStore(t, rt) })
}

// TestOpenURLErrors checks bad URLs give clear ErrInvalidURL errors.
func TestOpenURLErrors(t *testing.T) {
	cloudtest.CheckOpenErrors(t, []cloudtest.OpenErrorCase{
		{URL: "gs:///prefix", Want: "missing bucket"},
		{URL: "gs://bucket?access_idd=x", Want: "unknown parameter(s) access_idd"},
		{URL: "gs://bucket?anonymous=perhaps", Want: "not a boolean"},
		{URL: "gcs://bucket", Want: "unknown scheme"},
	})
}

// BenchmarkConditionalPut measures the round trip of a GenerationMatch put
// on the emulator.
func BenchmarkConditionalPut(b *testing.B) {
	cloudtest.BenchConditionalPut(b, newEmulatorStore(b, nil))
}
