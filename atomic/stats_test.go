package atomic_test

import (
	"testing"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/internal/conformance"
)

// TestStoreAllocs: a stored key's Allow allocates nothing in every keyed
// store of New (every rule that packs) with the store options, and Stats
// allocates nothing; the composites' admitted Allow stays within each
// form's budget (none for the pair on amd64, the array for a snapshot). The
// conformance suite's Stats checks hold the counts themselves.
func TestStoreAllocs(t *testing.T) {
	conformance.StoreAllocs(t, conformance.Variant{
		Name:     "atomic",
		New:      conformance.Keyed(admitatomic.New),
		Supports: func(a admit.Algorithm) bool { return a != admit.SlidingLog },
	})
	for _, f := range compositeVariants() {
		t.Run("form="+f.form, func(t *testing.T) { conformance.CompositeStoreAllocs(t, f.v) })
	}
}
