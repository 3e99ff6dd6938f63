package locked_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/internal/mapstore"
	"github.com/admit-go/admit/locked"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Variant{
		Name:       "locked",
		New:        conformance.Keyed(locked.New),
		NewLimiter: locked.NewLimiter,
		Supports:   func(admit.Algorithm) bool { return true },
		Store:      hooks,
	})
}

// hooks gives the conformance suite its view of a locked store, the map
// store (internal/mapstore).
var hooks = &conformance.StoreHooks{
	EvictAt: mapstore.EvictAt, Pause: mapstore.Pause,
	Locked: mapstore.Locked, Holds: mapstore.Holds, CountIs: mapstore.CountIs,
}

// TestMigration runs the migration checks (Take, Put, Keys and the hooks of
// a Reload's move) against the map stores of New and NewLimits.
func TestMigration(t *testing.T) {
	conformance.RunMigration(t, conformance.Variant{
		Name:     "locked",
		New:      conformance.Keyed(locked.New),
		Supports: func(admit.Algorithm) bool { return true },
		Store:    hooks,
	}, &conformance.CompositeVariant{
		Name:      "locked",
		NewLimits: conformance.KeyedLimits(locked.NewLimits),
		Supports:  func(admit.Algorithm) bool { return true },
	})
}
