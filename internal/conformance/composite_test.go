package conformance

import (
	"flag"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/plumb"
	"github.com/admit-go/admit/internal/reservation"
)

// The suite's own tests: it passes on the simplest correct composite store
// (kernel.Composite under one mutex, the states in a map), and its checks
// fail on a store that charges each rule on its own instead of all or
// nothing.

// mapLimits is a keyed store of Limits: kernel.Composite under one mutex,
// each key's state and hold in a map. When broken, it decides each rule on
// its own and charges every rule that admits, even when another denies.
type mapLimits struct {
	clk    clock.Clock
	k      *kernel.Composite
	parts  []*kernel.Composite // each rule alone, for the broken store
	broken bool

	mu   sync.Mutex
	keys map[string]*mapEntry // guarded by mu
}

type mapEntry struct {
	s []kernel.PartState
	h kernel.CompositeHold
}

func newMapLimits(l admit.Limits, set plumb.Settings, broken bool) *mapLimits {
	m := &mapLimits{clk: set.Clock, k: kernel.NewComposite(l), broken: broken, keys: map[string]*mapEntry{}}
	for _, r := range l.Rules() {
		one, _ := admit.NewLimits(r)
		m.parts = append(m.parts, kernel.NewComposite(one))
	}
	return m
}

// entry returns key's entry, made fresh if the store has none; it requires
// that m.mu is held.
func (m *mapLimits) entry(key string) *mapEntry {
	e := m.keys[key]
	if e == nil {
		e = &mapEntry{s: make([]kernel.PartState, m.k.Len())}
		m.keys[key] = e
	}
	return e
}

func (m *mapLimits) decide(key string, n int) (admit.Decision, int) {
	now := m.clk.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entry(key)
	var d admit.Decision
	var which int
	if m.broken {
		d, which = m.separately(e.s, now, n)
	} else {
		d, which = m.k.Allow(e.s, now, n)
	}
	if e.h.Ticket != 0 && !m.k.Observe(&e.h, e.s, now) {
		e.h = kernel.CompositeHold{}
	}
	return d, which
}

// separately is the broken store's decision: each rule decides and is
// charged on its own.
func (m *mapLimits) separately(s []kernel.PartState, now time.Duration, n int) (admit.Decision, int) {
	var d admit.Decision
	d.Allowed = true
	which := 0
	ds := make([]admit.Decision, len(m.parts))
	for i, p := range m.parts {
		ds[i], _ = p.Allow(s[i:i+1], now, n)
		d.Allowed = d.Allowed && ds[i].Allowed
		d.ResetAfter = max(d.ResetAfter, ds[i].ResetAfter)
	}
	for i := range ds {
		if d.Allowed && ds[i].Remaining < ds[which].Remaining || !d.Allowed && ds[i].RetryAfter > ds[which].RetryAfter {
			which = i
		}
	}
	if d.Allowed {
		d.Remaining = ds[which].Remaining
	} else {
		d.RetryAfter = ds[which].RetryAfter
	}
	d.Limit = ds[which].Limit
	return d, which
}

func (m *mapLimits) reserve(key string, n int, maxWait time.Duration) (admit.Reservation, bool) {
	now := m.clk.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entry(key)
	d, ok, t := m.k.ReserveHold(e.s, &e.h, now, n, maxWait)
	return reservation.New(d, n, t), ok
}

func (m *mapLimits) cancel(key string, r admit.Reservation) bool {
	now := m.clk.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.keys[key]
	if e == nil {
		return false
	}
	ok, drop := m.k.CancelHold(e.s, &e.h, reservation.Ticket(r), now)
	if drop {
		e.h = kernel.CompositeHold{}
	}
	return ok
}

func (m *mapLimits) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.keys)
}

func (m *mapLimits) Sweep() int {
	now := m.clk.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for key, e := range m.keys {
		if m.k.Fresh(e.s, now) {
			delete(m.keys, key)
			n++
		}
	}
	return n
}

func (m *mapLimits) Reset(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.keys, key)
}

// The keyed faces of mapLimits: the rule's admit.Store for one rule, an
// admit.CompositeStore for more; each reserves ahead when every rule is a
// token bucket, and nothing ahead otherwise (reservation.Now).
type (
	mapRule       struct{ *mapLimits }
	mapRuleTB     struct{ mapRule }
	mapComposite  struct{ *mapLimits }
	mapCompositTB struct{ mapComposite }
)

func (m mapRule) Allow(key string) admit.Decision { return m.AllowN(key, 1) }
func (m mapRule) AllowN(key string, n int) admit.Decision {
	d, _ := m.decide(key, n)
	return d
}
func (m mapRule) Rule() admit.Rule                                    { return m.k.Limits().At(0) }
func (m mapRule) Limits() admit.Limits                                { return m.k.Limits() }
func (m mapRule) AllowNWhich(key string, n int) (admit.Decision, int) { return m.decide(key, n) }

