package casstore_test

import (
	"testing"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/casstore/conformance"
)

func TestFileConformance(t *testing.T) {
	conformance.Run(t, func(t *testing.T) casstore.Store {
		s, err := casstore.NewFile(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
