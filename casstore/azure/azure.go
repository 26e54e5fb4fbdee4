// Package azure is the casstore adapter for Azure Blob Storage, built on
// github.com/Azure/azure-sdk-for-go/sdk/storage/azblob.
//
// The Version of a blob is its ETag (without quotes); Azure gives every write
// a new ETag. Create-only writes send "If-None-Match: *", replacing writes
// and conditional deletes send "If-Match: <etag>". Answers map onto the
// casstore sentinels as follows:
//
//   - 409 BlobAlreadyExists or 412 on a create-only put: casstore.ErrAlreadyExists
//     (Azurite answers 409, the service 412)
//   - 412 ConditionNotMet on an If-Match put or delete: casstore.ErrPreconditionFailed
//   - 404 on an If-Match put or delete: casstore.ErrPreconditionFailed
//   - 404 otherwise: casstore.ErrNotFound
//
// Writes and deletes are sent exactly once: the SDK's retry policy is
// switched off per call (policy.WithRetryOptions with MaxRetries -1), because
// a retried conditional write whose first attempt landed would come back
// 409/412 and report a successful write as lost. A lost reply surfaces as a
// transport error (an unknown outcome) that the caller resolves by reading
// the blob. Reads and listings keep the SDK's retries. Blobs are block blobs
// written with a single Put Blob request.
//
// Keys containing a backslash are refused with casstore.ErrInvalidKey: the
// service (and Azurite) turn "\" into "/" in blob names, so "a\b" would
// silently be the blob "a/b".
//
// # URLs
//
// Importing this package registers the scheme "azblob" with casstore.Open:
//
//	azblob://container/key/prefix
//	azblob://container?localemu=true&domain=127.0.0.1:10000&protocol=http
//
// Query parameters follow gocloud.dev/blob: storage_account (else
// AZURE_STORAGE_ACCOUNT), domain (else AZURE_STORAGE_DOMAIN, default
// blob.core.windows.net), protocol (else AZURE_STORAGE_PROTOCOL, default
// https; http only with localemu) and localemu=true for an emulator, whose
// service URL is protocol://domain/account and whose domain must be a
// loopback address. Unknown parameters are refused.
//
// Credentials, tried in gocloud.dev/blob's order: AZURE_STORAGE_ACCOUNT with
// AZURE_STORAGE_KEY (shared key); AZURE_STORAGE_SAS_TOKEN; a connection
// string in AZURE_STORAGE_CONNECTION_STRING (its endpoint wins over domain
// and protocol); otherwise azidentity's DefaultAzureCredential. No key,
// token or connection string is ever logged or put into an error.
package azure

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/objwal/objwal/casstore"
)

// Scheme is the URL scheme this package registers with casstore.Open.
const Scheme = "azblob"

// allowedDomains are the Azure clouds' blob endpoints that a URL may name
// (outside localemu), so that a URL cannot send a bearer token elsewhere.
var allowedDomains = map[string]bool{
	"blob.core.windows.net":       true,
	"blob.core.chinacloudapi.cn":  true,
	"blob.core.usgovcloudapi.net": true,
}

func init() {
	casstore.Register(Scheme, openURL)
}

// Store is a casstore.Store on one Azure Blob container. Create it with New
// or NewFromService, or open it with casstore.Open("azblob://...").
type Store struct {
	client   *container.Client
	pageSize int32
	closed   atomic.Bool
}

// Option configures a Store.
type Option func(*Store)

// WithPageSize sets how many blobs one listing call asks for (1 to 5000; the
// default lets the service choose). Small pages exercise pagination.
func WithPageSize(n int) Option {
	return func(s *Store) {
		if n > 0 && n <= 5000 {
			s.pageSize = int32(n)
		}
	}
}

// New returns a Store on the container that client addresses.
func New(client *container.Client, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("casstore/azure: nil client")
	}
	s := &Store{client: client}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// NewFromService returns a Store on containerName of the account that
// client addresses.
func NewFromService(client *azblob.Client, containerName string, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("casstore/azure: nil client")
	}
	if containerName == "" {
		return nil, fmt.Errorf("casstore/azure: %w: empty container name", casstore.ErrInvalidURL)
	}
	return New(client.ServiceClient().NewContainerClient(containerName), opts...)
}

