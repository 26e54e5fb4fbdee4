package conformance

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/objwal/objwal/casstore"
)

// unreachable is a store whose every call fails with a transport-like error,
// as a store behind a dead network or a missing bucket would.
type unreachable struct{ casstore.Store }

var errUnreachable = errors.New("connection refused")

func (unreachable) Get(_ context.Context, key string) ([]byte, casstore.ObjectInfo, error) {
	return nil, casstore.ObjectInfo{}, casstore.Wrap("get", key, errUnreachable)
}

func (unreachable) Put(_ context.Context, key string, _ []byte, _ casstore.Condition) (casstore.Version, error) {
	return "", casstore.Wrap("put", key, errUnreachable)
}

// TestLinearizabilityNeedsDefiniteAnswers: failed calls count as "may or may
// not have happened", so a history of nothing but failures is trivially
// linearizable. The case must fail it instead of passing a dead store.
func TestLinearizabilityNeedsDefiniteAnswers(t *testing.T) {
	sum := Check(t.Context(), func(context.Context) (casstore.Store, error) {
		return unreachable{casstore.NewMemory()}, nil
	}, nil, WithMatch(regexp.MustCompile(`^Linearizability$`)))
	if len(sum.Results) != 1 {
		t.Fatalf("ran %d cases, want only Linearizability", len(sum.Results))
	}
	r := sum.Results[0]
	if r.Outcome != Fail || !strings.Contains(strings.Join(r.Messages, "\n"), "checks nothing") {
		t.Fatalf("Linearizability on an unreachable store: %s %q; want a failure saying the history checks nothing", r.Outcome, r.Messages)
	}
}
