package locked_test

import (
	"testing"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/locked"
)

// TestStoreAllocs: a stored key's Allow allocates nothing in every keyed
// store of New and NewLimits with the store options, and Stats allocates
// nothing. The conformance suite's Stats checks hold the counts themselves.
func TestStoreAllocs(t *testing.T) {
	all := func(admit.Algorithm) bool { return true }
	conformance.StoreAllocs(t, conformance.Variant{Name: "locked", New: conformance.Keyed(locked.New), Supports: all})
	conformance.CompositeStoreAllocs(t, conformance.CompositeVariant{Name: "locked", NewLimits: conformance.KeyedLimits(locked.NewLimits), Supports: all})
}
