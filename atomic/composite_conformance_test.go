package atomic_test

import (
	"testing"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/internal/conformance"
)

// compositeForm is a composite variant and the name of its form.
type compositeForm struct {
	form string
	v    conformance.CompositeVariant
}

// compositeVariants returns NewLimits and NewLimitsLimiter as they are (the
// pair form for two rules that pack, on amd64), and with every composite in
// the snapshot form.
func compositeVariants() []compositeForm {
	notLog := func(a admit.Algorithm) bool { return a != admit.SlidingLog }
	pairAllocs := 0.0 // the suite's Limits, a token bucket and a fixed window, take the pair
	if !admitatomic.PairAvailable() {
		pairAllocs = 1
	}
	return []compositeForm{
		{"chosen", conformance.CompositeVariant{
			Name:             "atomic",
			NewLimits:        conformance.KeyedLimits(admitatomic.NewLimits),
			NewLimitsLimiter: admitatomic.NewLimitsLimiter,
			Supports:         notLog,
			AllowAllocs:      pairAllocs,
		}},
		{"snapshot", conformance.CompositeVariant{
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
		}},
	}
}

// TestCompositeConformance runs the composite suite, its Stats checks and
// CompositeHeldMemoryReturns against NewLimits and NewLimitsLimiter as they
// are and with every composite in the snapshot form (compositeVariants).
func TestCompositeConformance(t *testing.T) {
	for _, f := range compositeVariants() {
		t.Run("form="+f.form, func(t *testing.T) {
			conformance.RunComposite(t, f.v)
			t.Run("Stats", func(t *testing.T) { conformance.RunCompositeStats(t, f.v) })
			t.Run("HeldMemoryReturns", func(t *testing.T) { conformance.CompositeHeldMemoryReturns(t, f.v) })
		})
	}
}
