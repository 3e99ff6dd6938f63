package bench

import (
	"fmt"
	"slices"
	"sync"
	satomic "sync/atomic"
	"time"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/sharded"
)

// Limiter is one key's limiter as the workloads drive it. It is the Allow half
// of admit.Limiter, so admit's limiters are used as they are, and each peer
// has a small adapter that reports its answer as a Decision (only Allowed is
// meaningful for a peer).
type Limiter interface {
	Allow() admit.Decision
}

// LimiterN is a Limiter that can ask for n at once, all or nothing.
type LimiterN interface {
	AllowN(n int) admit.Decision
}

// Keyed is a limiter with one budget per key, as the workloads drive it: the
// Allow half of admit.KeyedLimiter.
type Keyed interface {
	Allow(key string) admit.Decision
}

// KeyedN is a Keyed limiter that can ask for n at once, all or nothing.
type KeyedN interface {
	AllowN(key string, n int) admit.Decision
}

// Mode is what a limiter is configured to do on every call of a workload.
type Mode uint8

const (
	// Admit: a limit so high that no run reaches it, so every call is
	// admitted (the admitted/op metric checks it). It measures the path of an
	// admitted request, the one a healthy service takes almost always.
	Admit Mode = iota
	// Deny: one request per hour, spent before the measurement, so every call
	// is denied: the path of an abusive client.
	Deny
)

// Env is the configuration a workload asks a row for.
type Env struct {
	Mode Mode
	// Keys is how many distinct keys the workload will use: a capacity hint
	// (the size of an LRU store, for instance).
	Keys int
	// Evict asks a keyed store to run with idle-key eviction, for rows that
	// have it (KeyedRow.Evicts). It is a bounded or swept store, configured so
	// that no key in use is forgotten, to measure the overhead of eviction on
	// the request path.
	Evict bool
	// Use is the kind of keyed workload, which decides the rule admit's keyed
	// rows get (see Use).
	Use Use
	// Clock, when not nil, is the clock admit's keyed rows read instead of
	// their own (the system clock, or clock.Coarse for the -coarse rows):
	// cmd/instr gives them a step clock, so that valgrind counts no system
	// call. The peers' clocks cannot be replaced; they ignore it.
	Clock clock.Clock
}

// Use is the kind of keyed workload a limiter is built for.
//
// admit's keyed stores evict a key lossless-ly once its state is fresh (a
// full bucket, expired windows) and has been idle for a while, so a
// workload over existing keys needs a rule under which a key stays in use
// between its requests, or it would measure re-creation instead. Under
// Steady and Memory the admit rows get long windows (a token bucket of
// 2,000,000 per 30 minutes, windows of an hour) and are primed (KeyedRow.Prime)
// so that every key stays in use for the whole run while no request is
// denied; under Churn they keep the one-key rules, so idle keys go as they
// would in production.
type Use uint8

const (
	// Steady: requests on existing keys (Keyed, AllowN, Eviction).
	Steady Use = iota
	// Churn: every request a new key.
	Churn
	// Memory: one request per key, then the heap is measured.
	Memory
)

// Families of rows, for the reports.
const (
	FamilyAdmit = "admit"
	FamilyPeer  = "peer"
	FamilyFloor = "floor"
)

// SingleRow is a one-key limiter under test.
type SingleRow struct {
	Impl   string // the impl= label
	Algo   string // the algo= label: admit's algorithm names; peers are labelled with the closest one
	Family string // FamilyAdmit, FamilyPeer or FamilyFloor
	// AdmitOnly marks a row without a deny path: uber's limiter has only a
	// blocking Take (measured at a rate so high it never waits), and the
	// floors have nothing to deny.
	AdmitOnly bool
	// New builds the limiter for env; stop releases it (background goroutines).
	New func(env Env) (lim Limiter, stop func(), err error)
}

// KeyedRow is a keyed limiter under test.
type KeyedRow struct {
	Impl   string
	Algo   string
	Family string
	// Evicts reports whether New honours Env.Evict.
	Evicts bool
	// Uses lists the keyed workloads the row takes part in (nil: all).
	Uses []Use
	New  func(env Env) (lim Keyed, stop func(), err error)
	// Prime makes key an existing key of l before a Steady or Memory
	// workload; nil is one Allow.
	Prime func(l Keyed, key string)
}

// Runs reports whether the row takes part in workloads of use u.
func (r KeyedRow) Runs(u Use) bool { return r.Uses == nil || slices.Contains(r.Uses, u) }