// openURL implements casstore.OpenFunc for azblob:// URLs.
func openURL(_ context.Context, u *url.URL) (casstore.Store, error) {
	q := casstore.NewQuery(u)
	account := firstNonEmpty(q.String("storage_account"), os.Getenv("AZURE_STORAGE_ACCOUNT"))
	domain := strings.ToLower(firstNonEmpty(q.String("domain"), os.Getenv("AZURE_STORAGE_DOMAIN")))
	protocol := strings.ToLower(firstNonEmpty(q.String("protocol"), os.Getenv("AZURE_STORAGE_PROTOCOL")))
	localEmu := q.Bool("localemu")
	if err := q.Err(); err != nil {
		return nil, err
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%w: missing container name (want azblob://container/prefix)", casstore.ErrInvalidURL)
	}
	containerName := u.Host
	client, err := newContainerClient(containerName, account, domain, protocol, localEmu)
	if err != nil {
		return nil, err
	}
	s, err := New(client)
	if err != nil {
		return nil, err
	}
	return casstore.WithPrefix(s, casstore.PrefixFromPath(u.Path)), nil
}

// newContainerClient picks the credential the way gocloud.dev/blob's
// azureblob does and builds the container client.
func newContainerClient(containerName, account, domain, protocol string, localEmu bool) (*container.Client, error) {
	key := os.Getenv("AZURE_STORAGE_KEY")
	sas := os.Getenv("AZURE_STORAGE_SAS_TOKEN")
	connStr := firstNonEmpty(os.Getenv("AZURE_STORAGE_CONNECTION_STRING"), os.Getenv("AZURE_STORAGEBLOB_CONNECTIONSTRING"))
	if account == "" && key == "" && sas == "" && connStr != "" {
		c, err := container.NewClientFromConnectionString(connStr, containerName, nil)
		if err != nil {
			// The SDK's message never echoes the string's key, but do not
			// take the chance: report only that it is malformed.
			return nil, fmt.Errorf("casstore/azure: %w: AZURE_STORAGE_CONNECTION_STRING is malformed", casstore.ErrInvalidURL)
		}
		return c, nil
	}
	if account == "" {
		return nil, fmt.Errorf("%w: no storage account: set AZURE_STORAGE_ACCOUNT, the storage_account parameter, or AZURE_STORAGE_CONNECTION_STRING", casstore.ErrInvalidURL)
	}
	svc, err := serviceURL(account, domain, protocol, localEmu)
	if err != nil {
		return nil, err
	}
	containerURL, err := url.JoinPath(svc, containerName)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", casstore.ErrInvalidURL, err)
	}
	switch {
	case key != "":
		cred, err := azblob.NewSharedKeyCredential(account, key)
		if err != nil {
			return nil, fmt.Errorf("casstore/azure: AZURE_STORAGE_KEY is not a valid account key")
		}
		return container.NewClientWithSharedKeyCredential(containerURL, cred, nil)
	case sas != "":
		return container.NewClientWithNoCredential(containerURL+"?"+strings.TrimPrefix(sas, "?"), nil)
	case connStr != "":
		return container.NewClientFromConnectionString(connStr, containerName, nil)
	default:
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return nil, fmt.Errorf("casstore/azure: default Azure credential: %w", err)
		}
		return container.NewClient(containerURL, cred, nil)
	}
}

