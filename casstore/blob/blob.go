// Package blob lifts a gocloud.dev/blob *blob.Bucket into a casstore.Store,
// so that any bucket a program already opens through the Go CDK can carry an
// objwal log.
//
// Conditions are passed to the driver underneath through the Go CDK's own
// hooks:
//
//   - create-only (IfAbsent): blob.WriterOptions.IfNotExist, for every driver
//     that supports it (s3blob, gcsblob, azureblob, fileblob, memblob);
//   - replace (IfMatch) and conditional delete: WriterOptions.BeforeWrite and
//     DeleteOptions.BeforeDelete, through As, for s3blob (If-Match on the
//     upload), gcsblob (GenerationMatch on the object handle) and azureblob
//     (If-Match access condition). Other drivers (fileblob, memblob) cannot
//     replace or delete conditionally: they declare it in Capabilities and
//     return casstore.ErrUnsupported without writing.
//
// The Version is what the native adapter of the same cloud uses: the ETag on
// S3 and Azure, the generation on GCS (read through As), so IfMatch compares
// what the cloud compares, and Get takes it from the same response as the
// bytes. On other drivers it is the driver's ETag, which for fileblob and
// memblob is made of the modification time and size and comes from a call of
// its own (Attributes): Get and Put pair it with the bytes by that
// modification time and size, so that a concurrent write cannot make them
// report another write's version.
//
// Conditional writes are sent once, never retried blindly (a retried
// conditional write whose first attempt landed would report a success as
// lost): on S3 the upload goes through a transfer manager whose PutObject and
// CompleteMultipartUpload calls carry aws.NopRetryer, and a conditional
// DeleteObject is sent by this package on the bucket's own *s3.Client with
// aws.NopRetryer (the request is prepared by s3blob and captured in
// BeforeDelete); on GCS the object handle gets storage.RetryNever; on Azure
// the call's context carries retry options with MaxRetries -1. A lost reply
// surfaces as a transport error.
//
// # URLs
//
// gocloud.dev/blob's own schemes (s3, gs, azblob, file, mem) belong to the
// native adapters in casstore, so this package registers the same URLs under
// a "blob+" prefix, strips it and hands the rest to blob.OpenBucket:
//
//	blob+s3://bucket/prefix?region=eu-west-1
//	blob+gs://bucket/prefix
//	blob+azblob://container/prefix?localemu=true&domain=127.0.0.1:10000&protocol=http
//	blob+file:///var/lib/objwal
//	blob+mem://
//
// Every query parameter but one is the driver's own and is checked by the
// driver (unknown ones are refused). The exception is objwal's
// nested_keys=false, taken out before the driver sees the URL: it declares
// that the server behind the bucket stores keys as files, so that a key and
// keys below it ("a" and "a/b") cannot coexist (versitygw's posix backend,
// MinIO on a file system), as WithoutNestedKeys does. For s3, gs and azblob the URL path becomes a
// key prefix (as in the native adapters); for file it is the directory; mem
// opens a new, empty bucket each time. The Store opened from a URL owns the
// bucket and closes it in Close; Lift leaves a caller's bucket open.
package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	gcstorage "cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	azblobblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	gcblob "gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // registers azblob:// with gocloud
	_ "gocloud.dev/blob/fileblob"  // registers file://
	_ "gocloud.dev/blob/gcsblob"   // registers gs://
	_ "gocloud.dev/blob/memblob"   // registers mem://
	_ "gocloud.dev/blob/s3blob"    // registers s3://
	"gocloud.dev/gcerrors"
	"google.golang.org/api/googleapi"

	"github.com/objwal/objwal/casstore"
)

// SchemePrefix is put before a gocloud.dev/blob scheme to name the lifted
// store in casstore.Open ("blob+s3", "blob+gs", ...).
const SchemePrefix = "blob+"

// Schemes are the gocloud.dev/blob schemes registered with casstore.Open
// under SchemePrefix.
var Schemes = []string{"s3", "gs", "azblob", "file", "mem"}

func init() {
	for _, s := range Schemes {
		casstore.Register(SchemePrefix+s, openURL)
	}
}

type kind uint8

