// Package gcs is the casstore adapter for Google Cloud Storage, built on
// cloud.google.com/go/storage.
//
// The Version of an object is its generation (a decimal string), not its
// ETag: every write gets a new generation, even of identical bytes.
// Create-only writes use the DoesNotExist precondition (ifGenerationMatch=0),
// replacing writes and conditional deletes use GenerationMatch. A 412 maps to
// casstore.ErrAlreadyExists or casstore.ErrPreconditionFailed by the
// condition used; a replace or conditional delete of a missing object is
// casstore.ErrPreconditionFailed.
//
// Writes and deletes run with storage.RetryNever: a retried conditional write
// whose first attempt landed would come back 412 and report a successful
// write as lost. A lost reply therefore surfaces as a transport error (an
// unknown outcome) that the caller resolves by reading the object. Reads and
// listings keep the library's retries. Objects are uploaded in a single
// request (Writer.ChunkSize = 0) with the library's automatic CRC32C check.
//
// Real GCS allows about one write per second to one object name; callers
// that rewrite one object (the WAL's manifest) must group their commits.
//
// # Emulator
//
// fake-gcs-server ignores ifGenerationMatch on delete. A store built
// WithEmulatorGaps declares DeleteIfMatch=false with that reason and refuses
// conditional deletes with casstore.ErrUnsupported instead of deleting
// blindly. The URL opener applies WithEmulatorGaps whenever the
// STORAGE_EMULATOR_HOST environment variable is set.
//
// # URLs
//
// Importing this package registers the scheme "gs" with casstore.Open:
//
//	gs://bucket/key/prefix
//
// Credentials are the application default credentials (or none when
// STORAGE_EMULATOR_HOST is set). Query parameters follow gocloud.dev/blob:
// anonymous=true (no credentials, public buckets) and universe_domain.
// Unknown parameters are refused.
package gcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync/atomic"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/objwal/objwal/casstore"
)

// Scheme is the URL scheme this package registers with casstore.Open.
const Scheme = "gs"

// EmulatorDeleteGap is the Capabilities gap a store WithEmulatorGaps reports.
const EmulatorDeleteGap = "fake-gcs-server ignores ifGenerationMatch on delete: conditional delete is refused (ErrUnsupported)"

func init() {
	casstore.Register(Scheme, openURL)
}

// Store is a casstore.Store on one GCS bucket. Create it with New or open it
// with casstore.Open("gs://...").
type Store struct {
	client     *storage.Client
	bucket     *storage.BucketHandle
	name       string
	pageSize   int
	delIf      bool
	ownsClient bool
	closed     atomic.Bool
}

// Option configures a Store.
type Option func(*Store)

// WithPageSize sets how many objects one listing call asks for (the
// default lets the service choose). Small pages exercise pagination.
func WithPageSize(n int) Option {
	return func(s *Store) {
		if n > 0 {
			s.pageSize = n
		}
	}
}

// WithEmulatorGaps declares the gaps of fake-gcs-server: conditional delete
// is reported as unsupported (see EmulatorDeleteGap).
func WithEmulatorGaps() Option {
	return func(s *Store) { s.delIf = false }
}

// withOwnedClient makes Close close the client (the URL opener created it).
func withOwnedClient() Option {
	return func(s *Store) { s.ownsClient = true }
}

// New returns a Store on bucket using client. The caller keeps ownership of
// client: Close does not close it.
func New(client *storage.Client, bucket string, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("casstore/gcs: nil client")
	}
	if bucket == "" {
		return nil, fmt.Errorf("casstore/gcs: %w: empty bucket name", casstore.ErrInvalidURL)
	}
	s := &Store{client: client, bucket: client.Bucket(bucket), name: bucket, delIf: true}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// openURL implements casstore.OpenFunc for gs:// URLs.
