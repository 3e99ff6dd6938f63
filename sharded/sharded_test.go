package sharded_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/internal/mapstore"
	"github.com/admit-go/admit/internal/table"
	"github.com/admit-go/admit/sharded"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hooks gives the conformance suite its view of a sharded store.
// The table (internal/table) keeps the rules that pack, the map store the
// others.
var hooks = &conformance.StoreHooks{
	EvictAt: func(lim admit.KeyedLimiter, at time.Duration) int {
		if table.Is(lim) {
			return table.EvictAt(lim, at)
		}
		return mapstore.EvictAt(lim, at)
	},
	Pause: func(lim admit.KeyedLimiter, f func()) {
		if table.Is(lim) {
			table.Pause(lim, f)
			return
		}
		mapstore.Pause(lim, f)
	},
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
