package atomic_test

import (
	"testing"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/internal/conformance"
)

func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Variant{
		Name:       "atomic",
		New:        conformance.Keyed(admitatomic.New),
		NewLimiter: admitatomic.NewLimiter,
		Supports:   func(a admit.Algorithm) bool { return a != admit.SlidingLog },
		// The conformance allocation test uses Limit 65536 per hour: a token
		// bucket (not whole nanoseconds per token) and a sliding counter (too
		// large to pack) that both take the snapshot form, one allocation per
		// admission. The packed forms are held to zero in packed_test.go.
		AllowAllocs: 1,
	})
}
