// Package s3 is the casstore adapter for Amazon S3 and S3-compatible servers,
// built on github.com/aws/aws-sdk-go-v2/service/s3.
//
// The Version of an object is its ETag (without the surrounding quotes).
// Create-only writes send "If-None-Match: *", replacing writes send
// "If-Match: <etag>", and conditional deletes send "If-Match" on DeleteObject.
// The answers map onto the casstore sentinels as follows:
//
//   - 412 on an If-None-Match put: casstore.ErrAlreadyExists
//   - 412 on an If-Match put or delete: casstore.ErrPreconditionFailed
//   - 404 on an If-Match put or delete (the key is gone): ErrPreconditionFailed
//     (a conditional delete also looks with HEAD first, because some servers
//     answer 204 to If-Match on a missing key)
//   - 409 ConditionalRequestConflict on a conditional write: casstore.ErrConflict
//   - 404 otherwise: casstore.ErrNotFound
//
// Conditional writes are sent exactly once: the SDK's retryer is replaced by
// aws.NopRetryer for those calls, because a retried conditional PUT whose
// first attempt landed would come back 412 and report a successful write as
// lost. A lost reply therefore surfaces as a transport error (an unknown
// outcome), which the caller resolves by reading the object. Reads, listings
// and unconditional writes keep the SDK's normal retries.
//
// S3 ETags of single-part uploads are MD5 digests of the content, so two writes
// of identical bytes get the same Version: the store declares
// DistinctVersions=false. Some S3 servers ignore If-Match on DeleteObject
// (MinIO); for those, construct the store WithoutConditionalDelete (URL
// parameter conditional_delete=false) so that the gap is declared instead of
// deletes happening blindly.
//
// S3 keeps a flat key space: "a" and "a/b" are two independent objects.
// S3-compatible servers that store each key as a file (versitygw's posix
// backend, MinIO on a file system) cannot hold both and refuse the second
// write with an error (409). Construct the store WithoutNestedKeys (URL
// parameter nested_keys=false) for those, so that Capabilities declares
// NestedKeys=false with the reason.
//
// # URLs
//
// Importing this package registers the scheme "s3" with casstore.Open:
//
//	s3://bucket/key/prefix?region=eu-west-1
//	s3://bucket?endpoint=http://127.0.0.1:7070&use_path_style=true&region=us-east-1
//
// Query parameters use gocloud.dev/blob's names: region, endpoint,
// use_path_style (or its legacy spelling s3ForcePathStyle), disable_https,
// profile, anonymous, request_checksum_calculation and
// response_checksum_validation (when_supported or when_required). The
// objwal additions are conditional_delete=false and nested_keys=false (see
// above). Unknown parameters are refused. Credentials come from the SDK's default chain (environment,
// shared config and profiles, web identity, container and instance roles);
// they are never logged nor put into errors.
package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/objwal/objwal/casstore"
)

// Scheme is the URL scheme this package registers with casstore.Open.
const Scheme = "s3"

func init() {
	casstore.Register(Scheme, openURL)
}

// Store is a casstore.Store on one S3 bucket. Create it with New or open it
// with casstore.Open("s3://...").
type Store struct {
	client   *awss3.Client
	bucket   string
	pageSize int32
	delIf    bool
	delGap   string
	flat     bool   // WithoutNestedKeys
	flatGap  string // its reason
	closed   atomic.Bool
}

// Option configures a Store.
type Option func(*Store)

// WithPageSize sets how many keys one ListObjectsV2 call asks for (1 to 1000;
// the default is 1000). Small pages are useful to exercise pagination.
func WithPageSize(n int) Option {
	return func(s *Store) {
		if n > 0 && n <= 1000 {
			s.pageSize = int32(n)
		}
	}
}

// WithoutConditionalDelete declares that the server ignores If-Match on
// DeleteObject (as MinIO does). Delete with casstore.IfMatch then returns
// casstore.ErrUnsupported instead of deleting blindly, and Capabilities
// reports DeleteIfMatch=false with reason as its gap.
func WithoutConditionalDelete(reason string) Option {
	return func(s *Store) {
		s.delIf = false
		if reason == "" {
			reason = "the S3 server ignores If-Match on DeleteObject"
		}
		s.delGap = reason
	}
}

// WithoutNestedKeys declares that the server cannot hold a key together with
// keys below it ("a" and "a/b"), as versitygw's posix backend and MinIO on a
// file system cannot: they keep each key as a file and refuse the second of
// the two writes. Capabilities then reports NestedKeys=false with reason as
// its gap. It changes no request: the server's refusal still comes back as
// the error of that Put.
func WithoutNestedKeys(reason string) Option {
	return func(s *Store) {
		s.flat = true
		if reason == "" {
			reason = "the S3 server stores keys as files: a key and keys below it (a and a/b) cannot coexist"
		}
		s.flatGap = reason
	}
}

