package s3_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/casstore/cloud/cloudtest"
	"github.com/objwal/objwal/casstore/conformance"
	"github.com/objwal/objwal/casstore/s3"
)

// testBucket is the one bucket the tests use on the emulator; every
// conformance case works under its own random prefix in it.
const testBucket = "objwal-test"

// emulatorClient returns an SDK client for the S3 emulator that
// scripts/emulators.sh started (versitygw), carrying requests through rt
// when it is non-nil, and makes sure the test bucket exists.
func emulatorClient(t testing.TB, rt http.RoundTripper) *awss3.Client {
	t.Helper()
	endpoint := cloudtest.Env(t, "OBJWAL_S3_EMULATOR_ENDPOINT", "S3 (versitygw)")
	access, secret := os.Getenv("OBJWAL_S3_EMULATOR_ACCESS_KEY"), os.Getenv("OBJWAL_S3_EMULATOR_SECRET_KEY")
	hc := &http.Client{}
	if rt != nil {
		hc.Transport = rt
	}
	client := awss3.New(awss3.Options{
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider(access, secret, ""),
		HTTPClient:   hc,
	})
	_, err := client.CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: aws.String(testBucket)})
	var ae smithy.APIError
	if err != nil && !(errors.As(err, &ae) && (ae.ErrorCode() == "BucketAlreadyOwnedByYou" || ae.ErrorCode() == "BucketAlreadyExists")) {
		t.Fatalf("create bucket %s on %s: %v", testBucket, endpoint, err)
	}
	return client
}

