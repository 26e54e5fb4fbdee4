// Package cloudtest holds the test helpers that the cloud adapters' tests
// share: finding the emulators that scripts/emulators.sh started, deciding
// between skipping and failing when one is absent, an HTTP transport that
// loses replies on purpose to prove that conditional writes are not retried
// blindly, one that records requests, a guard against torn GET answers
// from versitygw, and the checks and benchmark that every adapter's tests
// run alike (checks.go): lost replies, one-request Gets, refused URLs, the
// real-bucket suite and the conditional-put round trip.
//
// It is imported only from _test.go files.
package cloudtest

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/objwal/objwal/casstore"
)

// Required reports whether absent emulators must fail the tests rather than
// skip them: under CI (CI=true) and when OBJWAL_REQUIRE_EMULATORS=1, as
// scripts/test.sh sets it.
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("OBJWAL_REQUIRE_EMULATORS") == "1"
}

// Env returns the value of the environment variable that names an emulator.
// When it is empty the test fails if Required, and is skipped with a reason
// otherwise (a developer's plain `go test ./...`).
func Env(t testing.TB, name, what string) string {
	t.Helper()
	v := os.Getenv(name)
	if v != "" {
		return v
	}
	msg := fmt.Sprintf("%s is not set: no %s emulator; run `make test` (scripts/test.sh starts the emulators) or `source <(bash scripts/emulators.sh env)` first", name, what)
	if Required() {
		t.Fatalf("%s (required because CI=true or OBJWAL_REQUIRE_EMULATORS=1)", msg)
	}
	t.Skip(msg)
	return ""
}

// ErrInjectedLoss is the transport error LossyTransport returns for a reply
// it dropped.
var ErrInjectedLoss = errors.New("cloudtest: reply lost on purpose after the request reached the server")

// LossyTransport is an http.RoundTripper between a client and an emulator.
// While armed, it forwards each request that Match selects to the server,
// waits for the server's answer, throws it away and returns ErrInjectedLoss
// (or, with Status set, a bare reply with that status code) to the client:
// the write landed but the client cannot know. Every other request passes
// through untouched.
type LossyTransport struct {
	// Base carries the requests; http.DefaultTransport if nil.
	Base http.RoundTripper
	// Match selects the requests whose reply is lost.
	Match func(*http.Request) bool
	// Status, when non-zero, replaces a lost reply by a reply with this
	// status code and an empty body, instead of a transport error.
	Status int

	armed   atomic.Int64 // replies still to lose
	mu      sync.Mutex
	matched int // matching requests seen while armed or after
	lost    int
}

// Arm makes the transport lose the replies to the next n matching requests.
func (l *LossyTransport) Arm(n int) { l.armed.Store(int64(n)) }

// Counts reports how many matching requests reached the server since the
// transport was created, and how many replies were lost.
func (l *LossyTransport) Counts() (matched, lost int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.matched, l.lost
}

// RoundTrip implements http.RoundTripper.
func (l *LossyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := l.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if l.Match == nil || !l.Match(req) {
		return base.RoundTrip(req)
	}
	resp, err := base.RoundTrip(req)
	l.mu.Lock()
	l.matched++
	l.mu.Unlock()
	if err != nil || l.armed.Load() <= 0 {
		return resp, err
	}
	l.armed.Add(-1)
	// The server has answered: the write is decided. Lose the answer.
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	l.mu.Lock()
	l.lost++
	l.mu.Unlock()
	if l.Status == 0 {
		return nil, ErrInjectedLoss
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", l.Status, http.StatusText(l.Status)),
		StatusCode:    l.Status,
		Proto:         resp.Proto,
		ProtoMajor:    resp.ProtoMajor,
		ProtoMinor:    resp.ProtoMinor,
		Header:        http.Header{"Content-Type": {"text/plain"}},
		Body:          io.NopCloser(strings.NewReader("")),
		ContentLength: 0,
		Request:       req,
	}, nil
}

// Conditional reports whether req is a write that carries a precondition in
// one of the forms the three clouds use: If-Match / If-None-Match headers
// (S3, Azure) or ifGenerationMatch in the query (GCS).
func Conditional(req *http.Request) bool {
	if req.Method != http.MethodPut && req.Method != http.MethodPost && req.Method != http.MethodDelete {
		return false
	}
	if req.Header.Get("If-Match") != "" || req.Header.Get("If-None-Match") != "" {
		return true
	}
	return req.URL.Query().Get("ifGenerationMatch") != ""
}