// New returns a Store on bucket, using client for every call. The client's
// own options (endpoint, path style, credentials, retries) are used as they
// are, except that conditional writes are never retried.
func New(client *awss3.Client, bucket string, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("casstore/s3: nil client")
	}
	if bucket == "" {
		return nil, fmt.Errorf("casstore/s3: %w: empty bucket name", casstore.ErrInvalidURL)
	}
	s := &Store{client: client, bucket: bucket, pageSize: 1000, delIf: true}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// openURL implements casstore.OpenFunc for s3:// URLs.
func openURL(ctx context.Context, u *url.URL) (casstore.Store, error) {
	q := casstore.NewQuery(u)
	var loadOpts []func(*config.LoadOptions) error
	region := q.String("region")
	endpoint := q.String("endpoint")
	pathStyle := q.Bool("use_path_style") || q.Bool("s3ForcePathStyle")
	disableHTTPS := q.Bool("disable_https")
	if p := q.String("profile"); p != "" {
		loadOpts = append(loadOpts, config.WithSharedConfigProfile(p))
	}
	if q.Bool("anonymous") {
		loadOpts = append(loadOpts, config.WithCredentialsProvider(aws.AnonymousCredentials{}))
	}
	var bad []string
	switch v := q.String("request_checksum_calculation"); v {
	case "":
	case "when_supported":
		loadOpts = append(loadOpts, config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenSupported))
	case "when_required":
		loadOpts = append(loadOpts, config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired))
	default:
		bad = append(bad, fmt.Sprintf("request_checksum_calculation=%q (want when_supported or when_required)", v))
	}
	switch v := q.String("response_checksum_validation"); v {
	case "":
	case "when_supported":
		loadOpts = append(loadOpts, config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenSupported))
	case "when_required":
		loadOpts = append(loadOpts, config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired))
	default:
		bad = append(bad, fmt.Sprintf("response_checksum_validation=%q (want when_supported or when_required)", v))
	}
	condDelete := true
	if v := q.String("conditional_delete"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad = append(bad, fmt.Sprintf("conditional_delete=%q is not a boolean", v))
		}
		condDelete = b
	}
	nestedKeys := true
	if v := q.String("nested_keys"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad = append(bad, fmt.Sprintf("nested_keys=%q is not a boolean", v))
		}
		nestedKeys = b
	}
	if err := q.Err(); err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("%w: %s", casstore.ErrInvalidURL, strings.Join(bad, "; "))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%w: missing bucket name (want s3://bucket/prefix)", casstore.ErrInvalidURL)
	}
	if endpoint != "" {
		if eu, err := url.Parse(endpoint); err != nil || eu.Scheme == "" || eu.Host == "" {
			return nil, fmt.Errorf("%w: endpoint %q is not an absolute URL", casstore.ErrInvalidURL, endpoint)
		}
		if region == "" {
			// S3-compatible servers ignore the region, but the signer needs one.
			region = "us-east-1"
		}
	}
	if region != "" {
		loadOpts = append(loadOpts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		// The error names the failing source (profile, file), never a secret.
		return nil, fmt.Errorf("casstore/s3: load AWS configuration: %w", err)
	}
	client := awss3.NewFromConfig(cfg, func(o *awss3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		o.UsePathStyle = pathStyle
		o.EndpointOptions.DisableHTTPS = disableHTTPS
		// S3-compatible servers often send no response checksum; the SDK
		// would then log a DEBUG line on stderr for every read, which is
		// noise in a library (validation itself is unchanged).
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	var opts []Option
	if !condDelete {
		opts = append(opts, WithoutConditionalDelete("conditional_delete=false: the server ignores If-Match on DeleteObject"))
	}
	if !nestedKeys {
		opts = append(opts, WithoutNestedKeys("nested_keys=false: the server stores keys as files, so a key and keys below it (a and a/b) cannot coexist"))
	}
	s, err := New(client, u.Host, opts...)
	if err != nil {
		return nil, err
	}
	return casstore.WithPrefix(s, casstore.PrefixFromPath(u.Path)), nil
}

// noRetry makes one operation a single attempt: the conditional writes.
func noRetry(o *awss3.Options) {
	o.Retryer = aws.NopRetryer{}
	o.RetryMaxAttempts = 0
}

func (s *Store) check(ctx context.Context, op, key string) error {
	return casstore.CheckCall(ctx, s.closed.Load(), op, key)
}

// Get implements casstore.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, casstore.ObjectInfo, error) {
	if err := s.check(ctx, "get", key); err != nil {
		return nil, casstore.ObjectInfo{}, err
	}
	out, err := s.client.GetObject(ctx, &awss3.GetObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return nil, casstore.ObjectInfo{}, s.mapErr("get", key, casstore.None(), err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, casstore.ObjectInfo{}, casstore.Wrap("get", key, err)
	}
	return data, casstore.ObjectInfo{
		Key:     key,
		Size:    int64(len(data)),
		Version: etagVersion(out.ETag),
		ModTime: aws.ToTime(out.LastModified),
	}, nil
}

// GetRange implements casstore.Store.
func (s *Store) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := s.check(ctx, "get-range", key); err != nil {
		return nil, err
	}
	if off < 0 || n < 0 {
		return nil, casstore.Wrap("get-range", key, casstore.ErrInvalidRange)
	}
	if n == 0 {
		if _, err := s.Stat(ctx, key); err != nil {
			return nil, casstore.Wrap("get-range", key, errors.Unwrap(err))
		}
		return []byte{}, nil
	}
	rng := fmt.Sprintf("bytes=%d-", off)
	if end := off + n - 1; end >= off { // no overflow
		rng = fmt.Sprintf("bytes=%d-%d", off, end)
	}
	out, err := s.client.GetObject(ctx, &awss3.GetObjectInput{Bucket: &s.bucket, Key: &key, Range: &rng})
	if err != nil {
		if httpStatus(err) == http.StatusRequestedRangeNotSatisfiable {
			// The object exists (a missing key is 404) but off is at or past
			// its end: the contract says that is an empty result.
			return []byte{}, nil
		}
		return nil, s.mapErr("get-range", key, casstore.None(), err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, casstore.Wrap("get-range", key, err)
	}
	if int64(len(data)) > n { // a server that ignored Range
		data = data[:n]
	}
	return data, nil
}

// Stat implements casstore.Store.
func (s *Store) Stat(ctx context.Context, key string) (casstore.ObjectInfo, error) {
	if err := s.check(ctx, "stat", key); err != nil {
		return casstore.ObjectInfo{}, err
	}
	out, err := s.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return casstore.ObjectInfo{}, s.mapErr("stat", key, casstore.None(), err)
	}
	return casstore.ObjectInfo{
		Key:     key,
		Size:    aws.ToInt64(out.ContentLength),
		Version: etagVersion(out.ETag),
		ModTime: aws.ToTime(out.LastModified),
	}, nil
}

// Put implements casstore.Store.
func (s *Store) Put(ctx context.Context, key string, data []byte, cond casstore.Condition) (casstore.Version, error) {
	if err := s.check(ctx, "put", key); err != nil {
		return "", err
	}
	in := &awss3.PutObjectInput{
		Bucket:        &s.bucket,
		Key:           &key,
		Body:          bytes.NewReader(data), // seekable: signing and checksums over plain http need it
		ContentLength: aws.Int64(int64(len(data))),
	}
	var optFns []func(*awss3.Options)
	switch cond.Kind() {
	case casstore.CondIfAbsent:
		in.IfNoneMatch = aws.String("*")
		optFns = append(optFns, noRetry)
	case casstore.CondIfMatch:
		if cond.Version() == "" {
			return "", casstore.Wrap("put", key, casstore.ErrPreconditionFailed)
		}
		in.IfMatch = aws.String(quoteETag(cond.Version()))
		optFns = append(optFns, noRetry)
	}
	out, err := s.client.PutObject(ctx, in, optFns...)
	if err != nil {
		return "", s.mapErr("put", key, cond, err)
	}
	return etagVersion(out.ETag), nil
}

// Delete implements casstore.Store.
func (s *Store) Delete(ctx context.Context, key string, cond casstore.Condition) error {
	if err := s.check(ctx, "delete", key); err != nil {
		return err
	}
	in := &awss3.DeleteObjectInput{Bucket: &s.bucket, Key: &key}
	var optFns []func(*awss3.Options)
	switch cond.Kind() {
	case casstore.CondIfAbsent:
		return casstore.Wrap("delete", key, casstore.ErrUnsupported)
	case casstore.CondIfMatch:
		if !s.delIf {
			return casstore.Wrap("delete", key, fmt.Errorf("%w: %s", casstore.ErrUnsupported, s.delGap))
		}
		if cond.Version() == "" {
			return casstore.Wrap("delete", key, casstore.ErrPreconditionFailed)
		}
		// Some servers (versitygw) answer 204 to If-Match on a missing key,
		// so look first: absent or another version loses right here (the
		// answer is linearized at this HEAD). The DELETE's own If-Match
		// then guards the window between the two calls.
		head, err := s.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
		if err != nil {
			return s.mapErr("delete", key, cond, err)
		}
		if etagVersion(head.ETag) != casstore.Version(strings.Trim(string(cond.Version()), `"`)) {
			return casstore.Wrap("delete", key, casstore.ErrPreconditionFailed)
		}
		in.IfMatch = aws.String(quoteETag(cond.Version()))
		optFns = append(optFns, noRetry)
	default:
		// DeleteObject answers 204 whether or not the key exists; the
		// contract wants ErrNotFound for an absent key, so look first.
		if _, err := s.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &s.bucket, Key: &key}); err != nil {
			return s.mapErr("delete", key, cond, err)
		}
	}
	if _, err := s.client.DeleteObject(ctx, in, optFns...); err != nil {
		return s.mapErr("delete", key, cond, err)
	}
	return nil
}

