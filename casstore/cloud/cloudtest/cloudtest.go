// Package cloudtest holds the test helpers that the cloud adapters' tests
// share: finding the emulators that scripts/emulators.sh started, deciding
// between skipping and failing when one is absent, and an HTTP transport that
// loses replies on purpose to prove that conditional writes are not retried
// blindly.
//
// It is imported only from _test.go files.
package cloudtest

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
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