const (
	kindOther kind = iota
	kindS3
	kindGCS
	kindAzure
	kindFile // fileblob: recognised for its nested-keys gap only
)

// conditional reports whether the driver can replace and delete
// conditionally (through As, see the package documentation).
func (k kind) conditional() bool { return k == kindS3 || k == kindGCS || k == kindAzure }

func (k kind) String() string {
	switch k {
	case kindS3:
		return "s3blob"
	case kindGCS:
		return "gcsblob"
	case kindAzure:
		return "azureblob"
	case kindFile:
		return "fileblob"
	}
	return "this driver"
}

// Store is a casstore.Store on a gocloud.dev/blob bucket. Create it with
// Lift or open it with casstore.Open("blob+...").
type Store struct {
	b      *gcblob.Bucket
	kind   kind
	s3     *awss3.Client // kindS3: the bucket's own client
	owns   bool
	page   int
	flat   string // WithoutNestedKeys: the reason; "" if keys may nest
	closed atomic.Bool
}

// Option configures a Store.
type Option func(*Store)

// WithPageSize sets the listing page size (the default lets the driver
// choose). Small pages exercise pagination.
func WithPageSize(n int) Option {
	return func(s *Store) {
		if n > 0 {
			s.page = n
		}
	}
}

// WithoutNestedKeys declares that the storage behind the bucket cannot hold
// a key together with keys below it ("a" and "a/b"), as S3-compatible
// servers that keep each key as a file cannot (versitygw's posix backend,
// MinIO on a file system): Capabilities then reports NestedKeys=false with
// reason as its gap. It changes no request. fileblob buckets are recognised
// and declare the gap without this option.
func WithoutNestedKeys(reason string) Option {
	return func(s *Store) {
		if reason == "" {
			reason = "the storage keeps keys as files: a key and keys below it (a and a/b) cannot coexist"
		}
		s.flat = reason
	}
}

