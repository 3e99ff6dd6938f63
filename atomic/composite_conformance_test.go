package atomic_test

import (
	"fmt"
	"testing"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/locked"
)

// compositeForm is a composite variant and the name of its form.
type compositeForm struct {
	form string
	v    conformance.CompositeVariant
}

// compositeVariants returns NewLimitsLimiter as it is (the pair form for
// two rules that pack, on amd64), and with every composite in the snapshot
// form. atomic has no keyed composite (NewLimits refuses two rules or
// more), so the suite's keyed half is the reference store, locked.NewLimits:
// every check that mirrors key "a" on the single-key limiter holds
// NewLimitsLimiter to the same expectations.
func compositeVariants() []compositeForm {
	notLog := func(a admit.Algorithm) bool { return a != admit.SlidingLog }
	pairAllocs := 0.0 // the suite's Limits, a token bucket and a fixed window, take the pair
	if !admitatomic.PairAvailable() {
		pairAllocs = 1
	}
	return []compositeForm{
		{"chosen", conformance.CompositeVariant{
			Name:             "atomic",
			NewLimits:        keyedHalf,
			NewLimitsLimiter: admitatomic.NewLimitsLimiter,
			Supports:         notLog,
			AllowAllocs:      pairAllocs,
		}},
		{"snapshot", conformance.CompositeVariant{
			Name:      "atomic-snapshot",
			NewLimits: keyedHalf,
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

// keyedHalf is the composite suite's keyed half for atomic: the reference
// store, locked.NewLimits, refusing what NewLimitsLimiter refuses (the
// sliding log), as the suite requires of both constructors.
func keyedHalf(l admit.Limits, opts ...admit.Option) (admit.KeyedLimiter, error) {
	for _, r := range l.Rules() {
		if r.Algorithm == admit.SlidingLog {
			return nil, fmt.Errorf("%w: %v: NewLimitsLimiter has no sliding log", admit.ErrUnsupported, l)
		}
	}
	return locked.NewLimits(l, opts...)
}

// TestCompositeConformance runs the composite suite against
// NewLimitsLimiter as it is and with every composite in the snapshot form
// (compositeVariants).
func TestCompositeConformance(t *testing.T) {
	for _, f := range compositeVariants() {
		t.Run("form="+f.form, func(t *testing.T) { conformance.RunComposite(t, f.v) })
	}
}