// ReserveN and CancelReservation of a store that reserves nothing ahead
// (the TB faces have their own), and Stats of either.
func (m *mapLimits) ReserveN(key string, n int, _ time.Duration) (admit.Reservation, bool) {
	d, _ := m.decide(key, n)
	return reservation.Now(d.Allowed, d.RetryAfter, n)
}
func (m *mapLimits) CancelReservation(_ string, r admit.Reservation) bool {
	return reservation.NowCancelled(r)
}
func (m *mapLimits) Stats() admit.StoreStats { return admit.StoreStats{Keys: m.Len()} }

func (m mapComposite) Allow(key string) admit.Decision { return m.AllowN(key, 1) }
func (m mapComposite) AllowN(key string, n int) admit.Decision {
	d, _ := m.decide(key, n)
	return d
}
func (m mapComposite) AllowNWhich(key string, n int) (admit.Decision, int) { return m.decide(key, n) }
func (m mapComposite) Limits() admit.Limits                                { return m.k.Limits() }

func (m mapRuleTB) ReserveN(key string, n int, maxWait time.Duration) (admit.Reservation, bool) {
	return m.reserve(key, n, maxWait)
}
func (m mapRuleTB) CancelReservation(key string, r admit.Reservation) bool { return m.cancel(key, r) }
func (m mapCompositTB) ReserveN(key string, n int, maxWait time.Duration) (admit.Reservation, bool) {
	return m.reserve(key, n, maxWait)
}
func (m mapCompositTB) CancelReservation(key string, r admit.Reservation) bool {
	return m.cancel(key, r)
}

var (
	_ admit.Store          = mapRule{}
	_ admit.Store          = mapRuleTB{}
	_ admit.CompositeStore = mapComposite{}
	_ admit.CompositeStore = mapCompositTB{}
)

// The single-key faces: key "" of a store of its own.
type (
	mapSingle       struct{ *mapLimits }
	mapSingleTB     struct{ mapSingle }
	mapSingleComp   struct{ mapSingle }
	mapSingleCompTB struct{ mapSingleComp }
)

func (m mapSingle) Allow() admit.Decision { return m.AllowN(1) }
func (m mapSingle) AllowN(n int) admit.Decision {
	d, _ := m.decide("", n)
	return d
}
func (m mapSingleComp) AllowNWhich(n int) (admit.Decision, int) { return m.decide("", n) }
func (m mapSingleComp) Limits() admit.Limits                    { return m.k.Limits() }
func (m mapSingleTB) ReserveN(n int, maxWait time.Duration) (admit.Reservation, bool) {
	return m.reserve("", n, maxWait)
}
func (m mapSingleTB) CancelReservation(r admit.Reservation) bool { return m.cancel("", r) }
func (m mapSingleCompTB) ReserveN(n int, maxWait time.Duration) (admit.Reservation, bool) {
	return m.reserve("", n, maxWait)
}
func (m mapSingleCompTB) CancelReservation(r admit.Reservation) bool { return m.cancel("", r) }

var (
	_ admit.Reserver         = mapSingleTB{}
	_ admit.CompositeLimiter = mapSingleComp{}
	_ admit.Reserver         = mapSingleCompTB{}
)

// mapVariant returns the map store's CompositeVariant; it refuses sliding
// logs if noLog.
func mapVariant(name string, broken, noLog bool) CompositeVariant {
	settings := func(l admit.Limits, single bool, opts []admit.Option) (plumb.Settings, error) {
		if err := l.Validate(); err != nil {
			return plumb.Settings{}, err
		}
		set, err := plumb.ResolveLimiter("conformance", opts)
		if err != nil {
			return set, err
		}
		if noLog {
			for _, r := range l.Rules() {
				if r.Algorithm == admit.SlidingLog {
					return set, fmt.Errorf("%w: %s has no sliding log", admit.ErrUnsupported, name)
				}
			}
		}
		if names := set.StoreOptions(); single && names != "" {
			return set, fmt.Errorf("%w: %s: a single-key limiter has no store", admit.ErrUnsupported, names)
		}
		return set, nil
	}
	return CompositeVariant{
		Name: name,
		NewLimits: func(l admit.Limits, opts ...admit.Option) (admit.KeyedLimiter, error) {
			set, err := settings(l, false, opts)
			if err != nil {
				return nil, err
			}
			m := newMapLimits(l, set, broken)
			switch {
			case l.Len() == 1 && m.k.Reservable():
				return mapRuleTB{mapRule{m}}, nil
			case l.Len() == 1:
				return mapRule{m}, nil
			case m.k.Reservable():
				return mapCompositTB{mapComposite{m}}, nil
			}
			return mapComposite{m}, nil
		},
		NewLimitsLimiter: func(l admit.Limits, opts ...admit.Option) (admit.Limiter, error) {
			set, err := settings(l, true, opts)
			if err != nil {
				return nil, err
			}
			m := newMapLimits(l, set, broken)
			switch {
			case l.Len() == 1 && m.k.Reservable():
				return mapSingleTB{mapSingle{m}}, nil
			case l.Len() == 1:
				return mapSingle{m}, nil
			case m.k.Reservable():
				return mapSingleCompTB{mapSingleComp{mapSingle{m}}}, nil
			}
			return mapSingleComp{mapSingle{m}}, nil
		},
		Supports: func(a admit.Algorithm) bool { return !noLog || a != admit.SlidingLog },
	}
}