// Lift returns a Store on b. The driver under b is recognised through As
// (s3blob, gcsblob, azureblob); any other driver gets create-only writes
// only. The caller keeps ownership of b: Close does not close it.
func Lift(b *gcblob.Bucket, opts ...Option) (*Store, error) {
	if b == nil {
		return nil, fmt.Errorf("casstore/blob: nil bucket")
	}
	s := &Store{b: b}
	var s3c *awss3.Client
	var gc *gcstorage.Client
	var ac *container.Client
	var fi os.FileInfo
	switch {
	case b.As(&s3c):
		s.kind, s.s3 = kindS3, s3c
	case b.As(&gc):
		s.kind = kindGCS
	case b.As(&ac):
		s.kind = kindAzure
	case b.As(&fi):
		s.kind = kindFile
	}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// openURL implements casstore.OpenFunc for the blob+ schemes.
func openURL(ctx context.Context, u *url.URL) (casstore.Store, error) {
	inner := *u
	inner.Scheme = strings.TrimPrefix(u.Scheme, SchemePrefix)
	var opts []Option
	q := inner.Query()
	if v, ok := q["nested_keys"]; ok {
		nested, err := strconv.ParseBool(v[len(v)-1])
		if err != nil || len(v) > 1 {
			return nil, fmt.Errorf("%w: nested_keys=%q is not a single boolean", casstore.ErrInvalidURL, strings.Join(v, ","))
		}
		if !nested {
			opts = append(opts, WithoutNestedKeys("nested_keys=false: the server stores keys as files, so a key and keys below it (a and a/b) cannot coexist"))
		}
		q.Del("nested_keys")
		inner.RawQuery = q.Encode()
	}
	prefix := ""
	switch inner.Scheme {
	case "s3", "gs", "azblob":
		if u.Host == "" {
			return nil, fmt.Errorf("%w: missing bucket name (want %s://bucket/prefix)", casstore.ErrInvalidURL, u.Scheme)
		}
		prefix = casstore.PrefixFromPath(u.Path)
		inner.Path, inner.RawPath = "", ""
	}
	b, err := gcblob.OpenBucket(ctx, inner.String())
	if err != nil {
		// Opening is lazy for every driver here: a failure is the URL's
		// (unknown or malformed parameter), never a secret.
		return nil, fmt.Errorf("%w: %v", casstore.ErrInvalidURL, err)
	}
	s, err := Lift(b, opts...)
	if err != nil {
		_ = b.Close()
		return nil, err
	}
	s.owns = true
	return casstore.WithPrefix(s, prefix), nil
}

func (s *Store) check(ctx context.Context, op, key string) error {
	return casstore.CheckCall(ctx, s.closed.Load(), op, key)
}

// Get implements casstore.Store. The version comes from the same response
// as the bytes on s3blob, gcsblob and azureblob; on other drivers see
// getPaired.
func (s *Store) Get(ctx context.Context, key string) ([]byte, casstore.ObjectInfo, error) {
	if err := s.check(ctx, "get", key); err != nil {
		return nil, casstore.ObjectInfo{}, err
	}
	if !s.kind.conditional() {
		return s.getPaired(ctx, key)
	}
	r, err := s.b.NewReader(ctx, key, nil)
	if err != nil {
		return nil, casstore.ObjectInfo{}, mapErr("get", key, casstore.None(), err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, casstore.ObjectInfo{}, mapErr("get", key, casstore.None(), err)
	}
	info := casstore.ObjectInfo{Key: key, Size: int64(len(data)), ModTime: r.ModTime()}
	switch s.kind {
	case kindS3:
		var out awss3.GetObjectOutput
		if r.As(&out) {
			info.Version = trimETag(aws.ToString(out.ETag))
		}
	case kindGCS:
		var gr *gcstorage.Reader
		if r.As(&gr) {
			info.Version = genVersion(gr.Attrs.Generation)
		}
	case kindAzure:
		var resp azblobblob.DownloadStreamResponse
		if r.As(&resp) && resp.ETag != nil {
			info.Version = trimETag(string(*resp.ETag))
		}
	}
	return data, info, nil
}

// pairedReads bounds getPaired's attempts.
const pairedReads = 5

// getPaired reads an object on a driver whose reader reports no version
// (fileblob, memblob, others): the version is the ETag from Attributes, a
// call of its own. Reading the attributes after the bytes paired one
// version's ETag with another version's bytes whenever a write landed in
// between (seen as a non-linearizable history on memblob). So the
// attributes are read first and taken only if the reader then serves the
// same modification time and size, the two things those drivers' ETags are
// made of; otherwise a write landed in between and the pair is read again.
// An object that keeps changing fails the read after pairedReads attempts.
func (s *Store) getPaired(ctx context.Context, key string) ([]byte, casstore.ObjectInfo, error) {
	for range pairedReads {
		a, err := s.b.Attributes(ctx, key)
		if err != nil {
			return nil, casstore.ObjectInfo{}, mapErr("get", key, casstore.None(), err)
		}
		r, err := s.b.NewReader(ctx, key, nil)
		if err != nil {
			return nil, casstore.ObjectInfo{}, mapErr("get", key, casstore.None(), err)
		}
		data, err := io.ReadAll(r)
		_ = r.Close()
		if err != nil {
			return nil, casstore.ObjectInfo{}, mapErr("get", key, casstore.None(), err)
		}
		if r.ModTime().Equal(a.ModTime) && r.Size() == a.Size && int64(len(data)) == a.Size {
			return data, casstore.ObjectInfo{Key: key, Size: a.Size, ModTime: a.ModTime, Version: trimETag(a.ETag)}, nil
		}
	}
	return nil, casstore.ObjectInfo{}, casstore.Wrap("get", key,
		fmt.Errorf("casstore/blob: %s: the object changed between its attributes and its bytes %d times in a row", s.kind, pairedReads))
}

// GetRange implements casstore.Store.
func (s *Store) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := s.check(ctx, "get-range", key); err != nil {
		return nil, err
	}
	if off < 0 || n < 0 {
		return nil, casstore.Wrap("get-range", key, casstore.ErrInvalidRange)
	}
	a, err := s.b.Attributes(ctx, key)
	if err != nil {
		return nil, mapErr("get-range", key, casstore.None(), err)
	}
	if n == 0 || off >= a.Size {
		return []byte{}, nil
	}
	length := min(n, a.Size-off)
	r, err := s.b.NewRangeReader(ctx, key, off, length, nil)
	if err != nil {
		if statusOf(err) == http.StatusRequestedRangeNotSatisfiable {
			return []byte{}, nil // shrank since Attributes
		}
		return nil, mapErr("get-range", key, casstore.None(), err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, mapErr("get-range", key, casstore.None(), err)
	}
	return data, nil
}

// Stat implements casstore.Store.
func (s *Store) Stat(ctx context.Context, key string) (casstore.ObjectInfo, error) {
	if err := s.check(ctx, "stat", key); err != nil {
		return casstore.ObjectInfo{}, err
	}
	a, err := s.b.Attributes(ctx, key)
	if err != nil {
		return casstore.ObjectInfo{}, mapErr("stat", key, casstore.None(), err)
	}
	info := casstore.ObjectInfo{Key: key, Size: a.Size, ModTime: a.ModTime, Version: trimETag(a.ETag)}
	if s.kind == kindGCS {
		var oa gcstorage.ObjectAttrs
		if a.As(&oa) {
			info.Version = genVersion(oa.Generation)
		}
	}
	return info, nil
}

// errCaptured aborts s3blob's own DeleteObject once BeforeDelete has
// captured the request this package sends itself.
var errCaptured = errors.New("casstore/blob: request captured")

// Put implements casstore.Store.
func (s *Store) Put(ctx context.Context, key string, data []byte, cond casstore.Condition) (casstore.Version, error) {
	if err := s.check(ctx, "put", key); err != nil {
		return "", err
	}
	opts := &gcblob.WriterOptions{ContentType: "application/octet-stream", DisableContentTypeDetection: true}
	switch cond.Kind() {
	case casstore.CondIfAbsent:
		opts.IfNotExist = true
	case casstore.CondIfMatch:
		if !s.kind.conditional() {
			return "", casstore.Wrap("put", key, fmt.Errorf("%w: %s cannot replace conditionally", casstore.ErrUnsupported, s.kind))
		}
		if cond.Version() == "" {
			return "", casstore.Wrap("put", key, casstore.ErrPreconditionFailed)
		}
	}
	if cond.Kind() == casstore.CondIfMatch && s.kind == kindGCS {
		if _, ok := parseGen(cond.Version()); !ok {
			return "", casstore.Wrap("put", key, casstore.ErrPreconditionFailed)
		}
	}
	var got casstore.Version
	var gw *gcstorage.Writer
	var capS3 *capturingS3
	var azResp *http.Response
	var tmIn *transfermanager.UploadObjectInput
	opts.BeforeWrite = func(as func(any) bool) error {
		switch s.kind {
		case kindS3:
			var tm *transfermanager.Client
			if !as(&tm) || !as(&tmIn) {
				return fmt.Errorf("casstore/blob: s3blob did not expose its transfer manager")
			}
			// Same client and checksum setting, but the call that
			// creates the object reports its ETag to us and, for a
			// conditional upload, runs exactly once.
			capS3 = &capturingS3{Client: s.s3, once: cond.Kind() != casstore.Unconditional}
			*tm = *transfermanager.New(capS3, func(o *transfermanager.Options) {
				o.RequestChecksumCalculation = s.s3.Options().RequestChecksumCalculation
			})
			if cond.Kind() == casstore.CondIfMatch {
				tmIn.IfMatch = aws.String(quoteETag(cond.Version()))
			}
		case kindGCS:
			var objp **gcstorage.ObjectHandle
			if !as(&objp) {
				return fmt.Errorf("casstore/blob: gcsblob did not expose its object handle")
			}
			if cond.Kind() == casstore.CondIfMatch {
				gen, _ := parseGen(cond.Version())
				*objp = (*objp).If(gcstorage.Conditions{GenerationMatch: gen})
			}
			*objp = (*objp).Retryer(gcstorage.WithPolicy(gcstorage.RetryNever))
			if !as(&gw) {
				return fmt.Errorf("casstore/blob: gcsblob did not expose its writer")
			}
			gw.ChunkSize = 0 // one request
		case kindAzure:
			var uo *azblob.UploadStreamOptions
			if !as(&uo) {
				return fmt.Errorf("casstore/blob: azureblob did not expose its upload options")
			}
			if cond.Kind() == casstore.CondIfMatch {
				et := azcore.ETag(quoteETag(cond.Version()))
				uo.AccessConditions = &azblob.AccessConditions{ModifiedAccessConditions: &azblobblob.ModifiedAccessConditions{IfMatch: &et}}
			}
		}
		return nil
	}
	wctx := ctx
	if s.kind == kindAzure {
		wctx = policy.WithRetryOptions(ctx, policy.RetryOptions{MaxRetries: -1})
		// The last response of the upload is the one that created the
		// blob (Put Blob or Put Block List): its ETag is our version.
		wctx = policy.WithCaptureResponse(wctx, &azResp)
	}
	w, err := s.b.NewWriter(wctx, key, opts)
	if err != nil {
		return "", mapErr("put", key, cond, err)
	}
	if _, err := io.Copy(w, bytes.NewReader(data)); err != nil {
		_ = w.Close()
		return "", mapErr("put", key, cond, err)
	}
	if err := w.Close(); err != nil {
		return "", mapErr("put", key, cond, err)
	}
	switch s.kind {
	case kindGCS:
		if gw != nil && gw.Attrs() != nil {
			got = genVersion(gw.Attrs().Generation)
		}
	case kindS3:
		if capS3 != nil {
			if e, ok := capS3.etag.Load().(string); ok {
				got = trimETag(e)
			}
		}
	case kindAzure:
		if azResp != nil {
			got = trimETag(azResp.Header.Get("ETag"))
		}
	default:
		// These drivers report no version for a write: read it back with
		// the bytes (getPaired) and take it only if the bytes are still
		// ours. Taking whatever Attributes said handed out the version of
		// a write that had replaced ours in the meantime (seen as a
		// non-linearizable history on memblob). When ours is already
		// replaced its version is lost: the write happened, the caller
		// hears an error that is no sentinel (an unknown outcome).
		back, info, err := s.getPaired(ctx, key)
		switch {
		case err != nil:
			return "", casstore.Wrap("put", key, fmt.Errorf("casstore/blob: %s: written, but reading back its version failed: %v", s.kind, err))
		case !bytes.Equal(back, data):
			return "", casstore.Wrap("put", key, fmt.Errorf("casstore/blob: %s: written, but replaced by another write before its version could be read", s.kind))
		}
		got = info.Version
	}
	if got == "" {
		return "", casstore.Wrap("put", key, fmt.Errorf("casstore/blob: %s did not report the new version", s.kind))
	}
	return got, nil
}

// Delete implements casstore.Store.
func (s *Store) Delete(ctx context.Context, key string, cond casstore.Condition) error {
	if err := s.check(ctx, "delete", key); err != nil {
		return err
	}
	opts := &gcblob.DeleteOptions{}
	dctx := ctx
	var captured *awss3.DeleteObjectInput
	switch cond.Kind() {
	case casstore.CondIfAbsent:
		return casstore.Wrap("delete", key, casstore.ErrUnsupported)
	case casstore.CondIfMatch:
		if !s.kind.conditional() {
			return casstore.Wrap("delete", key, fmt.Errorf("%w: %s cannot delete conditionally", casstore.ErrUnsupported, s.kind))
		}
		if cond.Version() == "" {
			return casstore.Wrap("delete", key, casstore.ErrPreconditionFailed)
		}
		gen, ok := parseGen(cond.Version())
		if s.kind == kindGCS && !ok {
			return casstore.Wrap("delete", key, casstore.ErrPreconditionFailed)
		}
		opts.BeforeDelete = func(as func(any) bool) error {
			switch s.kind {
			case kindS3:
				var in *awss3.DeleteObjectInput
				if !as(&in) {
					return fmt.Errorf("casstore/blob: s3blob did not expose its delete input")
				}
				in.IfMatch = aws.String(quoteETag(cond.Version()))
				captured = in
				return errCaptured
			case kindGCS:
				var objp **gcstorage.ObjectHandle
				if !as(&objp) {
					return fmt.Errorf("casstore/blob: gcsblob did not expose its object handle")
				}
				*objp = (*objp).If(gcstorage.Conditions{GenerationMatch: gen}).Retryer(gcstorage.WithPolicy(gcstorage.RetryNever))
			case kindAzure:
				var do *azblobblob.DeleteOptions
				if !as(&do) {
					return fmt.Errorf("casstore/blob: azureblob did not expose its delete options")
				}
				et := azcore.ETag(quoteETag(cond.Version()))
				do.AccessConditions = &azblobblob.AccessConditions{ModifiedAccessConditions: &azblobblob.ModifiedAccessConditions{IfMatch: &et}}
			}
			return nil
		}
		if s.kind == kindAzure {
			dctx = policy.WithRetryOptions(ctx, policy.RetryOptions{MaxRetries: -1})
		}
	}
	err := s.b.DeleteWithOptions(dctx, key, opts)
	if captured != nil && errors.Is(err, errCaptured) {
		_, err = s.s3.DeleteObject(ctx, captured, func(o *awss3.Options) {
			o.Retryer = aws.NopRetryer{}
			o.RetryMaxAttempts = 0
		})
	}
	if err != nil {
		return mapErr("delete", key, cond, err)
	}
	return nil
}

// List implements casstore.Store.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[casstore.ObjectInfo, error] {
	return func(yield func(casstore.ObjectInfo, error) bool) {
		if err := s.check(ctx, "list", prefix); err != nil {
			yield(casstore.ObjectInfo{}, err)
			return
		}
		lo := &gcblob.ListOptions{Prefix: prefix}
		pageSize := s.page
		if pageSize == 0 {
			pageSize = 1000
		}
		token := gcblob.FirstPageToken
		for len(token) > 0 {
			objs, next, err := s.b.ListPage(ctx, token, pageSize, lo)
			if err != nil {
				yield(casstore.ObjectInfo{}, mapErr("list", prefix, casstore.None(), err))
				return
			}
			for _, o := range objs {
				if o.IsDir {
					continue
				}
				info := casstore.ObjectInfo{Key: o.Key, Size: o.Size, ModTime: o.ModTime}
				switch s.kind {
				case kindS3:
					var so s3types.Object
					if o.As(&so) {
						info.Version = trimETag(aws.ToString(so.ETag))
					}
				case kindGCS:
					var oa gcstorage.ObjectAttrs
					if o.As(&oa) {
						info.Version = genVersion(oa.Generation)
					}
				case kindAzure:
					var bi container.BlobItem
					if o.As(&bi) && bi.Properties != nil && bi.Properties.ETag != nil {
						info.Version = trimETag(string(*bi.Properties.ETag))
					}
				}
				if !yield(info, nil) {
					return
				}
			}
			token = next
		}
	}
}

// Capabilities implements casstore.Store. s3blob, gcsblob and azureblob
// honour every condition (S3 ETags are content hashes, so not distinct);
// other drivers only create-only writes. Keys may nest everywhere but on
// fileblob and under WithoutNestedKeys.
func (s *Store) Capabilities() casstore.Capabilities {
	var c casstore.Capabilities
	switch s.kind {
	case kindS3:
		c = casstore.Capabilities{IfAbsent: true, IfMatch: true, DeleteIfMatch: true,
			Gaps: []string{"S3 ETags are content MD5s: rewriting identical bytes keeps the same version"}}
	case kindGCS, kindAzure:
		c = casstore.Capabilities{IfAbsent: true, IfMatch: true, DeleteIfMatch: true, DistinctVersions: true}
	default:
		c = casstore.Capabilities{IfAbsent: true, Gaps: []string{
			"this gocloud.dev/blob driver has no conditional replace or delete (only s3blob, gcsblob and azureblob do)",
			"this driver's ETag is made of modification time and size: two writes may share it",
		}}
	}
	c.NestedKeys = s.kind != kindFile && s.flat == ""
	switch {
	case s.flat != "":
		c.Gaps = append(c.Gaps, s.flat)
	case s.kind == kindFile:
		c.Gaps = append(c.Gaps, "fileblob stores each key as a file: a key and keys below it (a and a/b) cannot coexist")
	}
	return c
}

// Close implements casstore.Store. It closes the bucket when the store was
// opened from a URL.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.owns {
		return s.b.Close()
	}
	return nil
}

