package stress

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/internal/keyed"
	"github.com/admit-go/admit/internal/plumb"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/sharded"
)

// variant is one row of the table every stress test runs over: a way to
// guard a kernel's state under concurrency. A new variant is covered by
// adding its row. Combinations a variant does not offer (an algorithm, a
// store option) are skipped because its constructor returns an error
// wrapping admit.ErrUnsupported, not because a list here says so.
type variant struct {
	name   string
	keyed  func(admit.Rule, ...admit.Option) (admit.Store, error)   // nil: no keyed limiters
	single func(admit.Rule, ...admit.Option) (admit.Limiter, error) // nil: no single-key limiters
	// keyedLimits and singleLimits are the constructors for composite
	// limits (admit.Limits); nil: none.
	keyedLimits  func(admit.Limits, ...admit.Option) (admit.CompositeStore, error)
	singleLimits func(admit.Limits, ...admit.Option) (admit.Limiter, error)
}

var variants = []variant{
	{name: "locked", keyed: locked.New, single: locked.NewLimiter, keyedLimits: locked.NewLimits, singleLimits: locked.NewLimitsLimiter},
	{name: "atomic", keyed: admitatomic.New, single: admitatomic.NewLimiter, keyedLimits: admitatomic.NewLimits, singleLimits: admitatomic.NewLimitsLimiter},
	{name: "sharded", keyed: sharded.New, keyedLimits: sharded.NewLimits},
}

// buckets reports whether every rule of limits is a token bucket: a keyed
// store of them reserves ahead (any other reserves nothing ahead).
func buckets(limits admit.Limits) bool {
	for _, r := range limits.Rules() {
		if r.Algorithm != admit.TokenBucket {
			return false
		}
	}
	return true
}

// variantNamed returns the row of variants called name.
func variantNamed(name string) variant {
	for _, v := range variants {
		if v.name == name {
			return v
		}
	}
	panic("stress: no variant " + name)
}

// ruleCase is a rule the stress tests use, named for subtests. Each
// algorithm appears with a rule whose state packs into one word in atomic's
// limiters and table and, where the variants have a second form, a rule
// that does not (a token every 16.67ms is not whole nanoseconds; a sliding
// counter of Limit >= 2^16 does not pack: atomic's single-key snapshot, and
// a rule atomic.New refuses), so both forms are covered.
type ruleCase struct {
	name string
	rule admit.Rule
}

// hotRules are the rules of the single-key and hot-key workloads: budgets
// large enough for many admissions per phase (a high admit ratio, where lost
// updates show).
var hotRules = []ruleCase{
	{"tb", admit.Rule{Algorithm: admit.TokenBucket, Limit: 1000, Window: time.Second}},
	{"tb-frac", admit.Rule{Algorithm: admit.TokenBucket, Limit: 600, Window: 7 * time.Second}},
	{"fw", admit.Rule{Algorithm: admit.FixedWindow, Limit: 1000, Window: time.Second}},
	{"sl", admit.Rule{Algorithm: admit.SlidingLog, Limit: 256, Window: time.Second}},
	{"sc", admit.Rule{Algorithm: admit.SlidingCounter, Limit: 1000, Window: time.Second}},
	{"sc-wide", admit.Rule{Algorithm: admit.SlidingCounter, Limit: 70000, Window: time.Minute}},
}

// manyRules are the rules of the many-key workloads: small budgets, so that
// every key's budget runs out in every phase.
var manyRules = []ruleCase{
	{"tb", admit.Rule{Algorithm: admit.TokenBucket, Limit: 8, Window: 80 * time.Millisecond}},
	{"tb-frac", admit.Rule{Algorithm: admit.TokenBucket, Limit: 6, Window: time.Second}},
	{"fw", admit.Rule{Algorithm: admit.FixedWindow, Limit: 8, Window: time.Second}},
	{"sl", admit.Rule{Algorithm: admit.SlidingLog, Limit: 8, Window: time.Second}},
	{"sc", admit.Rule{Algorithm: admit.SlidingCounter, Limit: 8, Window: time.Second}},
	{"sc-wide", admit.Rule{Algorithm: admit.SlidingCounter, Limit: 70000, Window: time.Minute}},
}

// horizon is the longest a key's state takes to become fresh after its last
// admission: one window, two for the sliding counter.
func horizon(r admit.Rule) time.Duration {
	if r.Algorithm == admit.SlidingCounter {
		return 2 * r.Window
	}
	return r.Window
}

// evictionSlack is the stores' documented slack: they evict a key that is
// fresh at the clock's reading minus 100ms (docs/keyed-stores.md).
const evictionSlack = keyed.Slack

// newKeyedSubject builds v's keyed limiter for rule over clk, or skips t if
// v does not offer it (admit.ErrUnsupported). Any other error fails t.
func newKeyedSubject(t *testing.T, v variant, rule admit.Rule, clk *stressClock, opts ...admit.Option) subject {
	t.Helper()
	if v.keyed == nil {
		t.Skipf("%s has no keyed limiter", v.name)
	}
	set, err := plumb.Resolve(opts)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := v.keyed(rule, append(opts, admit.WithClock(clk))...)
	if errors.Is(err, admit.ErrUnsupported) {
		t.Skipf("%s.New(%v): %v", v.name, rule, err)
	}
	if err != nil {
		t.Fatalf("%s.New(%v): %v", v.name, rule, err)
	}
	s := subject{name: v.name, allow: viaAllow(lim.Allow, lim.AllowN), maxKeys: set.MaxKeys, classify: classifyOne(newSpec(rule))}
	if st, ok := lim.(interface{ Sweep() int }); ok {
		s.sweep = st.Sweep
	}
	return s
}

// newSingleSubject builds v's single-key limiter for rule over clk, or skips
// t if v does not offer it.
func newSingleSubject(t *testing.T, v variant, rule admit.Rule, clk *stressClock) subject {
	t.Helper()
	if v.single == nil {
		t.Skipf("%s has no single-key limiter", v.name)
	}
	lim, err := v.single(rule, admit.WithClock(clk))
	if errors.Is(err, admit.ErrUnsupported) {
		t.Skipf("%s.NewLimiter(%v): %v", v.name, rule, err)
	}
	if err != nil {
		t.Fatalf("%s.NewLimiter(%v): %v", v.name, rule, err)
	}
	allow := viaAllow(func(string) admit.Decision { return lim.Allow() }, func(_ string, n int) admit.Decision { return lim.AllowN(n) })
	return subject{name: v.name, allow: allow, classify: classifyOne(newSpec(rule))}
}

// viaAllow returns a subject's allow that sends every other request for 1
// (in the order the calls reach it, from any goroutine) to allow1, a
// limiter's Allow, and the rest to allowN, its AllowN. Several variants
// write Allow out apart from AllowN (the one-token path of atomic's
// single-key cells and of its table), and both must race on the same
// keys: a request's path is not a function of its key.
func viaAllow(allow1 func(string) admit.Decision, allowN func(string, int) admit.Decision) func(string, int) admit.Decision {
	var ones atomic.Uint64
	return func(key string, n int) admit.Decision {
		if n == 1 && ones.Add(1)%2 == 0 {
			return allow1(key)
		}
		return allowN(key, n)
	}
}
