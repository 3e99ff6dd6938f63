package atomic_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/internal/conformance"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStoreConformance runs the keyed-store checks (eviction by tombstones,
// the deterministic eviction races, bounded memory) against the atomic
// store; TestConformance runs the rest of the suite.
func TestStoreConformance(t *testing.T) {
	conformance.RunStore(t, conformance.Variant{
		Name:     "atomic",
		New:      conformance.Keyed(admitatomic.New),
		Supports: func(a admit.Algorithm) bool { return a != admit.SlidingLog },
		Store:    admitatomic.Hooks,
	})
}