// List implements casstore.Store with ListObjectsV2, one page at a time.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[casstore.ObjectInfo, error] {
	return func(yield func(casstore.ObjectInfo, error) bool) {
		if err := s.check(ctx, "list", prefix); err != nil {
			yield(casstore.ObjectInfo{}, err)
			return
		}
		in := &awss3.ListObjectsV2Input{Bucket: &s.bucket, MaxKeys: aws.Int32(s.pageSize)}
		if prefix != "" {
			in.Prefix = &prefix
		}
		p := awss3.NewListObjectsV2Paginator(s.client, in)
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				yield(casstore.ObjectInfo{}, s.mapErr("list", prefix, casstore.None(), err))
				return
			}
			for _, o := range page.Contents {
				info := casstore.ObjectInfo{
					Key:     aws.ToString(o.Key),
					Size:    aws.ToInt64(o.Size),
					Version: etagVersion(o.ETag),
					ModTime: aws.ToTime(o.LastModified),
				}
				if !yield(info, nil) {
					return
				}
			}
		}
	}
}

// Capabilities implements casstore.Store. S3 honours create-only and
// replace-if-match; conditional delete unless WithoutConditionalDelete;
// nested keys unless WithoutNestedKeys; its ETags are content hashes, so
// versions are not distinct across identical writes.
func (s *Store) Capabilities() casstore.Capabilities {
	c := casstore.Capabilities{
		IfAbsent:         true,
		IfMatch:          true,
		DeleteIfMatch:    s.delIf,
		DistinctVersions: false,
		NestedKeys:       !s.flat,
		Gaps:             []string{"S3 ETags are content MD5s: rewriting identical bytes keeps the same version"},
	}
	if !s.delIf {
		c.Gaps = append(c.Gaps, s.delGap)
	}
	if s.flat {
		c.Gaps = append(c.Gaps, s.flatGap)
	}
	return c
}

