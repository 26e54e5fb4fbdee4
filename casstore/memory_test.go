package casstore_test

import (
	"testing"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/casstore/conformance"
)

func TestMemoryConformance(t *testing.T) {
	conformance.Run(t, func(t *testing.T) casstore.Store {
		s := casstore.NewMemory()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