func newEmulatorStore(t testing.TB, rt http.RoundTripper, opts ...s3.Option) *s3.Store {
	t.Helper()
	s, err := s3.New(emulatorClient(t, rt), testBucket, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestConformanceEmulator runs the shared suite against versitygw, with
// small listing pages so that pagination is exercised. versitygw's posix
// backend cannot nest keys, which the store declares (WithoutNestedKeys),
// and its GET can answer with one version's ETag and another's bytes, which
// cloudtest.GuardTornGets re-reads (TestGetIsOneRequest pins that the
// adapter itself takes both from one response).
func TestConformanceEmulator(t *testing.T) {
	client := emulatorClient(t, nil)
	conformance.Run(t, func(t *testing.T) casstore.Store {
		s, err := s3.New(client, testBucket, s3.WithPageSize(7), s3.WithoutNestedKeys(cloudtest.VersitygwNestedKeysGap))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return cloudtest.GuardTornGets(t, s)
	})
}

// TestGetIsOneRequest checks that Get takes the bytes and the Version from
// one GetObject response, never from a HEAD and a GET that could see two
// different versions.
func TestGetIsOneRequest(t *testing.T) {
	rec := &cloudtest.Recorder{}
	s := newEmulatorStore(t, rec)
	cloudtest.CheckGetIsOneRequest(t, s, rec, "one-request/"+strings.ReplaceAll(t.Name(), "/", "_"))
}

// TestWithoutNestedKeys checks the declared gap, by option and by URL.
func TestWithoutNestedKeys(t *testing.T) {
	s := newEmulatorStore(t, nil, s3.WithoutNestedKeys("test server"))
	if c := s.Capabilities(); c.NestedKeys || !strings.Contains(strings.Join(c.Gaps, ";"), "test server") {
		t.Fatalf("capabilities %+v: want NestedKeys=false with the reason", c)
	}
	if c := newEmulatorStore(t, nil).Capabilities(); !c.NestedKeys {
		t.Fatalf("default capabilities %+v: want NestedKeys=true (real S3)", c)
	}
	for u, want := range map[string]bool{
		"s3://bucket?region=us-east-1":                   true,
		"s3://bucket?region=us-east-1&nested_keys=true":  true,
		"s3://bucket?region=us-east-1&nested_keys=false": false,
	} {
		t.Setenv("AWS_ACCESS_KEY_ID", "x")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "y")
		t.Setenv("AWS_CONFIG_FILE", os.DevNull)
		t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
		st, err := casstore.Open(context.Background(), u)
		if err != nil {
			t.Fatalf("Open(%q): %v", u, err)
		}
		c := st.Capabilities()
		st.Close()
		if c.NestedKeys != want || (!want && !strings.Contains(strings.Join(c.Gaps, ";"), "nested_keys=false")) {
			t.Errorf("Open(%q) capabilities %+v; want NestedKeys=%v with the reason when false", u, c, want)
		}
	}
}

// TestConformanceURL opens the store the way a user does, through
// casstore.Open, against the emulator.
func TestConformanceURL(t *testing.T) {
	endpoint := cloudtest.Env(t, "OBJWAL_S3_EMULATOR_ENDPOINT", "S3 (versitygw)")
	emulatorClient(t, nil) // creates the bucket
	t.Setenv("AWS_ACCESS_KEY_ID", os.Getenv("OBJWAL_S3_EMULATOR_ACCESS_KEY"))
	t.Setenv("AWS_SECRET_ACCESS_KEY", os.Getenv("OBJWAL_S3_EMULATOR_SECRET_KEY"))
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	u := "s3://" + testBucket + "/via-url?endpoint=" + url.QueryEscape(endpoint) + "&use_path_style=true&region=us-east-1"
	ctx := context.Background()
	s, err := casstore.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v, err := s.Put(ctx, "k", []byte("hello"), casstore.IfAbsent())
	if err != nil {
		t.Fatal(err)
	}
	// The path became a key prefix in the bucket.
	raw := newEmulatorStore(t, nil)
	data, info, err := raw.Get(ctx, "via-url/k")
	if err != nil || string(data) != "hello" || info.Version != v {
		t.Fatalf("raw Get(via-url/k) = %q, %+v, %v; want hello at version %q", data, info, err, v)
	}
	if err := s.Delete(ctx, "k", casstore.IfMatch(v)); err != nil {
		t.Fatal(err)
	}
}

// TestConformanceRealBucket runs the suite against a real bucket named by
// OBJWAL_TEST_S3_URL (a casstore.Open URL; credentials from the SDK chain).
func TestConformanceRealBucket(t *testing.T) {
	cloudtest.RunRealBucket(t, "OBJWAL_TEST_S3_URL", "real S3 bucket")
}

// TestLostReplyIsNotALoss sends conditional puts whose replies are lost
// after the emulator applied them (see cloudtest.RunLostReply).
func TestLostReplyIsNotALoss(t *testing.T) {
	cloudtest.RunLostReply(t, func(t *testing.T, rt http.RoundTripper) casstore.Store { return newEmulatorStore(t, rt) })
}

// TestIfMatchOnMissingKey checks the 404 answer to If-Match on a key that
// does not exist maps to ErrPreconditionFailed, for put and delete.
func TestIfMatchOnMissingKey(t *testing.T) {
	s := newEmulatorStore(t, nil)
	ctx := context.Background()
	if _, err := s.Put(ctx, "missing/put", []byte("x"), casstore.IfMatch("0123456789abcdef0123456789abcdef")); !errors.Is(err, casstore.ErrPreconditionFailed) {
		t.Fatalf("IfMatch put on a missing key: %v; want ErrPreconditionFailed", err)
	}
	if err := s.Delete(ctx, "missing/del", casstore.IfMatch("0123456789abcdef0123456789abcdef")); !errors.Is(err, casstore.ErrPreconditionFailed) {
		t.Fatalf("IfMatch delete on a missing key: %v; want ErrPreconditionFailed", err)
	}
}

// TestWithoutConditionalDelete checks the declared gap refuses rather than
// deleting blindly.
func TestWithoutConditionalDelete(t *testing.T) {
	s := newEmulatorStore(t, nil, s3.WithoutConditionalDelete("test server"))
	ctx := context.Background()
	v, err := s.Put(ctx, "nodel/k", []byte("x"), casstore.None())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "nodel/k", casstore.IfMatch(v)); !errors.Is(err, casstore.ErrUnsupported) {
		t.Fatalf("conditional delete: %v; want ErrUnsupported", err)
	}
	if _, err := s.Stat(ctx, "nodel/k"); err != nil {
		t.Fatalf("object gone after a refused delete: %v", err)
	}
	c := s.Capabilities()
	if c.DeleteIfMatch || !strings.Contains(strings.Join(c.Gaps, ";"), "test server") {
		t.Fatalf("capabilities %+v: want DeleteIfMatch=false with the reason", c)
	}
	_ = s.Delete(ctx, "nodel/k", casstore.None())
}

// TestOpenURLErrors checks bad URLs give clear ErrInvalidURL errors
// without touching the network.
func TestOpenURLErrors(t *testing.T) {
	cloudtest.CheckOpenErrors(t, []cloudtest.OpenErrorCase{
		{URL: "s3:///prefix", Want: "missing bucket"},
		{URL: "s3://bucket?regoin=eu-west-1", Want: "unknown parameter(s) regoin"},
		{URL: "s3://bucket?use_path_style=maybe", Want: "not a boolean"},
		{URL: "s3://bucket?nested_keys=maybe", Want: "nested_keys"},
		{URL: "s3://bucket?request_checksum_calculation=sometimes", Want: "request_checksum_calculation"},
		{URL: "s3://bucket?endpoint=not-a-url", Want: "endpoint"},
		{URL: "s4://bucket", Want: "unknown scheme"},
	})
}

// BenchmarkConditionalPut measures the round trip of an If-Match put on the
// emulator.
func BenchmarkConditionalPut(b *testing.B) {
	cloudtest.BenchConditionalPut(b, newEmulatorStore(b, nil))
}
