package sharded_test

import (
	"testing"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/sharded"
)

// TestStoreAllocs: a stored key's Allow allocates nothing in every keyed
// store of New (the table and the map store) and NewLimits with the store
// options, hashed keys included, and Stats allocates nothing. The
// conformance suite's Stats checks hold the counts themselves.
func TestStoreAllocs(t *testing.T) {
	all := func(admit.Algorithm) bool { return true }
	conformance.StoreAllocs(t, conformance.Variant{Name: "sharded", New: conformance.Keyed(sharded.New), Supports: all, HashedKeys: true})
	for _, c := range compositeVariants {
		conformance.CompositeStoreAllocs(t, c.v)
	}
}