// serviceURL builds the account's blob endpoint as gocloud.dev/blob does:
// protocol://account.domain, or protocol://domain/account for an emulator.
func serviceURL(account, domain, protocol string, localEmu bool) (string, error) {
	if localEmu {
		if domain == "" {
			domain = "127.0.0.1:10000"
		}
		if protocol == "" {
			protocol = "http"
		}
		if protocol != "http" && protocol != "https" {
			return "", fmt.Errorf("%w: protocol %q (want http or https)", casstore.ErrInvalidURL, protocol)
		}
		if !loopback(domain) {
			return "", fmt.Errorf("%w: localemu domain %q is not a loopback address", casstore.ErrInvalidURL, domain)
		}
		return fmt.Sprintf("%s://%s/%s", protocol, domain, account), nil
	}
	if domain == "" {
		domain = "blob.core.windows.net"
	}
	if protocol == "" {
		protocol = "https"
	}
	if protocol != "https" {
		return "", fmt.Errorf("%w: protocol %q is only allowed with localemu=true", casstore.ErrInvalidURL, protocol)
	}
	if !allowedDomains[domain] {
		return "", fmt.Errorf("%w: domain %q is not an Azure blob endpoint", casstore.ErrInvalidURL, domain)
	}
	return fmt.Sprintf("https://%s.%s", account, domain), nil
}

func loopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// once makes ctx carry "no retries" for the SDK call it is passed to.
func once(ctx context.Context) context.Context {
	return policy.WithRetryOptions(ctx, policy.RetryOptions{MaxRetries: -1})
}