// Azurite's documented, public development account and its key, which the
// Azure tests sign their requests with. They open nothing but a local
// emulator.
const (
	AzuriteAccount = "devstoreaccount1"
	AzuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// VersitygwNestedKeysGap is the reason the versitygw tests give with
// s3.WithoutNestedKeys and blob.WithoutNestedKeys.
const VersitygwNestedKeysGap = "versitygw's posix backend stores keys as files, so a key and keys below it (a and a/b) cannot coexist " +
	"(409 ObjectParentIsFile / ExistingObjectIsDirectory); real S3 can (run casstore/s3 with OBJWAL_TEST_S3_URL)"

// VersitygwTornGet explains GuardTornGets; tests log it.
const VersitygwTornGet = "versitygw v1.8.0's posix backend reads a GET's ETag from the key's xattr by path and only then opens the file by path, " +
	"so a PUT that renames a new file over the key between the two answers with the previous version's ETag and the new version's bytes"

// GuardTornGets wraps a Store on versitygw to undo one emulator bug, so that
// the conformance suite (its linearizability case above all) tests the
// adapter rather than the emulator: versitygw v1.8.0's posix GetObject
// (backend/posix/posix.go) reads the ETag with
// meta.RetrieveAttribute(nil, bucket, object, "etag"), that is by path, and
// opens the object with openForRead(objPath) afterwards. A concurrent
// PutObject publishes by linking a new file over the path; landing between
// the two, it makes the GET answer with the ETag of the version before and
// the bytes of the version after (reproduced with the plain SDK: about 1
// GET in 800 under a concurrent writer; the native and the blob-lifted S3
// adapters alike). Real S3 serves one version per response.
//
// On versitygw an ETag of a single-part upload is the hex MD5 of the bytes,
// so a torn answer is recognisable: Get re-reads (up to 10 times) while the
// Version is 32 hex digits and is not the MD5 of the bytes it came with,
// and logs at the end of the test how many torn answers it saw. A Version
// of any other form (multipart "…-N", or an adapter's bug such as an empty
// one) passes through untouched, and so does the last answer when every
// re-read was torn. The adapters' own tests pin that Get takes bytes and
// Version from one response, which is what makes this guard sound.
func GuardTornGets(t testing.TB, s casstore.Store) casstore.Store {
	g := &tornGuard{Store: s}
	t.Cleanup(func() {
		if n := g.torn.Load(); n > 0 {
			t.Logf("%d torn GET answers from the emulator re-read (%s)", n, VersitygwTornGet)
		}
	})
	return g
}

type tornGuard struct {
	casstore.Store
	torn atomic.Int64
}

func (g *tornGuard) Get(ctx context.Context, key string) ([]byte, casstore.ObjectInfo, error) {
	for attempt := 0; ; attempt++ {
		data, info, err := g.Store.Get(ctx, key)
		if err != nil || attempt == 9 || !TornMD5ETag(data, string(info.Version)) {
			return data, info, err
		}
		g.torn.Add(1)
	}
}

// TornMD5ETag reports whether etag has the form of a single-part S3 ETag
// (32 hex digits, quotes allowed) but is not the MD5 of data.
func TornMD5ETag(data []byte, etag string) bool {
	etag = strings.Trim(etag, `"`)
	if len(etag) != 32 {
		return false
	}
	if _, err := hex.DecodeString(etag); err != nil {
		return false
	}
	sum := md5.Sum(data)
	return !strings.EqualFold(etag, hex.EncodeToString(sum[:]))
}

// Exchange is one request a Recorder carried and the answer's ETag header.
type Exchange struct {
	Method string
	Path   string
	ETag   string
}

// Recorder is an http.RoundTripper that passes every request to Base
// (http.DefaultTransport if nil) and records it, so a test can see how many
// calls an operation made and what they answered.
type Recorder struct {
	Base http.RoundTripper

	mu  sync.Mutex
	log []Exchange
}

// RoundTrip implements http.RoundTripper.
func (r *Recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	base := r.Base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	ex := Exchange{Method: req.Method, Path: req.URL.Path}
	if err == nil {
		ex.ETag = resp.Header.Get("ETag")
	}
	r.mu.Lock()
	r.log = append(r.log, ex)
	r.mu.Unlock()
	return resp, err
}

// Take returns the exchanges recorded since the last Take and forgets them.
func (r *Recorder) Take() []Exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.log
	r.log = nil
	return out
}