func openURL(ctx context.Context, u *url.URL) (casstore.Store, error) {
	q := casstore.NewQuery(u)
	var copts []option.ClientOption
	if q.Bool("anonymous") {
		copts = append(copts, option.WithoutAuthentication())
	}
	if ud := q.String("universe_domain"); ud != "" {
		copts = append(copts, option.WithUniverseDomain(ud))
	}
	if err := q.Err(); err != nil {
		return nil, err
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%w: missing bucket name (want gs://bucket/prefix)", casstore.ErrInvalidURL)
	}
	opts := []Option{withOwnedClient()}
	if os.Getenv("STORAGE_EMULATOR_HOST") != "" {
		// fake-gcs-server serves reads through the JSON API reliably;
		// its XML endpoint depends on -public-host being right.
		copts = append(copts, storage.WithJSONReads())
		opts = append(opts, WithEmulatorGaps())
	}
	client, err := storage.NewClient(ctx, copts...)
	if err != nil {
		return nil, fmt.Errorf("casstore/gcs: create client: %w", err)
	}
	s, err := New(client, u.Host, opts...)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	return casstore.WithPrefix(s, casstore.PrefixFromPath(u.Path)), nil
}

func (s *Store) check(ctx context.Context, op, key string) error {
	return casstore.CheckCall(ctx, s.closed.Load(), op, key)
}

// Get implements casstore.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, casstore.ObjectInfo, error) {
	if err := s.check(ctx, "get", key); err != nil {
		return nil, casstore.ObjectInfo{}, err
	}
	r, err := s.bucket.Object(key).NewReader(ctx)
	if err != nil {
		return nil, casstore.ObjectInfo{}, mapErr("get", key, casstore.None(), err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, casstore.ObjectInfo{}, mapErr("get", key, casstore.None(), err)
	}
	return data, casstore.ObjectInfo{
		Key:     key,
		Size:    int64(len(data)),
		Version: genVersion(r.Attrs.Generation),
		ModTime: r.Attrs.LastModified,
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
		if _, err := s.bucket.Object(key).Attrs(ctx); err != nil {
			return nil, mapErr("get-range", key, casstore.None(), err)
		}
		return []byte{}, nil
	}
	length := n
	if off+n < off { // overflow: read to the end
		length = -1
	}
	r, err := s.bucket.Object(key).NewRangeReader(ctx, off, length)
	if err != nil {
		if code(err) == http.StatusRequestedRangeNotSatisfiable {
			// The object exists (a missing one is 404) and off is at or
			// past its end: an empty result, as the contract says.
			return []byte{}, nil
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
	a, err := s.bucket.Object(key).Attrs(ctx)
	if err != nil {
		return casstore.ObjectInfo{}, mapErr("stat", key, casstore.None(), err)
	}
	return info(a), nil
}

// Put implements casstore.Store.
func (s *Store) Put(ctx context.Context, key string, data []byte, cond casstore.Condition) (casstore.Version, error) {
	if err := s.check(ctx, "put", key); err != nil {
		return "", err
	}
	obj := s.bucket.Object(key)
	switch cond.Kind() {
	case casstore.CondIfAbsent:
		obj = obj.If(storage.Conditions{DoesNotExist: true})
	case casstore.CondIfMatch:
		gen, ok := parseGen(cond.Version())
		if !ok {
			// No object ever has this generation.
			return "", casstore.Wrap("put", key, casstore.ErrPreconditionFailed)
		}
		obj = obj.If(storage.Conditions{GenerationMatch: gen})
	}
	// Never retried: see the package documentation.
	obj = obj.Retryer(storage.WithPolicy(storage.RetryNever))
	wctx, cancel := context.WithCancel(ctx)
	defer cancel() // aborts the upload if Write fails before Close
	w := obj.NewWriter(wctx)
	w.ChunkSize = 0 // one request, no resumable session
	if _, err := w.Write(data); err != nil {
		_ = w.Close()
		return "", mapErr("put", key, cond, err)
	}
	if err := w.Close(); err != nil {
		return "", mapErr("put", key, cond, err)
	}
	return genVersion(w.Attrs().Generation), nil
}

// Delete implements casstore.Store.
func (s *Store) Delete(ctx context.Context, key string, cond casstore.Condition) error {
	if err := s.check(ctx, "delete", key); err != nil {
		return err
	}
	obj := s.bucket.Object(key)
	switch cond.Kind() {
	case casstore.CondIfAbsent:
		return casstore.Wrap("delete", key, casstore.ErrUnsupported)
	case casstore.CondIfMatch:
		if !s.delIf {
			return casstore.Wrap("delete", key, fmt.Errorf("%w: %s", casstore.ErrUnsupported, EmulatorDeleteGap))
		}
		gen, ok := parseGen(cond.Version())
		if !ok {
			return casstore.Wrap("delete", key, casstore.ErrPreconditionFailed)
		}
		obj = obj.If(storage.Conditions{GenerationMatch: gen})
	}
	// A retried delete whose first attempt landed would answer 404 or 412.
	obj = obj.Retryer(storage.WithPolicy(storage.RetryNever))
	if err := obj.Delete(ctx); err != nil {
		return mapErr("delete", key, cond, err)
	}
	return nil
}

// List implements casstore.Store. GCS lists in lexical order of names.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[casstore.ObjectInfo, error] {
	return func(yield func(casstore.ObjectInfo, error) bool) {
		if err := s.check(ctx, "list", prefix); err != nil {
			yield(casstore.ObjectInfo{}, err)
			return
		}
		q := &storage.Query{Prefix: prefix, Projection: storage.ProjectionNoACL}
		if err := q.SetAttrSelection([]string{"Name", "Size", "Generation", "Updated"}); err != nil {
			yield(casstore.ObjectInfo{}, casstore.Wrap("list", prefix, err))
			return
		}
		it := s.bucket.Objects(ctx, q)
		if s.pageSize > 0 {
			it.PageInfo().MaxSize = s.pageSize
		}
		for {
			a, err := it.Next()
			if errors.Is(err, iterator.Done) {
				return
			}
			if err != nil {
				yield(casstore.ObjectInfo{}, mapErr("list", prefix, casstore.None(), err))
				return
			}
			if !yield(info(a), nil) {
				return
			}
		}
	}
}

// Capabilities implements casstore.Store: GCS honours every condition and
// gives every write a new generation; WithEmulatorGaps turns conditional
// delete off.
func (s *Store) Capabilities() casstore.Capabilities {
	c := casstore.Capabilities{IfAbsent: true, IfMatch: true, DeleteIfMatch: s.delIf, DistinctVersions: true, NestedKeys: true}
	if !s.delIf {
		c.Gaps = []string{EmulatorDeleteGap}
	}
	return c
}

// Close implements casstore.Store. It closes the client if the store was
// opened from a URL (New leaves the caller's client open).
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.ownsClient {
		return s.client.Close()
	}
	return nil
}

func info(a *storage.ObjectAttrs) casstore.ObjectInfo {
	return casstore.ObjectInfo{Key: a.Name, Size: a.Size, Version: genVersion(a.Generation), ModTime: a.Updated}
}

func genVersion(g int64) casstore.Version { return casstore.Version(strconv.FormatInt(g, 10)) }

func parseGen(v casstore.Version) (int64, bool) {
	g, err := strconv.ParseInt(string(v), 10, 64)
	return g, err == nil && g > 0
}

// code returns the HTTP status of a GCS error, 404 for ErrObjectNotExist,
// or 0.
func code(err error) int {
	if errors.Is(err, storage.ErrObjectNotExist) {
		return http.StatusNotFound
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}

// mapErr turns a GCS error into the contract's sentinels by status and the
// condition used, and wraps it with op and key.
func mapErr(op, key string, cond casstore.Condition, err error) error {
	var sentinel error
	switch st := code(err); {
	case errors.Is(err, storage.ErrBucketNotExist):
		// A missing bucket is a configuration error, not a missing object.
	case st == http.StatusNotFound:
		sentinel = casstore.NotFoundSentinel(op, cond)
	case st == http.StatusPreconditionFailed:
		sentinel = casstore.PreconditionSentinel(cond)
	}
	return casstore.WrapBackendError(op, key, sentinel, err)
}