// capturingS3 is the S3 client the transfer manager uses for one upload: it
// records the ETag of the call that creates the object and, when once is
// set, makes that call exactly once (it carries the condition).
type capturingS3 struct {
	*awss3.Client
	once bool
	etag atomic.Value // string
}

func (c *capturingS3) opts(optFns []func(*awss3.Options)) []func(*awss3.Options) {
	if c.once {
		return append(optFns, noRetry)
	}
	return optFns
}

func noRetry(o *awss3.Options) {
	o.Retryer = aws.NopRetryer{}
	o.RetryMaxAttempts = 0
}

// PutObject sends a single-part upload.
func (c *capturingS3) PutObject(ctx context.Context, in *awss3.PutObjectInput, optFns ...func(*awss3.Options)) (*awss3.PutObjectOutput, error) {
	out, err := c.Client.PutObject(ctx, in, c.opts(optFns)...)
	if err == nil {
		c.etag.Store(aws.ToString(out.ETag))
	}
	return out, err
}

// CompleteMultipartUpload sends the commit of a multipart upload.
func (c *capturingS3) CompleteMultipartUpload(ctx context.Context, in *awss3.CompleteMultipartUploadInput, optFns ...func(*awss3.Options)) (*awss3.CompleteMultipartUploadOutput, error) {
	out, err := c.Client.CompleteMultipartUpload(ctx, in, c.opts(optFns)...)
	if err == nil {
		c.etag.Store(aws.ToString(out.ETag))
	}
	return out, err
}