// Close implements casstore.Store. The SDK client holds no resources that
// need releasing; later calls fail with casstore.ErrClosed.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}

// mapErr turns an SDK error into the contract's sentinels, by the HTTP status
// and the condition the call carried, and wraps it with op and key.
func (s *Store) mapErr(op, key string, cond casstore.Condition, err error) error {
	status, code := httpStatus(err), apiCode(err)
	conditional := cond.Kind() != casstore.Unconditional && (op == "put" || op == "delete")
	var sentinel error
	switch {
	case code == "NoSuchBucket":
		// A missing bucket is a configuration error, not a missing object.
	case status == http.StatusNotFound || code == "NoSuchKey" || code == "NotFound":
		sentinel = casstore.NotFoundSentinel(op, cond)
	case status == http.StatusPreconditionFailed || code == "PreconditionFailed":
		sentinel = casstore.PreconditionSentinel(cond)
	case conditional && (status == http.StatusConflict || code == "ConditionalRequestConflict"):
		sentinel = casstore.ErrConflict
	case conditional && (status == http.StatusNotImplemented || code == "NotImplemented"):
		sentinel = casstore.ErrUnsupported
	case code == "KeyTooLongError":
		sentinel = casstore.ErrInvalidKey
	}
	return casstore.WrapBackendError(op, key, sentinel, err)
}

func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// etagVersion turns an ETag header into a Version: the quotes are dropped
// so that the same object gives the same Version from PUT, HEAD and LIST
// whichever of them a server quotes.
func etagVersion(etag *string) casstore.Version {
	return casstore.Version(strings.Trim(aws.ToString(etag), `"`))
}

// quoteETag turns a Version back into the quoted form If-Match expects.
func quoteETag(v casstore.Version) string {
	return `"` + strings.Trim(string(v), `"`) + `"`
}
