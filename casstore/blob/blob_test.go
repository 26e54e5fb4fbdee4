package blob_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	gcblob "gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcp"
	"google.golang.org/api/option"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/casstore/blob"
	"github.com/objwal/objwal/casstore/cloud/cloudtest"
	"github.com/objwal/objwal/casstore/conformance"
)

const testBucket = "objwal-test-blob"

// --- S3 (versitygw) ---

func s3Client(t testing.TB, rt http.RoundTripper) *awss3.Client {
	t.Helper()
	endpoint := cloudtest.Env(t, "OBJWAL_S3_EMULATOR_ENDPOINT", "S3 (versitygw)")
	hc := &http.Client{}
	if rt != nil {
		hc.Transport = rt
	}
	c := awss3.New(awss3.Options{
		BaseEndpoint: aws.String(endpoint), UsePathStyle: true, Region: "us-east-1", HTTPClient: hc,
		Credentials: credentials.NewStaticCredentialsProvider(os.Getenv("OBJWAL_S3_EMULATOR_ACCESS_KEY"), os.Getenv("OBJWAL_S3_EMULATOR_SECRET_KEY"), ""),
	})
	_, err := c.CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: aws.String(testBucket)})
	var ae smithy.APIError
	if err != nil && !(errors.As(err, &ae) && strings.HasPrefix(ae.ErrorCode(), "BucketAlready")) {
		t.Fatalf("create bucket: %v", err)
	}
	return c
}

// TestConformanceS3 lifts a gocloud bucket opened from a blob+s3:// URL.
// versitygw's posix backend cannot nest keys, which the URL declares
// (nested_keys=false), and its GET can answer with one version's ETag and
// another's bytes, which cloudtest.GuardTornGets re-reads
// (TestGetIsOneRequest pins that the lifted store itself takes both from one
// response).
func TestConformanceS3(t *testing.T) {
	endpoint := cloudtest.Env(t, "OBJWAL_S3_EMULATOR_ENDPOINT", "S3 (versitygw)")
	s3Client(t, nil)
	t.Setenv("AWS_ACCESS_KEY_ID", os.Getenv("OBJWAL_S3_EMULATOR_ACCESS_KEY"))
	t.Setenv("AWS_SECRET_ACCESS_KEY", os.Getenv("OBJWAL_S3_EMULATOR_SECRET_KEY"))
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	u := "blob+s3://" + testBucket + "?endpoint=" + url.QueryEscape(endpoint) + "&use_path_style=true&region=us-east-1&nested_keys=false"
	conformance.Run(t, func(t *testing.T) casstore.Store {
		return cloudtest.GuardTornGets(t, cloudtest.Open(t, u))
	})
}

// TestGetIsOneRequest checks that the lifted s3blob store takes the bytes
// and the Version of a Get from one GetObject response, never from a HEAD
// and a GET that could see two different versions.
func TestGetIsOneRequest(t *testing.T) {
	ctx := context.Background()
	rec := &cloudtest.Recorder{}
	b, err := s3blob.OpenBucket(ctx, s3Client(t, rec), testBucket, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s, err := blob.Lift(b)
	if err != nil {
		t.Fatal(err)
	}
	cloudtest.CheckGetIsOneRequest(t, s, rec, "one-request/get")
}

// TestNestedKeysDeclared checks which lifted stores declare NestedKeys: the
// clouds' drivers and memblob do, fileblob and a URL with nested_keys=false
// do not, with a reason.
func TestNestedKeysDeclared(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "x")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "y")
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	dir := t.TempDir()
	for _, tc := range []struct {
		url    string
		nested bool
		gap    string
	}{
		{"blob+s3://b?region=us-east-1", true, ""},
		{"blob+s3://b/p?region=us-east-1&nested_keys=true", true, ""},
		{"blob+s3://b/p?region=us-east-1&nested_keys=false", false, "nested_keys=false"},
		{"blob+mem://", true, ""},
		{"blob+mem://?nested_keys=false", false, "nested_keys=false"},
		{"blob+file://" + dir, false, "fileblob stores each key as a file"},
	} {
		s, err := casstore.Open(context.Background(), tc.url)
		if err != nil {
			t.Errorf("Open(%q): %v", tc.url, err)
			continue
		}
		c := s.Capabilities()
		_ = s.Close()
		if c.NestedKeys != tc.nested || (tc.gap != "" && !strings.Contains(strings.Join(c.Gaps, ";"), tc.gap)) {
			t.Errorf("Open(%q) capabilities %+v; want NestedKeys=%v with gap %q", tc.url, c, tc.nested, tc.gap)
		}
	}
	// fileblob, declared flat, refuses a key below a key with an error and
	// keeps the first object.
	s, err := casstore.Open(context.Background(), "blob+file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Put(ctx, "a", []byte("a"), casstore.None()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "a/b", []byte("a/b"), casstore.None()); err == nil {
		t.Errorf("fileblob stored a/b beside a; it should then declare NestedKeys")
	}
	if b, _, err := s.Get(ctx, "a"); err != nil || string(b) != "a" {
		t.Errorf("after the refused a/b: Get(a) = %q, %v", b, err)
	}
}

// --- GCS (fake-gcs-server) ---

