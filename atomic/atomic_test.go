package atomic_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/internal/table"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// variant is atomic as the conformance suite runs it: New takes the rules
// whose state packs in the table's word (table.Packs), NewLimiter every
// rule but the sliding log.
func variant(name string, hashed bool) conformance.Variant {
	newStore := conformance.Keyed(admitatomic.New)
	if hashed {
		newStore = func(r admit.Rule, opts ...admit.Option) (admit.KeyedLimiter, error) {
			return admitatomic.New(r, append([]admit.Option{admit.WithHashedKeys()}, opts...)...)
		}
	}
	return conformance.Variant{
		Name:       name,
		New:        newStore,
		NewLimiter: admitatomic.NewLimiter,
		Supports:   func(a admit.Algorithm) bool { return a != admit.SlidingLog },
		Takes:      table.Packs,
		HashedKeys: true,
		Store:      hooks,
	}
}

// TestConformance runs the whole suite, the keyed-store checks included,
// against New's table and NewLimiter.
func TestConformance(t *testing.T) { conformance.Run(t, variant("atomic", false)) }

// TestConformanceHashedKeys runs the whole suite again on tables that keep
// 64-bit hashes instead of keys.
func TestConformanceHashedKeys(t *testing.T) { conformance.Run(t, variant("atomic-hashed", true)) }

// TestMigration runs the migration checks (Take, Put, Keys and the hooks of
// a Reload's move) against New's table; atomic has no keyed composite.
func TestMigration(t *testing.T) { conformance.RunMigration(t, variant("atomic", false), nil) }