func (s *Store) check(ctx context.Context, op, key string) error {
	if err := casstore.CheckCall(ctx, s.closed.Load(), op, key); err != nil {
		return err
	}
	if strings.Contains(key, `\`) && op != "list" {
		// Azure (and Azurite) turn "\" into "/" in blob names, so such a
		// key would silently alias another one.
		return casstore.Wrap(op, key, fmt.Errorf("%w: Azure Blob Storage turns a backslash into a slash", casstore.ErrInvalidKey))
	}
	return nil
}

// Get implements casstore.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, casstore.ObjectInfo, error) {
	if err := s.check(ctx, "get", key); err != nil {
		return nil, casstore.ObjectInfo{}, err
	}
	resp, err := s.client.NewBlobClient(key).DownloadStream(ctx, nil)
	if err != nil {
		return nil, casstore.ObjectInfo{}, mapErr("get", key, casstore.None(), err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, casstore.ObjectInfo{}, mapErr("get", key, casstore.None(), err)
	}
	info := casstore.ObjectInfo{Key: key, Size: int64(len(data)), Version: etagVersion(resp.ETag)}
	if resp.LastModified != nil {
		info.ModTime = *resp.LastModified
	}
	return data, info, nil
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
		// A zero Count means "to the end" in azblob: look, don't read.
		if _, err := s.client.NewBlobClient(key).GetProperties(ctx, nil); err != nil {
			return nil, mapErr("get-range", key, casstore.None(), err)
		}
		return []byte{}, nil
	}
	count := n
	if off+n < off { // overflow: read to the end
		count = 0
	}
	resp, err := s.client.NewBlobClient(key).DownloadStream(ctx, &blob.DownloadStreamOptions{
		Range: blob.HTTPRange{Offset: off, Count: count},
	})
	if err != nil {
		if status(err) == http.StatusRequestedRangeNotSatisfiable || bloberror.HasCode(err, bloberror.InvalidRange) {
			// The blob exists and off is at or past its end.
			return []byte{}, nil
		}
		return nil, mapErr("get-range", key, casstore.None(), err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
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
	p, err := s.client.NewBlobClient(key).GetProperties(ctx, nil)
	if err != nil {
		return casstore.ObjectInfo{}, mapErr("stat", key, casstore.None(), err)
	}
	info := casstore.ObjectInfo{Key: key, Version: etagVersion(p.ETag)}
	if p.ContentLength != nil {
		info.Size = *p.ContentLength
	}
	if p.LastModified != nil {
		info.ModTime = *p.LastModified
	}
	return info, nil
}

// Put implements casstore.Store.
func (s *Store) Put(ctx context.Context, key string, data []byte, cond casstore.Condition) (casstore.Version, error) {
	if err := s.check(ctx, "put", key); err != nil {
		return "", err
	}
	opts := &blockblob.UploadOptions{}
	switch cond.Kind() {
	case casstore.CondIfAbsent:
		star := azcore.ETagAny
		opts.AccessConditions = &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: &star}}
	case casstore.CondIfMatch:
		if cond.Version() == "" {
			return "", casstore.Wrap("put", key, casstore.ErrPreconditionFailed)
		}
		et := quoteETag(cond.Version())
		opts.AccessConditions = &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: &et}}
	}
	body := nopCloser{bytes.NewReader(data)}
	resp, err := s.client.NewBlockBlobClient(key).Upload(once(ctx), body, opts)
	if err != nil {
		return "", mapErr("put", key, cond, err)
	}
	return etagVersion(resp.ETag), nil
}

// Delete implements casstore.Store.
func (s *Store) Delete(ctx context.Context, key string, cond casstore.Condition) error {
	if err := s.check(ctx, "delete", key); err != nil {
		return err
	}
	include := blob.DeleteSnapshotsOptionTypeInclude
	opts := &blob.DeleteOptions{DeleteSnapshots: &include}
	switch cond.Kind() {
	case casstore.CondIfAbsent:
		return casstore.Wrap("delete", key, casstore.ErrUnsupported)
	case casstore.CondIfMatch:
		if cond.Version() == "" {
			return casstore.Wrap("delete", key, casstore.ErrPreconditionFailed)
		}
		et := quoteETag(cond.Version())
		opts.AccessConditions = &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: &et}}
	}
	if _, err := s.client.NewBlobClient(key).Delete(once(ctx), opts); err != nil {
		return mapErr("delete", key, cond, err)
	}
	return nil
}

// List implements casstore.Store. Azure lists blob names in lexical order.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[casstore.ObjectInfo, error] {
	return func(yield func(casstore.ObjectInfo, error) bool) {
		if err := s.check(ctx, "list", prefix); err != nil {
			yield(casstore.ObjectInfo{}, err)
			return
		}
		opts := &container.ListBlobsFlatOptions{}
		if prefix != "" {
			opts.Prefix = &prefix
		}
		if s.pageSize > 0 {
			opts.MaxResults = &s.pageSize
		}
		pager := s.client.NewListBlobsFlatPager(opts)
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				yield(casstore.ObjectInfo{}, mapErr("list", prefix, casstore.None(), err))
				return
			}
			if page.Segment == nil {
				continue
			}
			for _, b := range page.Segment.BlobItems {
				if b == nil || b.Name == nil {
					continue
				}
				info := casstore.ObjectInfo{Key: *b.Name}
				if p := b.Properties; p != nil {
					info.Version = etagVersion(p.ETag)
					if p.ContentLength != nil {
						info.Size = *p.ContentLength
					}
					if p.LastModified != nil {
						info.ModTime = *p.LastModified
					}
				}
				if !yield(info, nil) {
					return
				}
			}
		}
	}
}

// Capabilities implements casstore.Store: Azure honours every condition and
// gives every write a new ETag.
func (s *Store) Capabilities() casstore.Capabilities {
	return casstore.Capabilities{IfAbsent: true, IfMatch: true, DeleteIfMatch: true, DistinctVersions: true, NestedKeys: true}
}

// Close implements casstore.Store. The SDK client holds nothing to release;
// later calls fail with casstore.ErrClosed.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

func etagVersion(e *azcore.ETag) casstore.Version {
	if e == nil {
		return ""
	}
	return casstore.Version(strings.Trim(string(*e), `"`))
}

func quoteETag(v casstore.Version) azcore.ETag {
	return azcore.ETag(`"` + strings.Trim(string(v), `"`) + `"`)
}

func status(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

// mapErr turns an azblob error into the contract's sentinels by status,
// error code and the condition used, and wraps it with op and key.
func mapErr(op, key string, cond casstore.Condition, err error) error {
	var sentinel error
	switch st := status(err); {
	case bloberror.HasCode(err, bloberror.ContainerNotFound):
		// A missing container is a configuration error, not a missing blob.
	case st == http.StatusNotFound:
		sentinel = casstore.NotFoundSentinel(op, cond)
	case st == http.StatusPreconditionFailed:
		sentinel = casstore.PreconditionSentinel(cond)
	case st == http.StatusConflict && bloberror.HasCode(err, bloberror.BlobAlreadyExists) && cond.Kind() == casstore.CondIfAbsent:
		sentinel = casstore.ErrAlreadyExists
	}
	return casstore.WrapBackendError(op, key, sentinel, err)
}