func trimETag(e string) casstore.Version { return casstore.Version(strings.Trim(e, `"`)) }

func quoteETag(v casstore.Version) string { return `"` + strings.Trim(string(v), `"`) + `"` }

func genVersion(g int64) casstore.Version { return casstore.Version(strconv.FormatInt(g, 10)) }

func parseGen(v casstore.Version) (int64, bool) {
	g, err := strconv.ParseInt(string(v), 10, 64)
	return g, err == nil && g > 0
}

// statusOf digs the HTTP status out of whichever SDK's error is underneath
// the Go CDK's, or returns 0.
func statusOf(err error) int {
	var are *awshttp.ResponseError
	if errors.As(err, &are) {
		return are.HTTPStatusCode()
	}
	if errors.Is(err, gcstorage.ErrObjectNotExist) {
		return http.StatusNotFound
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	var zre *azcore.ResponseError
	if errors.As(err, &zre) {
		return zre.StatusCode
	}
	return 0
}

// mapErr turns a Go CDK error into the contract's sentinels, by the native
// status code where there is one and by gcerrors.Code otherwise.
func mapErr(op, key string, cond casstore.Condition, err error) error {
	write := op == "put" || op == "delete"
	st := statusOf(err)
	var code string
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	notFound := st == http.StatusNotFound || (st == 0 && gcerrors.Code(err) == gcerrors.NotFound)
	precond := st == http.StatusPreconditionFailed || (st == 0 && gcerrors.Code(err) == gcerrors.FailedPrecondition)
	var sentinel error
	switch {
	case code == "NoSuchBucket" || bloberror.HasCode(err, bloberror.ContainerNotFound) || errors.Is(err, gcstorage.ErrBucketNotExist):
	case notFound:
		sentinel = casstore.NotFoundSentinel(op, cond)
	case precond:
		sentinel = casstore.PreconditionSentinel(cond)
	case st == http.StatusConflict && cond.Kind() == casstore.CondIfAbsent && bloberror.HasCode(err, bloberror.BlobAlreadyExists):
		sentinel = casstore.ErrAlreadyExists
	case st == http.StatusConflict && write && cond.Kind() != casstore.Unconditional && code == "ConditionalRequestConflict":
		sentinel = casstore.ErrConflict
	}
	return casstore.WrapBackendError(op, key, sentinel, err)
}
