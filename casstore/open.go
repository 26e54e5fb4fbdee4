package casstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// OpenFunc opens a Store for a parsed URL whose scheme it was registered
// for. It should consume every query parameter it understands through a
// Query and return q.Err() so that unknown parameters are refused.
type OpenFunc func(ctx context.Context, u *url.URL) (Store, error)

// The scheme registry is the one piece of global state in casstore, in the
// manner of database/sql's drivers: adapter packages register their schemes
// from init, and Open looks them up.
var (
	registryMu sync.RWMutex
	registry   = map[string]OpenFunc{}
)

// Register makes a URL scheme available to Open. It panics if scheme is
// empty, open is nil, or the scheme is already registered, because each of
// those is a programming error found at start-up.
func Register(scheme string, open OpenFunc) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if scheme == "" || open == nil {
		panic("casstore: Register with empty scheme or nil OpenFunc")
	}
	if _, dup := registry[scheme]; dup {
		panic("casstore: Register called twice for scheme " + scheme)
	}
	registry[scheme] = open
}

// Schemes lists the registered URL schemes in sorted order.
func Schemes() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]string, 0, len(registry))
	for s := range registry {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Open opens the Store that rawURL names, for example "mem://test",
// "file:///var/lib/wal", "s3://bucket/prefix?region=eu-west-1" or
// "gs://bucket/prefix". The scheme picks the adapter; the adapter's package
// must have been imported (package casstore/cloud imports all of them). A
// path after the bucket becomes a key prefix. Unknown schemes and unknown
// query parameters are ErrInvalidURL.
func Open(ctx context.Context, rawURL string) (Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // *url.Error repeats the raw URL, secrets and all
		}
		return nil, fmt.Errorf("casstore: open %q: %w: %v", RedactURL(rawURL), ErrInvalidURL, err)
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("casstore: open %q: %w: no scheme (want one of %s)", RedactURL(rawURL), ErrInvalidURL, strings.Join(Schemes(), ", "))
	}
	registryMu.RLock()
	open, ok := registry[u.Scheme]
	registryMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("casstore: open %q: %w: unknown scheme %q (registered: %s; import the adapter package, or casstore/cloud for all)",
			RedactURL(rawURL), ErrInvalidURL, u.Scheme, strings.Join(Schemes(), ", "))
	}
	s, err := open(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("casstore: open %q: %w", RedactURL(rawURL), err)
	}
	return s, nil
}

// RedactURL returns rawURL fit to print in logs and errors: without user
// information, and with the value of every query parameter whose name
// suggests a credential (see secretParam) replaced by "REDACTED". A URL that
// does not parse is not printed at all. Open uses it for every error it
// returns, so no credential in a URL is ever printed.
func RedactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User = nil
	if u.RawQuery != "" {
		q := u.Query()
		changed := false
		for name := range q {
			if secretParam(name) {
				q[name] = []string{"REDACTED"}
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	return u.String()
}

// secretParam reports whether a query parameter's name suggests its value
// is a credential: it contains secret, token, password, credential or
// signature, or it is sig, key, sas, access_key or account_key. None of
// objwal's own adapters take one, but blob+ URLs and future adapters might.
func secretParam(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"secret", "token", "password", "credential", "signature"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	switch n {
	case "sig", "key", "sas", "access_key", "account_key":
		return true
	}
	return false
}

// Query reads a URL's query parameters and remembers which were used, so an
// opener can refuse parameters it does not know instead of ignoring a typo.
type Query struct {
	vals url.Values
	used map[string]bool
	errs []string
}

// NewQuery starts reading u's query parameters.
func NewQuery(u *url.URL) *Query {
	return &Query{vals: u.Query(), used: map[string]bool{}}
}

// String returns the parameter's value, or "" if absent.
func (q *Query) String(name string) string {
	q.used[name] = true
	return q.vals.Get(name)
}

// Bool returns the parameter as a boolean ("true", "1", "false", "0", ...),
// false if absent. A malformed value is recorded and reported by Err.
func (q *Query) Bool(name string) bool {
	s := q.String(name)
	if s == "" {
		return false
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		q.errs = append(q.errs, fmt.Sprintf("parameter %s=%q is not a boolean", name, s))
	}
	return b
}

// Err reports malformed values and every parameter that was never read,
// wrapped in ErrInvalidURL, or nil.
func (q *Query) Err() error {
	var unknown []string
	for name := range q.vals {
		if !q.used[name] {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	msgs := slices.Clone(q.errs)
	if len(unknown) > 0 {
		known := make([]string, 0, len(q.used))
		for name := range q.used {
			known = append(known, name)
		}
		slices.Sort(known)
		msgs = append(msgs, fmt.Sprintf("unknown parameter(s) %s (known: %s)", strings.Join(unknown, ", "), strings.Join(known, ", ")))
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvalidURL, strings.Join(msgs, "; "))
}

// PrefixFromPath turns a URL path such as "/logs/app" into the key prefix
// "logs/app/", or "" for an empty or "/" path.
func PrefixFromPath(p string) string {
	p = strings.Trim(p, "/")
	if p == "" {
		return ""
	}
	return p + "/"
}