// PrimeKey makes key an existing key of l, as the row wants.
func (r KeyedRow) PrimeKey(l Keyed, key string) {
	if r.Prime != nil {
		r.Prime(l, key)
		return
	}
	l.Allow(key)
}

func nop() {}

// ---- admit ----

// coarse is the shared clock.Coarse of the admit rows labelled -coarse, started
// on first use and kept for the life of the process.
var coarse = sync.OnceValue(func() *clock.CoarseClock {
	c, err := clock.Coarse(CoarseResolution)
	if err != nil {
		panic(err)
	}
	return c
})

// CoarseResolution is the resolution of the coarse clock: 1ms, well below the
// emission interval of any rule the -coarse rows use.
const CoarseResolution = time.Millisecond

// StopCoarse stops the shared coarse clock, if it was started.
func StopCoarse() {
	if c := coarse(); c != nil {
		c.Stop()
	}
}

// admitClock is the clock an admit row reads.
type admitClock uint8

const (
	systemClock admitClock = iota
	coarseClock
)

func (c admitClock) option() admit.Option {
	if c == coarseClock {
		return admit.WithClock(coarse())
	}
	return admit.WithClock(clock.System())
}

func (c admitClock) suffix() string {
	if c == coarseClock {
		return "-coarse"
	}
	return ""
}

// Admit-mode rules of the one-key limiters (and of admit's keyed rows under
// Churn). Each is far above any rate a run reaches (a 2-core machine makes
// well under 10^8 calls a second) and each keeps the form the row is named
// for: a token every nanosecond is whole nanoseconds (packed), one every
// 1000/999999 ns is not (snapshot); a sliding counter packs when Limit < 2^16
// and its window is long enough for every window index of the clock range
// (docs/algorithms.md): 15 per 128ns does, and admits every call.
var (
	tbRule         = admit.Rule{Algorithm: admit.TokenBucket, Limit: 1_000_000, Window: time.Millisecond}
	tbSnapRule     = admit.Rule{Algorithm: admit.TokenBucket, Limit: 999_999, Window: time.Millisecond}
	fwRule         = admit.Rule{Algorithm: admit.FixedWindow, Limit: 1_000_000_000, Window: time.Second}
	scPackedRule   = admit.Rule{Algorithm: admit.SlidingCounter, Limit: 15, Window: 128 * time.Nanosecond}
	scSnapRule     = admit.Rule{Algorithm: admit.SlidingCounter, Limit: 1_000_000_000, Window: time.Second}
	slRule         = admit.Rule{Algorithm: admit.SlidingLog, Limit: 4096, Window: 10 * time.Microsecond}
	slKeyedRule    = admit.Rule{Algorithm: admit.SlidingLog, Limit: 64, Window: time.Microsecond} // 512 bytes of log per key
	denyRule       = func(a admit.Algorithm) admit.Rule { return admit.Rule{Algorithm: a, Limit: 1, Window: time.Hour} }
	scSnapDenyRule = admit.Rule{Algorithm: admit.SlidingCounter, Limit: 1 << 16, Window: time.Hour} // the smallest limit that does not pack
)

// Keyed rules of admit's rows under Steady and Memory (see Use): no request
// of a run is denied, and no key falls idle during a run. A token bucket
// primed with an eighth of its limit stays in debt for 225 s; a window of an
// hour stays current for the rest of its hour. 2,000,000 per 30 minutes is a
// token every 900 µs (packed); 1,999,999 is not whole nanoseconds (snapshot).
// A sliding counter that packs (Limit < 2^16) cannot take a hot Zipf key's
// requests for an hour, so the packed form runs only under Churn and Memory.
// The sliding log keeps Limit timestamps per key, so its Steady rule is small
// and short (64 per µs): its keys fall idle between requests, as small logs do.
var (
	tbSteadyRule     = admit.Rule{Algorithm: admit.TokenBucket, Limit: 2_000_000, Window: 30 * time.Minute}
	tbSnapSteadyRule = admit.Rule{Algorithm: admit.TokenBucket, Limit: 1_999_999, Window: 30 * time.Minute}
	fwSteadyRule     = admit.Rule{Algorithm: admit.FixedWindow, Limit: 1_000_000, Window: time.Hour}
	scPackedMemRule  = admit.Rule{Algorithm: admit.SlidingCounter, Limit: 1<<16 - 1, Window: time.Hour}
	scSteadyRule     = admit.Rule{Algorithm: admit.SlidingCounter, Limit: 1_000_000, Window: time.Hour}
	slMemRule        = admit.Rule{Algorithm: admit.SlidingLog, Limit: 64, Window: time.Hour}
)

