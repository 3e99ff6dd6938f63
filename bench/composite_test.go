package bench

import (
	"errors"
	"strconv"
	satomic "sync/atomic"
	"testing"
	"time"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/sharded"
)

// Composite limits (admit.Limits): what a second rule on the same key costs.
// Each variant runs a token bucket under a fixed window (limits=tb+fw,
// admit.NewLimits of both rules) beside the token bucket alone (limits=tb,
// the same constructor given the one rule, which returns the variant's
// plain limiter), on the same frozen clock, so that one run gives the
// ratio: go tool benchstat -filter .name:Composite -col /limits.
//
// The clock is a fake one that never moves: the rows measure the decision
// and its publication, not a clock read, and a key never falls idle, so no
// keyed store evicts a key mid-run. Nothing refills on a frozen clock, so
// the rules' budgets exceed any run's calls (10^9 and 10^8 per key; a run
// makes well under 10^8 calls): every call is admitted, which admitted/op
// checks. The token bucket's token is whole nanoseconds and both rules pack
// in one word each, so atomic takes its packed forms: the packed token
// bucket alone (keyed: the table), and the pair form (both words swapped by
// one 16-byte CAS on amd64) for the two, on one key only: atomic has no
// keyed composite (its NewLimits refuses two rules, naming sharded's).

var (
	compositeTB = admit.Rule{Algorithm: admit.TokenBucket, Limit: 1_000_000_000, Window: 4 * time.Second}
	compositeFW = admit.Rule{Algorithm: admit.FixedWindow, Limit: 100_000_000, Window: 40 * time.Second}
)

// compositeLimits are the limits of the composite rows: the token bucket
// alone, and under the fixed window.
func compositeLimits() []struct {
	name   string
	limits admit.Limits
} {
	one, err := admit.NewLimits(compositeTB)
	if err != nil {
		panic(err)
	}
	two, err := admit.NewLimits(compositeTB, compositeFW)
	if err != nil {
		panic(err)
	}
	return []struct {
		name   string
		limits admit.Limits
	}{{"tb", one}, {"tb+fw", two}}
}

// compositeImpl is a variant's constructors for Limits.
type compositeImpl struct {
	impl   string
	single func(admit.Limits, ...admit.Option) (admit.Limiter, error)        // nil: no single-key limiter
	keyed  func(admit.Limits, ...admit.Option) (admit.CompositeStore, error) // atomic's refuses two rules or more
}

// keyedOf returns im's keyed limiter of limits, or nil if im refuses them
// (admit.ErrUnsupported: atomic's NewLimits of two rules).
func (im compositeImpl) keyedOf(limits admit.Limits) (admit.KeyedLimiter, error) {
	l, err := im.keyed(limits, admit.WithClock(frozenClock()))
	if errors.Is(err, admit.ErrUnsupported) {
		return nil, nil
	}
	return l, err
}

var compositeImpls = []compositeImpl{
	{impl: "atomic", single: admitatomic.NewLimitsLimiter, keyed: admitatomic.NewLimits},
	{impl: "locked", single: locked.NewLimitsLimiter, keyed: locked.NewLimits},
	{impl: "sharded", keyed: sharded.NewLimits},
}

// frozenClock returns a fake clock that stays at one hour.
func frozenClock() *clock.Fake {
	c := clock.NewFake()
	c.Set(time.Hour)
	return c
}

// BenchmarkComposite measures composite limits against the token bucket
// alone, in each variant: path=serial is one key from one goroutine,
// path=hot-key one key from every goroutine of -cpu (RunParallel),
// path=keyed 100,000 existing keys (each admitted once before the
// measurement), uniform, from every goroutine.
func BenchmarkComposite(b *testing.B) {
	for _, path := range []string{"serial", "hot-key"} {
		for _, im := range compositeImpls {
			if im.single == nil {
				continue
			}
			for _, lc := range compositeLimits() {
				b.Run("path="+path+"/limits="+lc.name+"/impl="+im.impl, func(b *testing.B) {
					l, err := im.single(lc.limits, admit.WithClock(frozenClock()))
					if err != nil {
						b.Fatalf("%s: %v", im.impl, err)
					}
					if path == "serial" {
						admitted := 0
						b.ReportAllocs()
						for b.Loop() {
							if l.Allow().Allowed {
								admitted++
							}
						}
						b.ReportMetric(float64(admitted)/float64(b.N), "admitted/op")
						return
					}
					var admitted satomic.Int64
					b.ReportAllocs()
					b.RunParallel(func(pb *testing.PB) {
						n := int64(0)
						for pb.Next() {
							if l.Allow().Allowed {
								n++
							}
						}
						admitted.Add(n)
					})
					b.ReportMetric(float64(admitted.Load())/float64(b.N), "admitted/op")
				})
			}
		}
	}
	w := KeyedWorkload(fullKeys, Uniform)
	for _, im := range compositeImpls {
		for _, lc := range compositeLimits() {
			l, err := im.keyedOf(lc.limits)
			if err != nil {
				b.Fatalf("%s: %v", im.impl, err)
			}
			if l == nil {
				continue
			}
			for _, k := range w.Keys {
				l.Allow(k)
			}
			b.Run("path=keyed/keys="+strconv.Itoa(fullKeys)+"/limits="+lc.name+"/impl="+im.impl, func(b *testing.B) {
				runKeyed(b, w, func(k string, _ int) admit.Decision { return l.Allow(k) })
			})
		}
	}
}

// TestCompositeRows checks the composite rows before the benchmark trusts
// them: each builds, and admits every call of a few thousand on one key and
// on several keys. A row that denied would measure the wrong path.
func TestCompositeRows(t *testing.T) {
	keys := Keys(100)
	for _, im := range compositeImpls {
		for _, lc := range compositeLimits() {
			name := im.impl + "/" + lc.name
			if im.single != nil {
				l, err := im.single(lc.limits, admit.WithClock(frozenClock()))
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if _, ok := l.(admit.CompositeLimiter); ok != (lc.limits.Len() > 1) {
					t.Errorf("%s: %T is a CompositeLimiter: %v, want %v", name, l, ok, lc.limits.Len() > 1)
				}
				for i := range 5000 {
					if !l.Allow().Allowed {
						t.Fatalf("%s: call %d denied", name, i)
					}
				}
			}
			l, err := im.keyedOf(lc.limits)
			if err != nil {
				t.Fatalf("%s keyed: %v", name, err)
			}
			if l == nil {
				if im.impl != "atomic" || lc.limits.Len() == 1 {
					t.Errorf("%s keyed: refused", name)
				}
				continue
			}
			// Every keyed store is a CompositeStore; one of one rule is
			// the rule's store, an admit.Store, with its Rule.
			if _, ok := l.(admit.Store); ok != (lc.limits.Len() == 1) {
				t.Errorf("%s keyed: %T is a Store: %v, want %v", name, l, ok, lc.limits.Len() == 1)
			}
			for i := range 5000 {
				if k := keys[i%len(keys)]; !l.Allow(k).Allowed {
					t.Fatalf("%s keyed: call %d, on %q, denied", name, i, k)
				}
			}
		}
	}
}
