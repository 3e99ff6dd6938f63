package sharded_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/internal/mapstore"
	"github.com/admit-go/admit/sharded"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hooks gives the conformance suite its view of a sharded store, the map
// store (internal/mapstore).
var hooks = &conformance.StoreHooks{
	EvictAt: mapstore.EvictAt, Pause: mapstore.Pause,
	Locked: mapstore.Locked, Holds: mapstore.Holds, CountIs: mapstore.CountIs,
}

func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Variant{
		Name:       "sharded",
		New:        conformance.Keyed(sharded.New),
		Supports:   func(admit.Algorithm) bool { return true },
		HashedKeys: true,
		Store:      hooks,
	})
}

// TestConformanceHashedKeys runs the whole suite again on stores that keep
// 64-bit hashes instead of keys.
func TestConformanceHashedKeys(t *testing.T) {
	conformance.Run(t, conformance.Variant{
		Name: "sharded-hashed",
		New: func(r admit.Rule, opts ...admit.Option) (admit.KeyedLimiter, error) {
			return sharded.New(r, append([]admit.Option{admit.WithHashedKeys()}, opts...)...)
		},
		Supports:   func(admit.Algorithm) bool { return true },
		HashedKeys: true,
		Store:      hooks,
	})
}

// TestMigration runs the migration checks (Take, Put, Keys and the hooks of
// a Reload's move) against the map stores of New and NewLimits, with full
// and hashed keys.
func TestMigration(t *testing.T) {
	conformance.RunMigration(t, conformance.Variant{
		Name:       "sharded",
		New:        conformance.Keyed(sharded.New),
		Supports:   func(admit.Algorithm) bool { return true },
		HashedKeys: true,
		Store:      hooks,
	}, &compositeVariants[0].v)
}