// primeShare is the share of its limit a token bucket spends per key when it
// is primed: 1/8, so a primed key keeps 7/8 of its burst.
const primeShare = 8

// admitForm is one way admit can build a limiter for an algorithm.
type admitForm struct {
	impl   string // without the clock suffix
	algo   admit.Algorithm
	coarse bool // also measured with clock.Coarse (the rule tolerates a 1ms-stale clock)
	rule   admit.Rule
	deny   admit.Rule
	single func(admit.Rule, ...admit.Option) (admit.Limiter, error)
	keyed  func(admit.Rule, ...admit.Option) (admit.Store, error) // nil: no keyed row
	churn  admit.Rule                                             // keyed rule under Churn, when it differs from rule
	steady admit.Rule                                             // keyed rule under Steady; zero: the form does not run Steady workloads
	memory admit.Rule                                             // keyed rule under Memory; zero: steady
}

func asLimiter[L admit.Limiter](f func(admit.Rule, ...admit.Option) (L, error)) func(admit.Rule, ...admit.Option) (admit.Limiter, error) {
	return func(r admit.Rule, o ...admit.Option) (admit.Limiter, error) { return f(r, o...) }
}

// admitForms lists every variant and form of admit, with every algorithm each
// supports.
var admitForms = []admitForm{
	{impl: "atomic-packed", algo: admit.TokenBucket, coarse: true, rule: tbRule, steady: tbSteadyRule, single: asLimiter(admitatomic.NewTokenBucket), keyed: admitatomic.New},
	{impl: "atomic-snapshot", algo: admit.TokenBucket, coarse: true, rule: tbRule, churn: tbSnapRule, steady: tbSnapSteadyRule, single: asLimiter(admitatomic.NewTokenBucketSnapshot), keyed: admitatomic.New},
	{impl: "locked", algo: admit.TokenBucket, coarse: true, rule: tbRule, steady: tbSteadyRule, single: locked.NewLimiter, keyed: locked.New},
	{impl: "atomic-packed", algo: admit.FixedWindow, coarse: true, rule: fwRule, steady: fwSteadyRule, single: asLimiter(admitatomic.NewFixedWindow), keyed: admitatomic.New},
	{impl: "locked", algo: admit.FixedWindow, coarse: true, rule: fwRule, steady: fwSteadyRule, single: locked.NewLimiter, keyed: locked.New},
	{impl: "atomic-packed", algo: admit.SlidingCounter, rule: scPackedRule, memory: scPackedMemRule, single: admitatomic.NewLimiter, keyed: admitatomic.New},
	// atomic.New refuses a sliding counter whose state does not pack (the
	// sharded row keeps it): the snapshot counter is single-key only.
	{impl: "atomic-snapshot", algo: admit.SlidingCounter, coarse: true, rule: scSnapRule, deny: scSnapDenyRule, steady: scSteadyRule, single: admitatomic.NewLimiter},
	{impl: "locked", algo: admit.SlidingCounter, coarse: true, rule: scSnapRule, steady: scSteadyRule, single: locked.NewLimiter, keyed: locked.New},
	{impl: "locked", algo: admit.SlidingLog, rule: slRule, churn: slKeyedRule, steady: slKeyedRule, memory: slMemRule, single: locked.NewLimiter, keyed: locked.New},
}

func (f admitForm) ruleFor(mode Mode) admit.Rule {
	switch {
	case mode == Deny && f.deny.Algorithm != 0:
		return f.deny
	case mode == Deny:
		return denyRule(f.algo)
	}
	return f.rule
}

// keyedRule returns the rule of the form's keyed row under use (zero if the
// form does not run such workloads).
func (f admitForm) keyedRule(mode Mode, use Use) admit.Rule {
	switch {
	case mode == Deny:
		return f.ruleFor(Deny)
	case use == Churn && f.churn.Algorithm != 0:
		return f.churn
	case use == Churn:
		return f.rule
	case use == Memory && f.memory.Algorithm != 0:
		return f.memory
	}
	return f.steady
}