func gcsEnsureBucket(t testing.TB) {
	t.Helper()
	cloudtest.Env(t, "STORAGE_EMULATOR_HOST", "GCS (fake-gcs-server)")
	c, err := storage.NewClient(context.Background(), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Bucket(testBucket).Create(context.Background(), "objwal-test-project", nil); err != nil && !strings.Contains(err.Error(), "409") && !strings.Contains(strings.ToLower(err.Error()), "already") {
		t.Fatalf("create bucket: %v", err)
	}
}

// TestConformanceGCS lifts a gocloud bucket opened from a blob+gs:// URL.
// fake-gcs-server ignores ifGenerationMatch on delete, so the suite's
// conditional delete case is skipped with that reason.
func TestConformanceGCS(t *testing.T) {
	gcsEnsureBucket(t)
	conformance.Run(t, func(t *testing.T) casstore.Store {
		if strings.HasSuffix(t.Name(), "/DeleteIfMatch") {
			t.Skip("declared emulator gap: fake-gcs-server ignores ifGenerationMatch on delete")
		}
		return cloudtest.Open(t, "blob+gs://"+testBucket)
	})
}

// --- Azure (Azurite) ---

func azureContainer(t testing.TB, rt http.RoundTripper) *container.Client {
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
	c, err := container.NewClientWithSharedKeyCredential(strings.TrimSuffix(endpoint, "/")+"/"+testBucket, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(context.Background(), nil); err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
		t.Fatalf("create container: %v", err)
	}
	return c
}

// TestConformanceAzure lifts a gocloud bucket opened from a blob+azblob://
// URL with localemu.
func TestConformanceAzure(t *testing.T) {
	azureContainer(t, nil)
	eu, err := url.Parse(os.Getenv("OBJWAL_AZURITE_ENDPOINT"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AZURE_STORAGE_ACCOUNT", cloudtest.AzuriteAccount)
	t.Setenv("AZURE_STORAGE_KEY", cloudtest.AzuriteKey)
	u := "blob+azblob://" + testBucket + "?localemu=true&protocol=http&domain=" + eu.Host
	conformance.Run(t, func(t *testing.T) casstore.Store { return cloudtest.Open(t, u) })
}

// TestConformanceMem lifts memblob: create-only only; the cases that need
// IfMatch or conditional delete check ErrUnsupported and skip.
func TestConformanceMem(t *testing.T) {
	conformance.Run(t, func(t *testing.T) casstore.Store { return cloudtest.Open(t, "blob+mem://") })
}

// TestLostReplyIsNotALoss: a conditional put whose reply is lost after the
// emulator applied it must not come back as ErrAlreadyExists or
// ErrPreconditionFailed (see cloudtest.LostReply), for each lifted driver.
func TestLostReplyIsNotALoss(t *testing.T) {
	ctx := context.Background()
	lifts := map[string]func(t *testing.T, rt http.RoundTripper) *gcblob.Bucket{
		"s3": func(t *testing.T, rt http.RoundTripper) *gcblob.Bucket {
			b, err := s3blob.OpenBucket(ctx, s3Client(t, rt), testBucket, nil)
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		"gs": func(t *testing.T, rt http.RoundTripper) *gcblob.Bucket {
			gcsEnsureBucket(t)
			// Under STORAGE_EMULATOR_HOST gcsblob ignores a gcp.HTTPClient;
			// hand it a storage client that carries the lossy transport.
			c, err := storage.NewClient(ctx, option.WithHTTPClient(&http.Client{Transport: rt}))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			b, err := gcsblob.OpenBucket(ctx, nil, testBucket, &gcsblob.Options{Client: c})
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		"azblob": func(t *testing.T, rt http.RoundTripper) *gcblob.Bucket {
			b, err := azureblob.OpenBucket(ctx, azureContainer(t, rt), nil)
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	}
	for name, lift := range lifts {
		t.Run(name, func(t *testing.T) {
			lossy := &cloudtest.LossyTransport{Match: cloudtest.Conditional}
			b := lift(t, lossy)
			defer b.Close()
			s, err := blob.Lift(b)
			if err != nil {
				t.Fatal(err)
			}
			cloudtest.LostReply(t, s, lossy, "lost-reply/"+name)
		})
	}
}

// TestOpenURLErrors checks bad URLs give clear ErrInvalidURL errors.
func TestOpenURLErrors(t *testing.T) {
	cloudtest.CheckOpenErrors(t, []cloudtest.OpenErrorCase{
		{URL: "blob+s3:///prefix", Want: "missing bucket"},
		{URL: "blob+gs://b?colour=blue", Want: "colour"},
		{URL: "blob+s3://b?regoin=x", Want: "regoin"},
		{URL: "blob+ftp://b", Want: "unknown scheme"},
		{URL: "blob+mem://?nested_keys=maybe", Want: "nested_keys"},
	})
}

// BenchmarkConditionalPut measures an If-Match put through each lifted
// driver on its emulator.
func BenchmarkConditionalPut(b *testing.B) {
	ctx := context.Background()
	for _, name := range []string{"s3", "gs", "azblob"} {
		b.Run(name, func(b *testing.B) {
			var bk *gcblob.Bucket
			var err error
			switch name {
			case "s3":
				bk, err = s3blob.OpenBucket(ctx, s3Client(b, nil), testBucket, nil)
			case "gs":
				gcsEnsureBucket(b)
				bk, err = gcsblob.OpenBucket(ctx, &gcp.HTTPClient{}, testBucket, nil)
			case "azblob":
				bk, err = azureblob.OpenBucket(ctx, azureContainer(b, nil), nil)
			}
			if err != nil {
				b.Fatal(err)
			}
			defer bk.Close()
			s, _ := blob.Lift(bk)
			cloudtest.BenchConditionalPut(b, s)
		})
	}
}
