package atomic_test

import (
	"testing"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/internal/conformance"
)

// TestCompositeConformance runs the composite suite against NewLimits and
// NewLimitsLimiter as they are (the pair form for two rules that pack, on
// amd64) and with every composite in the snapshot form.
func TestCompositeConformance(t *testing.T) {
	notLog := func(a admit.Algorithm) bool { return a != admit.SlidingLog }
	pairAllocs := 0.0 // the suite's Limits, a token bucket and a fixed window, take the pair
	if !admitatomic.PairAvailable() {
		pairAllocs = 1
	}
	t.Run("form=chosen", func(t *testing.T) {
		conformance.RunComposite(t, conformance.CompositeVariant{
			Name:             "atomic",
			NewLimits:        admitatomic.NewLimits,
			NewLimitsLimiter: admitatomic.NewLimitsLimiter,
			Supports:         notLog,
			AllowAllocs:      pairAllocs,
		})
	})
	t.Run("form=snapshot", func(t *testing.T) {
		conformance.RunComposite(t, conformance.CompositeVariant{
			Name: "atomic-snapshot",
			NewLimits: func(l admit.Limits, opts ...admit.Option) (admit.KeyedLimiter, error) {
				if l.Validate() != nil || l.Len() == 1 {
					return admitatomic.NewLimits(l, opts...)
				}
				return admitatomic.NewLimitsForm(l, false, opts...)
			},
			NewLimitsLimiter: func(l admit.Limits, opts ...admit.Option) (admit.Limiter, error) {
				if l.Validate() != nil || l.Len() == 1 {
					return admitatomic.NewLimitsLimiter(l, opts...)
				}
				return admitatomic.NewLimitsLimiterForm(l, false, opts...)
			},
			Supports:    notLog,
			AllowAllocs: 1, // the snapshot's array
		})
	})
}