// spend makes a Deny-mode limiter deny from now on: it asks for the rule's
// whole limit at once.
func spend(d admit.Decision, r admit.Rule) error {
	if !d.Allowed {
		return fmt.Errorf("spending the limit of %v was denied", r)
	}
	return nil
}

func (f admitForm) singleRow(c admitClock) SingleRow {
	return SingleRow{
		Impl: f.impl + c.suffix(), Algo: f.algo.String(), Family: FamilyAdmit,
		New: func(env Env) (Limiter, func(), error) {
			r := f.ruleFor(env.Mode)
			l, err := f.single(r, c.option())
			if err != nil {
				return nil, nil, err
			}
			if env.Mode == Deny {
				if err := spend(l.AllowN(r.Limit), r); err != nil {
					return nil, nil, err
				}
			}
			return l, nop, nil
		},
	}
}

func (f admitForm) keyedRow(c admitClock) KeyedRow {
	row := admitKeyed(f.impl+c.suffix(), f.algo, f.keyed, f.keyedRule, []admit.Option{c.option()}, nil)
	row.Uses = []Use{Churn, Memory}
	if f.steady.Algorithm != 0 {
		row.Uses = nil
	}
	if f.algo == admit.TokenBucket {
		n := max(1, f.steady.Limit/primeShare)
		row.Prime = func(l Keyed, key string) { l.(KeyedN).AllowN(key, n) }
	}
	return row
}

// admitKeyed is the row of an admit keyed variant built by factory, with the
// rule for each mode and use. evict, when not nil, returns the options that
// turn on idle-key eviction for an Env: the row then Evicts. A variant
// without a single-key form (the sharded store) is one more call of this
// function in Keyeds.
func admitKeyed(impl string, algo admit.Algorithm, factory func(admit.Rule, ...admit.Option) (admit.Store, error), rule func(Mode, Use) admit.Rule, opts []admit.Option, evict func(Env) []admit.Option) KeyedRow {
	return KeyedRow{
		Impl: impl, Algo: algo.String(), Family: FamilyAdmit, Evicts: evict != nil,
		New: func(env Env) (Keyed, func(), error) {
			o := opts
			if env.Evict && evict != nil {
				o = append(slices.Clone(o), evict(env)...)
			}
			if env.Clock != nil {
				o = append(slices.Clone(o), admit.WithClock(env.Clock)) // the last WithClock wins
			}
			r := rule(env.Mode, env.Use)
			if r.Algorithm == 0 {
				return nil, nil, fmt.Errorf("%s/%v: no rule for this workload", impl, algo)
			}
			l, err := factory(r, o...)
			if err != nil {
				return nil, nil, err
			}
			return l, nop, nil
		},
	}
}

// spendKey makes key deny from now on, in Deny mode.
func spendKey(l Keyed, key string) error {
	for range 1 << 17 {
		if !l.Allow(key).Allowed {
			return nil
		}
	}
	return fmt.Errorf("key %q is still admitted after 2^17 requests", key)
}

// ---- floors ----

// origin carries a monotonic reading, so time.Since(origin) reads only the
// monotonic clock, as clock.System does.
var origin = time.Now()

// floorCAS is "a limiter" that does only what an atomic limiter cannot avoid:
// read the clock (time.Since) and publish one CAS. It runs through the same
// interface as every row, so the ratio of a limiter to it is like for like.
type floorCAS struct{ w satomic.Int64 }

func (f *floorCAS) Allow() admit.Decision {
	now := int64(time.Since(origin))
	old := f.w.Load()
	return admit.Decision{Allowed: f.w.CompareAndSwap(old, max(old, now)+1)}
}

// floorMutex reads the clock and updates a word under a mutex: the floor of
// a locked limiter.
type floorMutex struct {
	mu sync.Mutex
	w  int64
}

func (f *floorMutex) Allow() admit.Decision {
	now := int64(time.Since(origin))
	f.mu.Lock()
	f.w = max(f.w, now) + 1
	f.mu.Unlock()
	return admit.Decision{Allowed: true}
}

// Floor row names, for the reports.
const (
	FloorCAS   = "floor-since+cas"
	FloorMutex = "floor-since+mutex"
)

var floorRows = []SingleRow{
	{Impl: FloorCAS, Algo: "token-bucket", Family: FamilyFloor, AdmitOnly: true, New: func(Env) (Limiter, func(), error) { return new(floorCAS), nop, nil }},
	{Impl: FloorMutex, Algo: "token-bucket", Family: FamilyFloor, AdmitOnly: true, New: func(Env) (Limiter, func(), error) { return new(floorMutex), nop, nil }},
}

