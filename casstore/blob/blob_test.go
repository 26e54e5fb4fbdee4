package blob_test

import (
	"bytes"
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

const (
	testBucket     = "objwal-test-blob"
	azuriteAccount = "devstoreaccount1"
	// Azurite's documented, public development key.
	azuriteKey = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

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
		return cloudtest.GuardTornGets(t, open(t, u))
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
	key := "one-request/get"
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
		return open(t, "blob+gs://"+testBucket)
	})
}

// --- Azure (Azurite) ---

func azureContainer(t testing.TB, rt http.RoundTripper) *container.Client {
	t.Helper()
	endpoint := cloudtest.Env(t, "OBJWAL_AZURITE_ENDPOINT", "Azure (Azurite)")
	cred, err := azblob.NewSharedKeyCredential(azuriteAccount, azuriteKey)
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
	t.Setenv("AZURE_STORAGE_ACCOUNT", azuriteAccount)
	t.Setenv("AZURE_STORAGE_KEY", azuriteKey)
	u := "blob+azblob://" + testBucket + "?localemu=true&protocol=http&domain=" + eu.Host
	conformance.Run(t, func(t *testing.T) casstore.Store { return open(t, u) })
}

// TestConformanceMem lifts memblob: create-only only; the cases that need
// IfMatch or conditional delete check ErrUnsupported and skip.
func TestConformanceMem(t *testing.T) {
	conformance.Run(t, func(t *testing.T) casstore.Store { return open(t, "blob+mem://") })
}

func open(t *testing.T, u string) casstore.Store {
	t.Helper()
	s, err := casstore.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestLostReplyIsNotALoss: a conditional put whose reply is lost after the
// emulator applied it must not come back as ErrAlreadyExists or
// ErrPreconditionFailed (see the s3 package's test of the same name), for
// each lifted driver.
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
			key := "lost-reply/" + name
			_ = s.Delete(ctx, key, casstore.None())

			lossy.Arm(1)
			_, err = s.Put(ctx, key, []byte("first"), casstore.IfAbsent())
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
		{"blob+s3:///prefix", "missing bucket"},
		{"blob+gs://b?colour=blue", "colour"},
		{"blob+s3://b?regoin=x", "regoin"},
		{"blob+ftp://b", "unknown scheme"},
		{"blob+mem://?nested_keys=maybe", "nested_keys"},
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
			data := bytes.Repeat([]byte("x"), 1024)
			v, err := s.Put(ctx, "bench/conditional-put", data, casstore.None())
			if err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				i++
				data[0] = byte(i)
				if v, err = s.Put(ctx, "bench/conditional-put", data, casstore.IfMatch(v)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
