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
		Store:      &conformance.StoreHooks{EvictAt: mapstore.EvictAt, Pause: mapstore.Pause},
	})
}