func TestRunComposite(t *testing.T) {
	RunComposite(t, mapVariant("map", false, false))
}

func TestRunCompositeWithoutSlidingLog(t *testing.T) {
	RunComposite(t, mapVariant("map-no-log", false, true))
}

// recorder stands in for a *testing.T (rapid.TB and tester) and records a
// failure instead of failing the test: a check run against it on a broken
// variant must report one. As for a *testing.T, FailNow and Skip end the
// goroutine that calls them; run a check in its own with run.
type recorder struct {
	name string

	mu      sync.Mutex
	failed  bool
	skipped bool
	log     []string
}

func (r *recorder) run(check func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		check()
	}()
	<-done
}

func (r *recorder) Helper()      {}
func (r *recorder) Name() string { return r.name }
func (r *recorder) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, fmt.Sprintf(format, args...))
}
func (r *recorder) Log(args ...any)                   { r.Logf("%s", fmt.Sprint(args...)) }
func (r *recorder) Errorf(format string, args ...any) { r.Logf(format, args...); r.Fail() }
func (r *recorder) Error(args ...any)                 { r.Log(args...); r.Fail() }
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); r.FailNow() }
func (r *recorder) Fatal(args ...any)                 { r.Error(args...); r.FailNow() }
func (r *recorder) FailNow()                          { r.Fail(); runtime.Goexit() }
func (r *recorder) Skipf(format string, args ...any)  { r.Logf(format, args...); r.SkipNow() }
func (r *recorder) Skip(args ...any)                  { r.Log(args...); r.SkipNow() }
func (r *recorder) SkipNow() {
	r.mu.Lock()
	r.skipped = true
	r.mu.Unlock()
	runtime.Goexit()
}
func (r *recorder) Fail() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
}
func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

var _ rapid.TB = (*recorder)(nil)

// setFlag sets a command-line flag for the rest of the test.
func setFlag(t *testing.T, name, value string) {
	f := flag.Lookup(name)
	require.NotNil(t, f, "flag %s", name)
	old := f.Value.String()
	require.NoError(t, f.Value.Set(value))
	t.Cleanup(func() { _ = f.Value.Set(old) })
}

// TestRunCompositeCatchesBrokenVariant: on a store that charges each rule
// that admits even when another denies, the scripted all-or-nothing check
// and the differential check both report a failure, and the store passes
// the checks that do not depend on it (its one-rule limiters are correct).
func TestRunCompositeCatchesBrokenVariant(t *testing.T) {
	// rapid keeps a failing case under testdata for a rerun; this failure
	// is the expected one, and shrinking it need not take long.
	setFlag(t, "rapid.nofailfile", "true")
	setFlag(t, "rapid.shrinktime", "2s")
	broken := mapVariant("broken", true, false)
	for name, check := range map[string]func(r *recorder){
		"AllOrNothing": func(r *recorder) { testCompositeAllOrNothing(r, broken) },
		"Differential": func(r *recorder) { rapid.Check(r, compositeDifferential(broken)) },
	} {
		r := &recorder{name: t.Name() + "/" + name}
		r.run(func() { check(r) })
		assert.False(t, r.skipped, "%s skipped the broken variant", name)
		if assert.True(t, r.Failed(), "%s passed a store that charges each rule on its own", name) {
			t.Logf("%s on the broken store: %s", name, firstLine(r.log))
		}
	}
	r := &recorder{name: t.Name() + "/OneRule"}
	r.run(func() {
		for _, alg := range Algorithms {
			l, err := admit.NewLimits(admit.Rule{Algorithm: alg, Limit: 3, Window: time.Second})
			require.NoError(r, err)
			runCompositeOneRuleSteps(r, broken, l)
		}
	})
	assert.False(t, r.Failed(), "a Limits of one rule is all or nothing by itself: %v", r.log)
}

// runCompositeOneRuleSteps is the first steps of testCompositeOneRule, on a
// tester.
func runCompositeOneRuleSteps(t tester, v CompositeVariant, l admit.Limits) {
	fake := clock.NewFake()
	lim, err := v.NewLimits(l, admit.WithClock(fake))
	require.NoError(t, err)
	oracle := NewOracle(l.At(0))
	for _, n := range []int{1, 2, 1, 1} {
		assert.Equal(t, oracle.Allow("a", 0, n), lim.AllowN("a", n))
	}
}

// firstLine is the first line of the first message of log that says what
// failed.
func firstLine(log []string) string {
	for _, m := range log {
		if strings.Contains(m, "failed") || strings.Contains(m, "want") {
			return strings.SplitN(m, "\n", 2)[0]
		}
	}
	if len(log) > 0 {
		return strings.SplitN(log[0], "\n", 2)[0]
	}
	return ""
}