// ---- the tables ----

// Singles returns every one-key limiter under test: each admit form on the
// system clock, again on clock.Coarse where its rule allows (impl -coarse),
// the floors, and the peers (the keyed peers on one fixed key).
func Singles() []SingleRow {
	var rows []SingleRow
	for _, f := range admitForms {
		rows = append(rows, f.singleRow(systemClock))
	}
	for _, f := range admitForms {
		if f.coarse {
			rows = append(rows, f.singleRow(coarseClock))
		}
	}
	rows = append(rows, floorRows...)
	singles := peerSingles()
	rows = append(rows, singles...)
	for _, k := range peerKeyeds() {
		if !slices.ContainsFunc(singles, func(s SingleRow) bool { return s.Impl == k.Impl }) {
			rows = append(rows, onOneKey(k)) // a keyed store, on one key
		}
	}
	return rows
}

// Keyeds returns every keyed limiter under test: each admit variant and form,
// the token buckets again on clock.Coarse, and the peers.
func Keyeds() []KeyedRow {
	var rows []KeyedRow
	for _, f := range admitForms {
		if f.keyed != nil {
			rows = append(rows, f.keyedRow(systemClock))
		}
	}
	for _, f := range admitForms {
		if f.keyed != nil && f.coarse && f.algo == admit.TokenBucket && f.impl != "atomic-snapshot" {
			rows = append(rows, f.keyedRow(coarseClock))
		}
	}
	// The table (atomic.New) again with admit.WithHashedKeys (a 64-bit
	// seeded hash kept in the slot instead of each key), token bucket only:
	// the option changes the slot's key, the same for every algorithm, and
	// the goals that ask for it (bytes per key, keyed speed) are stated for
	// the token bucket.
	for _, f := range admitForms {
		if f.impl == "atomic-packed" && f.algo == admit.TokenBucket {
			s := f
			s.impl, s.keyed = AtomicHashed, withHashedKeys(admitatomic.New)
			rows = append(rows, s.keyedRow(systemClock))
		}
	}
	// The sharded store (the map store) has no single-key form: one keyed
	// row per algorithm, with the locked rows' rules.
	for _, f := range admitForms {
		if f.impl == "locked" {
			s := f
			s.impl, s.keyed = "sharded", sharded.New
			rows = append(rows, s.keyedRow(systemClock))
		}
	}
	// The sharded store again with admit.WithHashedKeys (a 64-bit seeded
	// hash kept instead of each key), token bucket only, as the table's.
	for _, f := range admitForms {
		if f.impl == "locked" && f.algo == admit.TokenBucket {
			s := f
			s.impl, s.keyed = ShardedHashed, withHashedKeys(sharded.New)
			rows = append(rows, s.keyedRow(systemClock))
		}
	}
	rows = append(rows, peerKeyeds()...)
	return rows
}

// The impl labels of the keyed stores with admit.WithHashedKeys: the table
// (atomic.New) and the map store (sharded.New).
const (
	AtomicHashed  = "atomic-hashed"
	ShardedHashed = "sharded-hashed"
)

// withHashedKeys returns factory with admit.WithHashedKeys added to its
// options.
func withHashedKeys(factory func(admit.Rule, ...admit.Option) (admit.Store, error)) func(admit.Rule, ...admit.Option) (admit.Store, error) {
	return func(r admit.Rule, opts ...admit.Option) (admit.Store, error) {
		return factory(r, append(slices.Clone(opts), admit.WithHashedKeys())...)
	}
}

// oneKey is the key the keyed peers are driven on in the one-key workloads.
const oneKey = "203.0.113.7"

type keyedOnOne struct {
	k   Keyed
	key string
}

func (o keyedOnOne) Allow() admit.Decision { return o.k.Allow(o.key) }

func onOneKey(k KeyedRow) SingleRow {
	return SingleRow{
		Impl: k.Impl, Algo: k.Algo, Family: k.Family,
		New: func(env Env) (Limiter, func(), error) {
			env.Keys = 1
			l, stop, err := k.New(env)
			if err != nil {
				return nil, nil, err
			}
			if env.Mode == Deny {
				if err := spendKey(l, oneKey); err != nil {
					stop()
					return nil, nil, err
				}
			}
			return keyedOnOne{l, oneKey}, stop, nil
		},
	}
}
