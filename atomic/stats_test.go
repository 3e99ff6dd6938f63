package atomic_test

import (
	"testing"

	"github.com/admit-go/admit/internal/conformance"
)

// TestStoreAllocs: a stored key's Allow allocates nothing in New's table
// with the store options, hashed keys included, and Stats allocates
// nothing. The conformance suite's Stats checks hold the counts themselves.
func TestStoreAllocs(t *testing.T) {
	conformance.StoreAllocs(t, variant("atomic", false))
}
