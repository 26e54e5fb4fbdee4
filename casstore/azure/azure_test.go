package azure_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/casstore/azure"
	"github.com/objwal/objwal/casstore/cloud/cloudtest"
	"github.com/objwal/objwal/casstore/conformance"
)

const testContainer = "objwal-test"

// emulatorClient returns a container client for the Azurite that
// scripts/emulators.sh started, carrying requests through rt when it is
// non-nil, and makes sure the container exists.
func emulatorClient(t testing.TB, rt http.RoundTripper) *container.Client {
	t.Helper()
	endpoint := cloudtest.Env(t, "OBJWAL_AZURITE_ENDPOINT", "Azure (Azurite)")
	cred, err := azblob.NewSharedKeyCredential(cloudtest.AzuriteAccount, cloudtest.AzuriteKey)
	if err != nil {
		t.Fatal(err)
	}
	opts := &container.ClientOptions{}
	if rt != nil {
		opts.Transport = &http.Client{Transport: rt}
	}
	c, err := container.NewClientWithSharedKeyCredential(strings.TrimSuffix(endpoint, "/")+"/"+testContainer, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(context.Background(), nil); err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
		t.Fatalf("create container %s: %v", testContainer, err)
	}
	return c
}

func newEmulatorStore(t testing.TB, rt http.RoundTripper) *azure.Store {
	t.Helper()
	s, err := azure.New(emulatorClient(t, rt))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestConformanceEmulator runs the shared suite against Azurite.
func TestConformanceEmulator(t *testing.T) {
	client := emulatorClient(t, nil)
	conformance.Run(t, func(t *testing.T) casstore.Store {
		s, err := azure.New(client, azure.WithPageSize(7))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// TestBackslashKeyRefused: Azure turns a backslash into a slash in blob
// names, so `a\b` would silently alias `a/b`. The adapter refuses such keys
// with ErrInvalidKey (the suite's BackslashKey case then skips with that
// reason); this test pins the refusal and that nothing was written.
func TestBackslashKeyRefused(t *testing.T) {
	s := newEmulatorStore(t, nil)
	ctx := context.Background()
	if _, err := s.Put(ctx, `odd/back\slash`, []byte("x"), casstore.None()); !errors.Is(err, casstore.ErrInvalidKey) {
		t.Fatalf("Put of a backslash key: %v; want ErrInvalidKey", err)
	}
	if _, err := s.Stat(ctx, "odd/back/slash"); !errors.Is(err, casstore.ErrNotFound) {
		t.Fatalf("Stat of the aliased key after a refused Put: %v; want ErrNotFound", err)
	}
}

// TestConformanceRealBucket runs the suite against a real container named by
// OBJWAL_TEST_AZURE_URL.
func TestConformanceRealBucket(t *testing.T) {
	cloudtest.RunRealBucket(t, "OBJWAL_TEST_AZURE_URL", "real Azure container")
}

// TestOpenURL opens azblob:// with localemu through casstore.Open, with the
// account and key from the environment as a user would set them.
func TestOpenURL(t *testing.T) {
	raw := newEmulatorStore(t, nil)
	eu, err := url.Parse(os.Getenv("OBJWAL_AZURITE_ENDPOINT"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AZURE_STORAGE_ACCOUNT", cloudtest.AzuriteAccount)
	t.Setenv("AZURE_STORAGE_KEY", cloudtest.AzuriteKey)
	ctx := context.Background()
	s, err := casstore.Open(ctx, "azblob://"+testContainer+"/via-url?localemu=true&protocol=http&domain="+eu.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v, err := s.Put(ctx, "k", []byte("hello"), casstore.IfAbsent())
	if err != nil {
		t.Fatal(err)
	}
	data, info, err := raw.Get(ctx, "via-url/k")
	if err != nil || string(data) != "hello" || info.Version != v {
		t.Fatalf("raw Get(via-url/k) = %q, %+v, %v; want hello at version %q", data, info, err, v)
	}
	if err := s.Delete(ctx, "k", casstore.IfMatch(v)); err != nil {
		t.Fatal(err)
	}
}

// TestCreateOnlyAnswers409: Azurite answers 409 BlobAlreadyExists to a
// create-only put on an existing blob; the adapter must say ErrAlreadyExists.
func TestCreateOnlyAnswers409(t *testing.T) {
	s := newEmulatorStore(t, nil)
	ctx := context.Background()
	key := "create-only-409"
	_ = s.Delete(ctx, key, casstore.None())
	if _, err := s.Put(ctx, key, []byte("a"), casstore.IfAbsent()); err != nil {
		t.Fatal(err)
	}
	_, err := s.Put(ctx, key, []byte("b"), casstore.IfAbsent())
	if !errors.Is(err, casstore.ErrAlreadyExists) {
		t.Fatalf("second create-only put: %v; want ErrAlreadyExists", err)
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("the backend's error is not kept under the sentinel: %v", err)
	}
	t.Logf("emulator answered %d %s", re.StatusCode, re.ErrorCode)
}

// TestLostReplyIsNotALoss: see cloudtest.RunLostReply.
func TestLostReplyIsNotALoss(t *testing.T) {
	cloudtest.RunLostReply(t, func(t *testing.T, rt http.RoundTripper) casstore.Store { return newEmulatorStore(t, rt) })
}

// TestSDKWouldRetry shows the lost-reply test can fail: the same client
// without the adapter's per-call override retries the conditional put and
// reports the write it made as lost.
func TestSDKWouldRetry(t *testing.T) {
	lossy := &cloudtest.LossyTransport{Match: cloudtest.Conditional}
	c := emulatorClient(t, lossy)
	ctx := policy.WithRetryOptions(context.Background(), policy.RetryOptions{MaxRetries: 2, RetryDelay: 1, MaxRetryDelay: 1})
	key := "sdk-would-retry"
	_, _ = c.NewBlobClient(key).Delete(ctx, nil)
	lossy.Arm(1)
	star := azcore.ETagAny
	_, err := c.NewBlockBlobClient(key).UploadBuffer(ctx, []byte("x"), &azblob.UploadBufferOptions{
		AccessConditions: &azblob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: &star}},
	})
	if !bloberror.HasCode(err, bloberror.BlobAlreadyExists, bloberror.ConditionNotMet) {
		t.Fatalf("plain SDK with retries after a lost reply: %v; want the retry to meet its own write (409/412)", err)
	}
}

// TestOpenURLErrors checks bad URLs give clear ErrInvalidURL errors.
func TestOpenURLErrors(t *testing.T) {
	t.Setenv("AZURE_STORAGE_ACCOUNT", "acct")
	t.Setenv("AZURE_STORAGE_KEY", "")
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", "")
	cloudtest.CheckOpenErrors(t, []cloudtest.OpenErrorCase{
		{URL: "azblob:///prefix", Want: "missing container"},
		{URL: "azblob://c?local_emu=true", Want: "unknown parameter(s) local_emu"},
		{URL: "azblob://c?localemu=yes-please", Want: "not a boolean"},
		{URL: "azblob://c?localemu=true&domain=10.1.2.3:10000", Want: "not a loopback"},
		{URL: "azblob://c?domain=evil.example.com", Want: "not an Azure blob endpoint"},
		{URL: "azblob://c?protocol=http", Want: "only allowed with localemu"},
		{URL: "azure://c", Want: "unknown scheme"},
	})
}

// BenchmarkConditionalPut measures the round trip of an If-Match put on the
// emulator.
func BenchmarkConditionalPut(b *testing.B) {
	cloudtest.BenchConditionalPut(b, newEmulatorStore(b, nil))
}
