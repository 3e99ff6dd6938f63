package atomic

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	satomic "sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/migrate"
)

// movable is a store of New or NewLimits as the migration tests use it.
type movable interface {
	admit.KeyedLimiter
	migrate.Store
	Len() int
	Sweep() int
}

// moveForm is limits in one of the stores' forms: text, and for a
// composite whether it takes the pair form where it can (else the
// snapshot).
type moveForm struct {
	text string
	pair bool
}

func (f moveForm) String() string {
	if f.pair {
		return f.text
	}
	return f.text + " (snapshot)"
}

// roundTripForms are the forms TestTakePutRoundTrip runs over: every cell
// of New (a token bucket whose word is its TAT, one in scaled units, one
// whose word has a horizon of 10.7 days, a fixed window, a packed sliding
// counter and one kept as a snapshot: 6 per 20ns do not pack) and of
// NewLimits (two packing rules in the pair form on amd64 and in the
// snapshot, a pair with a horizon, three rules).
var roundTripForms = []moveForm{
	{"token-bucket,4,1s", true},
	{"token-bucket,3,1s", true},
	{"token-bucket,9999,1s", true},
	{"fixed-window,5,2s", true},
	{"sliding-counter,6,3s", true},
	{"sliding-counter,6,20ns", true},
	{"token-bucket,10,1s + fixed-window,1000,1h", true},
	{"token-bucket,10,1s + fixed-window,1000,1h", false},
	{"token-bucket,9999,1s + token-bucket,5,4s", true},
	{"fixed-window,3,1s + sliding-counter,5,3s + token-bucket,4,2s", true},
}

// migLimits parses text, which must be valid.
func migLimits(t testing.TB, text string) admit.Limits {
	t.Helper()
	l, err := admit.ParseLimits(text)
	require.NoError(t, err)
	return l
}

// newMovable returns the store of f with opts: New's for one rule,
// NewLimits's (in f's form) for more.
func newMovable(t testing.TB, f moveForm, opts ...admit.Option) movable {
	t.Helper()
	limits := migLimits(t, f.text)
	var lim admit.KeyedLimiter
	var err error
	if limits.Len() == 1 {
		lim, err = New(limits.At(0), opts...)
	} else {
		lim, err = newLimits(limits, opts, f.pair)
	}
	require.NoError(t, err)
	m, ok := lim.(movable)
	require.True(t, ok, "%v: a %T is no migrate.Store", f, lim)
	require.Equal(t, limits, m.Limits())
	return m
}

// keyedOf returns the keyed store under m's wrapper, as the tests reach
// into it.
type keyedView interface {
	countIs(n int) bool
	ringLens() []int
	setPause(f func())
	heldRecords() int
}

func keyedOf(m movable) keyedView {
	switch l := m.(type) {
	case keyedTokenBucket:
		return l.keyed
	case keyedFixedWindow:
		return l.keyed
	case keyedSlidingCounter:
		return l.keyed
	case keyedSlidingCounterSnapshot:
		return l.keyed
	case keyedLimits[snapCell, *snapCell]:
		return l.st
	case keyedLimitsReserver[snapCell, *snapCell]:
		return l.st
	case keyedLimits[pairCell, *pairCell]:
		return l.st
	case keyedLimitsReserver[pairCell, *pairCell]:
		return l.st
	}
	panic(fmt.Sprintf("%T is no store of New or NewLimits", m))
}

// countIs reports whether the store counts exactly n keys against
// WithMaxKeys, probing its count with Reserve (which counts one more only
// below the bound it is given) and giving back what the probe counted. It
// must not race other calls of the store.
func (l *keyed[C, PC, K]) countIs(n int) bool {
	if l.keys.Reserve(int64(n)) { // fewer than n
		l.keys.Release(1)
		return false
	}
	if !l.keys.Reserve(int64(n) + 1) { // more than n
		return false
	}
	l.keys.Release(1)
	return true
}

// heldRecords returns how many records of held cells the store's kernel
// keeps, in every stripe.
func (l *keyed[C, PC, K]) heldRecords() int {
	n := 0
	switch k := any(l.k).(type) {
	case *tbKernel:
		for i := range k.holds.stripes {
			st := &k.holds.stripes[i]
			st.mu.Lock()
			n += len(st.m.M)
			st.mu.Unlock()
		}
	case *compKernel:
		for i := range k.holds.stripes {
			st := &k.holds.stripes[i]
			st.mu.Lock()
			n += len(st.m.M)
			st.mu.Unlock()
		}
	}
	return n
}

// TestTakePutRoundTrip runs generated calls on a few keys, with the clock
// moving forwards and backwards and jumping past a token bucket's packed
// horizon (±10.7 days for 9,999 per second, where its state spills and its
// cell is held), on two stores between which the keys move by Take and Put
// between calls, against a store whose keys never move: every decision and
// binding index must be the unmoved store's. Take reports whether the key
// was held and leaves it missing, Put refuses a key the store holds, and the
// keys stored and counted against WithMaxKeys are the keys held.
func TestTakePutRoundTrip(t *testing.T) {
	day := 24 * time.Hour
	for _, f := range roundTripForms {
		t.Run(f.String(), func(t *testing.T) {
			limits := migLimits(t, f.text)
			var window time.Duration
			for i := range limits.Len() {
				window = max(window, limits.At(i).Window)
			}
			moved := 0
			rapid.Check(t, func(rt *rapid.T) {
				fake := clock.NewFake()
				opts := []admit.Option{admit.WithClock(fake), admit.WithShards(rapid.SampledFrom([]int{1, 4}).Draw(rt, "shards")), admit.WithMaxKeys(1000)}
				stores := [2]movable{newMovable(t, f, opts...), newMovable(t, f, opts...)}
				want := newMovable(t, f, admit.WithClock(fake))
				where := map[string]int{} // the store that holds each key, or would insert it
				held := map[string]bool{}
				into := make([]kernel.PartState, limits.Len())
				for i := range rapid.IntRange(1, 60).Draw(rt, "ops") {
					key := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(rt, "key")
					switch op := rapid.IntRange(0, 10).Draw(rt, "op"); {
					case op == 0:
						fake.Advance(time.Duration(rapid.Int64Range(0, int64(window)).Draw(rt, "advance")))
					case op == 1:
						fake.Set(fake.Now() - time.Duration(rapid.Int64Range(0, int64(window/2)).Draw(rt, "back")))
					case op == 2:
						fake.Set(rapid.SampledFrom([]time.Duration{0, 10*day + 23*time.Hour, 11 * day, -11 * day}).Draw(rt, "jump"))
					case op <= 5:
						from, to := where[key], rapid.IntRange(0, 1).Draw(rt, "to")
						if got := stores[from].Take(key, into); got != held[key] {
							rt.Fatalf("op %d: Take(%q) = %v, want %v", i, key, got, held[key])
						}
						if stores[from].Take(key, into) {
							rt.Fatalf("op %d: Take(%q) again = true, want false", i, key)
						}
						if !held[key] {
							where[key] = to
							continue
						}
						if !stores[to].Put(key, into) {
							rt.Fatalf("op %d: Put(%q) into the store that does not hold it = false", i, key)
						}
						if stores[to].Put(key, make([]kernel.PartState, limits.Len())) {
							rt.Fatalf("op %d: Put(%q) into the store that holds it = true", i, key)
						}
						where[key] = to
						moved++
					default:
						n := rapid.IntRange(-1, limits.Limit()+1).Draw(rt, "n")
						expD, expW := conformance.AllowWhich(want, key, n)
						gotD, gotW := conformance.AllowWhich(stores[where[key]], key, n)
						if gotD != expD || gotW != expW {
							rt.Fatalf("op %d: AllowNWhich(t=%v, %q, %d) = %+v, %d; want %+v, %d", i, fake.Now(), key, n, gotD, gotW, expD, expW)
						}
						held[key] = held[key] || (expD.Allowed && n > 0)
					}
					count := 0
					for _, h := range held {
						if h {
							count++
						}
					}
					if got := stores[0].Len() + stores[1].Len(); got != count {
						rt.Fatalf("op %d: the stores hold %d keys, want %d", i, got, count)
					}
					for j, s := range stores {
						if !keyedOf(s).countIs(s.Len()) {
							rt.Fatalf("op %d: store %d holds %d keys and counts another number", i, j, s.Len())
						}
					}
				}
			})
			assert.Positive(t, moved, "no key was moved: the check proved nothing")
		})
	}
}

// TestPutPastHorizon: a token bucket's state past its word's horizon, put
// into a store alone or as part of a pair (on amd64; elsewhere the
// composite is a snapshot), is kept held, with a record, and decided as the
// kernel decides it; Take gives it back exactly and drops the record.
func TestPutPastHorizon(t *testing.T) {
	for _, f := range []moveForm{{"token-bucket,9999,1s", true}, {"token-bucket,9999,1s + fixed-window,1000,1h", true}} {
		limits := migLimits(t, f.text)
		fake := clock.NewFake()
		fake.Set(-11 * 24 * time.Hour)
		k := kernel.NewComposite(limits)
		s := make([]kernel.PartState, limits.Len())
		for range 3 {
			k.Decide(s, fake.Now(), 1)
		}
		lim := newMovable(t, f, admit.WithClock(fake))
		require.True(t, lim.Put("k", s), f)
		if limits.Len() == 1 || cas128OK { // else a snapshot, which holds every state
			assert.Equal(t, 1, keyedOf(lim).heldRecords(), "%v: the state is held, in a record", f)
		}
		for n := range 4 {
			got, _ := conformance.AllowWhich(lim, "k", n)
			want, _ := k.Allow(s, fake.Now(), n)
			assert.Equal(t, want, got, "%v: AllowN(k, %d)", f, n)
		}
		back := make([]kernel.PartState, limits.Len())
		require.True(t, lim.Take("k", back), f)
		assert.Equal(t, s, back, "%v: the state taken", f)
		assert.Zero(t, keyedOf(lim).heldRecords(), "%v: Take drops the record", f)
		assert.Zero(t, lim.Len(), f)
	}
}

// hammerForms are the forms TestMigrateHammer runs over: Limits of a few
// hundred, so that a move lands while the key still has budget (200 per
// 10µs: a sliding counter kept as a snapshot).
var hammerForms = []moveForm{
	{"token-bucket,200,1s", true},
	{"token-bucket,300,1s", true}, // 3,333,333.3ns per token: scaled units
	{"fixed-window,200,1s", true},
	{"sliding-counter,200,1s", true},
	{"sliding-counter,200,10us", true},
	{"token-bucket,200,1s + fixed-window,250,1h", true},
	{"token-bucket,200,1s + fixed-window,250,1h", false},
	{"fixed-window,300,1s + token-bucket,200,2s + sliding-counter,250,3s", true},
}

// hammerMove runs goroutines that admit one request at a time on one key
// while the key moves from one store of f to another (a migration), with
// the clock frozen, and returns the admissions of both stores together and
// the calls Redirect decided.
//
// Goroutine 0 calls the old store throughout, as a call holding the old
// snapshot does: after attempt moveAt it has the key moved and waits for
// the move, so that its later calls find the key missing, are refused by
// Keep and are redirected. (After a lazy move its first call goes to the
// new store, whose Adopt carries the key; only then do its calls on the old
// store find it missing.) With paused, the move runs inside the next call
// on the old store (the store's test pause), after that call has loaded the
// key's cell and its value and before it publishes: the call holds a cell
// that the move freezes (a lazy move makes a call on the new store there,
// whose Adopt takes the key). It makes limit+moveAt attempts, enough to
// spend the new store's budget alone. The other goroutines split 2×limit
// attempts, those of even index on the old store, those of odd index on the
// store the snapshot names.
func hammerMove(t *testing.T, f moveForm, lazy, paused bool, goroutines int, lose bool) (admitted, redirected int64) {
	const key, moveAt = "k", 20
	fake := clock.NewFake()
	from, to := newMovable(t, f, admit.WithClock(fake), admit.WithShards(4)), newMovable(t, f, admit.WithClock(fake), admit.WithShards(4))
	m := conformance.NewMigration(from, to)
	m.Lose = lose
	limit := from.Limits().Limit()
	var total satomic.Int64
	count := func(d admit.Decision) {
		if d.Allowed {
			total.Add(1)
		}
	}
	start, done := make(chan struct{}), make(chan struct{})
	move := func() {
		m.Move(lazy, key)
		if lazy && paused {
			count(to.Allow(key)) // Adopt takes the key under the paused call
		}
		close(done)
	}
	go func() {
		if _, ok := <-start; ok {
			return // paused: the move runs in a call
		}
		move()
	}()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			attempts := 2 * limit / (goroutines - 1)
			if g == 0 {
				attempts = limit + moveAt
			}
			for a := range attempts {
				var lim admit.KeyedLimiter = from
				if g%2 == 1 || (g == 0 && lazy && !paused && a == moveAt) {
					lim = m.Current()
				}
				count(lim.Allow(key))
				if g != 0 {
					continue
				}
				switch {
				case a == moveAt-1 && paused:
					keyedOf(from).setPause(move)
					start <- struct{}{}
				case a == moveAt-1:
					close(start)
					<-done
				case a == moveAt && paused:
					<-done // the call just made, or one of another goroutine, ran the move
				}
			}
		})
	}
	wg.Wait()
	assert.Zero(t, from.Len(), "the old store holds no key")
	assert.Equal(t, 1, to.Len(), "the new store holds the key")
	return total.Load(), m.Redirected()
}

// TestMigrateHammer: goroutines admit on one key while it moves from one
// store to another of the same limits, with the clock frozen (so nothing
// is ever given back), over every cell of New and NewLimits, moves eager
// (the Reload takes the key) and lazy (Adopt takes it), with the move made
// while a call holds the key's cell or not, and a sweep of GOMAXPROCS and
// goroutine counts: the admissions of both stores together are exactly
// the Limit (no admission lost or counted twice across Take), and calls on
// the old store after the move were redirected. A move that loses the
// state, putting the key fresh, is caught: the admissions then exceed the
// Limit.
func TestMigrateHammer(t *testing.T) {
	procs, counts, forms := []int{1, 4}, []int{3, 8}, hammerForms
	if testing.Short() {
		procs, counts, forms = []int{2}, []int{4}, hammerForms[4:7]
	}
	for _, f := range forms {
		for _, lazy := range []bool{false, true} {
			for _, paused := range []bool{false, true} {
				for _, p := range procs {
					for _, g := range counts {
						t.Run(fmt.Sprintf("limits=%v/lazy=%v/paused=%v/procs=%d/goroutines=%d", f, lazy, paused, p, g), func(t *testing.T) {
							defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(p))
							admitted, redirected := hammerMove(t, f, lazy, paused, g, false)
							assert.Equal(t, int64(migLimits(t, f.text).Limit()), admitted, "admissions of both stores together")
							assert.Positive(t, redirected, "goroutine 0's calls after the move")
						})
					}
				}
			}
		}
	}
	for _, lazy := range []bool{false, true} {
		for _, paused := range []bool{false, true} {
			t.Run(fmt.Sprintf("lost state/lazy=%v/paused=%v", lazy, paused), func(t *testing.T) {
				f := hammerForms[0]
				admitted, _ := hammerMove(t, f, lazy, paused, 4, true)
				assert.Greater(t, admitted, int64(migLimits(t, f.text).Limit()), "a move that puts the key fresh must over-admit")
			})
		}
	}
}

// TestTakeFreezes replays the race Take's freeze is for: a call loads a
// key's cell and its value, the key is taken (and put into another store)
// and the call then tries to publish on the cell it holds. It must publish
// nothing there: it finds the key missing, Keep refuses it and Redirect
// decides it, and the state taken is the one before the call.
func TestTakeFreezes(t *testing.T) {
	for _, f := range roundTripForms {
		limits := migLimits(t, f.text)
		fake := clock.NewFake()
		a, b := newMovable(t, f, admit.WithClock(fake)), newMovable(t, f, admit.WithClock(fake))
		require.True(t, a.Allow("k").Allowed)
		taken := make([]kernel.PartState, limits.Len())
		var moved satomic.Bool
		var redirects int
		a.SetHooks(&migrate.Hooks{
			Keep: func(string, migrate.Epoch) bool { return !moved.Load() },
			Redirect: func(key string, n int) (admit.Decision, int) {
				redirects++
				return conformance.AllowWhich(b, key, n)
			},
		})
		keyedOf(a).setPause(func() {
			moved.Store(true)
			require.True(t, a.Take("k", taken))
			require.True(t, b.Put("k", taken))
		})
		d, _ := conformance.AllowWhich(a, "k", 1)
		assert.Equal(t, 1, redirects, "%v: the paused call was redirected", f)
		assert.Equal(t, limits.Limit()-2, d.Remaining, "%v: decided in the store the key moved to, on the state taken", f)
		assert.Zero(t, a.Len(), f)
		want := make([]kernel.PartState, limits.Len())
		kernel.NewComposite(limits).Decide(want, fake.Now(), 1)
		assert.Equal(t, want, taken, "%v: the state taken holds the first admission only", f)
	}
}

// TestKeepRedirects: with a Keep that refuses every key, a call on a key the
// store does not hold (an admission, a probe, a request that can never
// pass, AllowNWhich's) is decided by Redirect with its key and n, returns
// Redirect's decision and index unchanged, and stores nothing. A call on a
// stored key asks no hook. A Keep that lets the key in, a Keep without a
// Redirect, and no hooks leave the store deciding as without hooks.
func TestKeepRedirects(t *testing.T) {
	for _, f := range roundTripForms {
		limits := migLimits(t, f.text)
		lim := newMovable(t, f, admit.WithClock(clock.NewFake()))
		require.True(t, lim.Allow("held").Allowed)
		redirect := admit.Decision{Limit: -1, RetryAfter: 7}
		which := limits.Len() - 1
		var keeps, redirects []string
		keep := true
		lim.SetHooks(&migrate.Hooks{
			Keep: func(key string, _ migrate.Epoch) bool {
				keeps = append(keeps, key)
				return keep
			},
			Redirect: func(key string, n int) (admit.Decision, int) {
				redirects = append(redirects, key+"/"+strconv.Itoa(n))
				return redirect, which
			},
		})
		model := kernel.NewComposite(limits)
		s := make([]kernel.PartState, limits.Len())
		model.Allow(s, 0, 1)
		wantD, wantW := model.Allow(s, 0, 1)
		d, w := conformance.AllowWhich(lim, "held", 1)
		assert.Equal(t, wantD, d, "%v: the stored key decides in the store", f)
		if limits.Len() > 1 {
			assert.Equal(t, wantW, w, f)
		}
		assert.Empty(t, keeps, "%v: a stored key asks no hook", f)

		keep = false
		for _, n := range []int{1, 0, -1, limits.Limit() + 1} {
			d, w := conformance.AllowWhich(lim, "moved", n)
			assert.Equal(t, redirect, d, "%v: AllowNWhich(moved, %d)", f, n)
			if limits.Len() > 1 {
				assert.Equal(t, which, w, "%v: AllowNWhich(moved, %d)'s index is Redirect's", f, n)
			}
		}
		assert.Equal(t, redirect, lim.Allow("moved"))
		assert.Equal(t, redirect, lim.AllowN("moved", 1))
		assert.Equal(t, []string{"moved/1", "moved/0", "moved/-1", "moved/" + strconv.Itoa(limits.Limit()+1), "moved/1", "moved/1"}, redirects, f)
		assert.Len(t, keeps, 6, f)
		assert.Equal(t, 1, lim.Len(), "%v: nothing stored", f)

		keep = true
		d, _ = conformance.AllowWhich(lim, "new", 1)
		assert.Equal(t, limits.Limit()-1, d.Remaining, "%v: a kept key is inserted as usual", f)
		assert.Equal(t, 2, lim.Len(), f)
		lim.SetHooks(&migrate.Hooks{Keep: func(string, migrate.Epoch) bool { return false }})
		d, _ = conformance.AllowWhich(lim, "other", 1)
		assert.Equal(t, limits.Limit()-1, d.Remaining, "%v: a Keep without a Redirect keeps the key", f)
		lim.SetHooks(nil)
		d, _ = conformance.AllowWhich(lim, "last", 1)
		assert.Equal(t, limits.Limit()-1, d.Remaining, "%v: no hooks", f)
		assert.Len(t, redirects, 6, f)
	}
}

// TestKeepRedirectsReservations: a reservation on a key Keep refuses is
// Redirect's decision: an admission is a reservation due now that cannot
// be cancelled, and a denial a refusal, taking nothing, whose Delay is the
// denial's RetryAfter (Never for a request that can never pass), so that
// WaitKey sleeps that long and asks again. Nothing is stored.
func TestKeepRedirectsReservations(t *testing.T) {
	for _, f := range []moveForm{{"token-bucket,4,1s", true}, {"token-bucket,3,1s + token-bucket,5,4s", true}, {"token-bucket,3,1s + token-bucket,5,4s", false}} {
		lim := newMovable(t, f, admit.WithClock(clock.NewFake()))
		res := lim.(keyedReserver)
		redirect := admit.Decision{Allowed: true, Limit: 3, Remaining: 1}
		var redirects int
		lim.SetHooks(&migrate.Hooks{
			Keep: func(string, migrate.Epoch) bool { return false },
			Redirect: func(key string, n int) (admit.Decision, int) {
				redirects++
				assert.Equal(t, "moved", key)
				assert.Equal(t, 2, n)
				return redirect, 0
			},
		})
		r, ok := res.ReserveN("moved", 2, time.Hour)
		assert.True(t, ok, f)
		assert.Zero(t, r.Delay, f)
		assert.Equal(t, 2, r.N(), f)
		assert.False(t, res.CancelReservation("moved", r), "%v: nothing to cancel", f)
		redirect = admit.Decision{Limit: 3, RetryAfter: 3 * time.Second}
		r, ok = res.ReserveN("moved", 2, time.Hour)
		assert.False(t, ok, f)
		assert.Equal(t, 3*time.Second, r.Delay, "%v: the denial's RetryAfter", f)
		redirect = admit.Decision{Limit: 3, RetryAfter: admit.Never}
		r, ok = res.ReserveN("moved", 2, time.Hour)
		assert.False(t, ok, f)
		assert.Equal(t, admit.Never, r.Delay, f)
		assert.Equal(t, 3, redirects, f)
		assert.Zero(t, lim.Len(), "%v: nothing stored", f)
	}
}

// TestKeepOrderedWithTake: Keep runs under the lock of the key's bucket,
// with the insertion it lets in, so that a Take of the same key that starts
// while Keep runs waits for the insertion and then finds the key: Keep's
// answer and the insertion cannot be split by a Take. Keep starts a Take on
// another goroutine and yields to it a bounded number of times: were Keep
// asked outside the lock, the Take would run to its end then and report the
// key missing. The call's admission is then either in the state taken or
// (the Take froze the new cell before the call published, and the call
// inserted the key again) in the store.
func TestKeepOrderedWithTake(t *testing.T) {
	for _, f := range []moveForm{{"token-bucket,4,1s", true}, {"fixed-window,5,2s", true}, {"token-bucket,10,1s + fixed-window,1000,1h", true}, {"fixed-window,3,1s + sliding-counter,5,3s + token-bucket,4,2s", true}} {
		limits := migLimits(t, f.text)
		fake := clock.NewFake()
		lim := newMovable(t, f, admit.WithClock(fake))
		into := make([]kernel.PartState, limits.Len())
		took := make(chan bool, 1)
		first := true
		lim.SetHooks(&migrate.Hooks{
			Keep: func(key string, _ migrate.Epoch) bool {
				if !first {
					return true
				}
				first = false
				go func() { took <- lim.Take(key, into) }()
				for range 200 {
					runtime.Gosched()
					select {
					case ok := <-took:
						t.Errorf("%v: a Take ran to its end (%v) while Keep held the key", f, ok)
						took <- ok
						return true
					default:
					}
				}
				return true
			},
			Redirect: func(string, int) (admit.Decision, int) { panic("kept") },
		})
		d, _ := conformance.AllowWhich(lim, "k", 1)
		require.True(t, d.Allowed, f)
		assert.True(t, <-took, "%v: the Take that waited for the insertion takes the key", f)
		moved := newMovable(t, f, admit.WithClock(fake))
		require.True(t, moved.Put("k", into))
		inTaken, _ := conformance.AllowWhich(moved, "k", 0)
		if lim.Len() == 0 {
			assert.Equal(t, limits.Limit()-1, inTaken.Remaining, "%v: the admission is in the state taken", f)
			continue
		}
		inStore, _ := conformance.AllowWhich(lim, "k", 0)
		assert.Equal(t, limits.Limit(), inTaken.Remaining, "%v: the state taken is fresh", f)
		assert.Equal(t, limits.Limit()-1, inStore.Remaining, "%v: the admission is in the store", f)
	}
}

// TestAdopt: a call on a key the store does not hold calls Adopt before
// taking any lock of the store's (Adopt puts the key into the store, which
// a lock of the key's bucket would deadlock), and decides on the state
// Adopt put there (a key spent in another store), without asking Keep;
// once the key is stored, its calls ask no hook. An Adopt that puts nothing
// leaves the call to Keep and the insertion. Reservations adopt as calls
// do.
func TestAdopt(t *testing.T) {
	for _, f := range roundTripForms {
		limits := migLimits(t, f.text)
		fake := clock.NewFake()
		lim, other := newMovable(t, f, admit.WithClock(fake)), newMovable(t, f, admit.WithClock(fake))
		require.True(t, other.AllowN("k", limits.Limit()).Allowed)
		spent := make([]kernel.PartState, limits.Len())
		var adopted []string
		keeps := 0
		lim.SetHooks(&migrate.Hooks{
			Adopt: func(key string) migrate.Epoch {
				adopted = append(adopted, key)
				if other.Take(key, spent) {
					require.True(t, lim.Put(key, spent))
				}
				return 7
			},
			Keep: func(_ string, adopted migrate.Epoch) bool {
				assert.Equal(t, migrate.Epoch(7), adopted, "%v: Keep is asked with the call's Adopt's Epoch", f)
				keeps++
				return true
			},
			Redirect: func(string, int) (admit.Decision, int) { panic("kept") },
		})
		d, _ := conformance.AllowWhich(lim, "k", 1)
		assert.False(t, d.Allowed, "%v: the adopted key is spent", f)
		assert.Equal(t, []string{"k"}, adopted)
		assert.Zero(t, keeps, "%v: a key Adopt put asks no Keep", f)
		conformance.AllowWhich(lim, "k", 1)
		assert.Len(t, adopted, 1, "%v: a stored key asks no hook", f)

		d, _ = conformance.AllowWhich(lim, "new", 1)
		assert.True(t, d.Allowed, "%v: nothing to adopt: a new key", f)
		assert.Equal(t, []string{"k", "new"}, adopted)
		assert.Equal(t, 1, keeps)
		assert.Equal(t, 2, lim.Len())

		if res, ok := lim.(keyedReserver); ok {
			require.True(t, other.AllowN("r", limits.Limit()).Allowed)
			r, ok := res.ReserveN("r", 1, 0)
			assert.False(t, ok, "%v: the adopted key is spent", f)
			assert.Positive(t, r.Delay)
			assert.Equal(t, []string{"k", "new", "r"}, adopted)
			assert.Equal(t, 1, keeps)
		}
	}
}

// TestKeys: Keys yields every key the store holds, once each, for one rule
// and composites; it stops when yield returns false; yield may Take the key
// it is given; a tombstone still in the map (a cell frozen and not yet
// unlinked) is no key: Keys skips it, Take reports it missing and Put
// stores over it.
func TestKeys(t *testing.T) {
	const n = 500
	for _, f := range []moveForm{{"token-bucket,4,1s", true}, {"sliding-counter,6,20ns", true}, {"token-bucket,10,1s + fixed-window,1000,1h", true}, {"token-bucket,10,1s + fixed-window,1000,1h", false}} {
		limits := migLimits(t, f.text)
		lim := newMovable(t, f, admit.WithClock(clock.NewFake()), admit.WithShards(16), admit.WithMaxKeys(2*n))
		var want []string
		for i := range n {
			k := "user-" + strconv.Itoa(i)
			want = append(want, k)
			require.True(t, lim.Allow(k).Allowed)
		}
		var got []string
		require.True(t, lim.Keys(func(k string) bool { got = append(got, k); return true }))
		assert.ElementsMatch(t, want, got, f)

		got = got[:0]
		require.True(t, lim.Keys(func(k string) bool { got = append(got, k); return len(got) < 10 }))
		assert.Len(t, got, 10, "%v: stopped by yield", f)

		into := make([]kernel.PartState, limits.Len())
		require.True(t, buryInPlace(lim, "user-0"), f)
		got = got[:0]
		require.True(t, lim.Keys(func(k string) bool { got = append(got, k); return true }))
		assert.ElementsMatch(t, want[1:], got, "%v: the tombstone is no key", f)
		assert.False(t, lim.Take("user-0", into), "%v: Take of a tombstone", f)
		assert.Equal(t, n-1, lim.Len(), "%v: Take removed the tombstone", f)
		require.True(t, buryInPlace(lim, "user-1"), f)
		assert.True(t, lim.Put("user-1", into), "%v: Put over a tombstone", f)
		assert.Equal(t, n-1, lim.Len(), f)
		assert.True(t, keyedOf(lim).countIs(n-1), "%v: the keys counted are the keys held", f)

		taken := 0
		require.True(t, lim.Keys(func(k string) bool {
			if lim.Take(k, into) {
				taken++
			}
			return true
		}))
		assert.Equal(t, n-1, taken, f)
		assert.Zero(t, lim.Len(), f)
		assert.True(t, keyedOf(lim).countIs(0), f)
	}
}

// buryInPlace freezes key's cell in lim as Take does, leaving it in the map
// (as a Take or an eviction between its freeze and its unlink would), and
// reports whether lim held the key.
func buryInPlace(lim movable, key string) bool {
	var into [admit.MaxLimits]kernel.PartState
	switch l := lim.(type) {
	case keyedTokenBucket:
		c, ok := l.m.Load(key)
		return ok && c.take(l.k, into[:])
	case keyedSlidingCounterSnapshot:
		c, ok := l.m.Load(key)
		return ok && c.take(l.k, into[:])
	case keyedLimitsReserver[pairCell, *pairCell]:
		c, ok := l.st.m.Load(key)
		return ok && c.take(l.st.k, into[:])
	case keyedLimits[pairCell, *pairCell]:
		c, ok := l.st.m.Load(key)
		return ok && c.take(l.st.k, into[:])
	case keyedLimits[snapCell, *snapCell]:
		c, ok := l.st.m.Load(key)
		return ok && c.take(l.st.k, into[:])
	}
	panic(fmt.Sprintf("buryInPlace: %T", lim))
}

// TestTakeDropsHold: a reservation made before Take cannot be cancelled
// after it, in the store it was made in (even once the key is put back) or
// in the one the key moved to, and its record is gone; its tokens stay
// taken in the state carried.
func TestTakeDropsHold(t *testing.T) {
	for _, f := range []moveForm{{"token-bucket,4,1s", true}, {"token-bucket,3,1s", true}, {"token-bucket,3,1s + token-bucket,5,4s", true}, {"token-bucket,3,1s + token-bucket,5,4s", false}} {
		limits := migLimits(t, f.text)
		fake := clock.NewFake()
		a, b := newMovable(t, f, admit.WithClock(fake)), newMovable(t, f, admit.WithClock(fake))
		res := a.(keyedReserver)
		require.True(t, a.AllowN("k", limits.Limit()).Allowed)
		r, ok := res.ReserveN("k", 1, time.Hour)
		require.True(t, ok)
		require.Positive(t, r.Delay, "%v: a reservation that waits", f)
		require.Equal(t, 1, keyedOf(a).heldRecords(), "%v: the reservation holds the cell", f)
		into := make([]kernel.PartState, limits.Len())
		require.True(t, a.Take("k", into))
		assert.Zero(t, keyedOf(a).heldRecords(), "%v: Take deletes the hold's record", f)
		assert.False(t, res.CancelReservation("k", r), "%v: the hold went with Take", f)
		require.True(t, b.Put("k", into))
		assert.False(t, b.(keyedReserver).CancelReservation("k", r), "%v: not in the store the key moved to", f)
		d, _ := conformance.AllowWhich(b, "k", 1)
		assert.False(t, d.Allowed, "%v: the reservation's tokens are still taken", f)
		assert.Greater(t, d.RetryAfter, r.Delay, "%v: the next token is due after the reservation's", f)
		require.True(t, b.Take("k", into))
		require.True(t, a.Put("k", into))
		assert.False(t, res.CancelReservation("k", r), "%v: not after the key came back", f)
	}
}

// TestPutBeyondMaxKeys: Take uncounts its key, so the store has room for a
// new one; Put stores a key in a full store rather than drop its state,
// counting it beyond the bound, and new keys are then denied until
// evictions bring the count back under it.
func TestPutBeyondMaxKeys(t *testing.T) {
	f := moveForm{"fixed-window,1,1h", true}
	fake := clock.NewFake()
	opts := []admit.Option{admit.WithClock(fake), admit.WithShards(1), admit.WithMaxKeys(1)}
	a, b := newMovable(t, f, opts...), newMovable(t, f, opts...)
	require.True(t, a.Allow("a").Allowed)
	require.True(t, b.Allow("b").Allowed)
	assert.False(t, a.Allow("c").Allowed, "a full store")
	into := make([]kernel.PartState, 1)
	require.True(t, a.Take("a", into))
	assert.True(t, a.Allow("c").Allowed, "Take made room")
	require.True(t, b.Put("a", into))
	assert.Equal(t, 2, b.Len(), "stored beyond the bound")
	assert.True(t, keyedOf(b).countIs(2))
	assert.False(t, b.Allow("a").Allowed, "the carried state: a spent window")
	assert.False(t, b.Allow("d").Allowed, "over the bound: no new key")
	fake.Set(2 * time.Hour) // a and b are fresh
	assert.True(t, b.Allow("d").Allowed, "room made by evicting fresh keys")
	assert.True(t, keyedOf(b).countIs(b.Len()))
}

// TestTakenCellsLeaveRings: a cell Take froze stays in its ring (Take does
// not search the ring for it) until a sweep meets it, which drops it
// without counting it as evicted, so that rings do not keep the cells of
// keys that moved away.
func TestTakenCellsLeaveRings(t *testing.T) {
	for _, f := range []moveForm{{"token-bucket,4,1s", true}, {"token-bucket,10,1s + fixed-window,1000,1h", true}} {
		limits := migLimits(t, f.text)
		lim := newMovable(t, f, admit.WithClock(clock.NewFake()), admit.WithShards(4))
		for i := range 100 {
			require.True(t, lim.Allow("user-"+strconv.Itoa(i)).Allowed)
		}
		into := make([]kernel.PartState, limits.Len())
		for i := range 100 {
			require.True(t, lim.Take("user-"+strconv.Itoa(i), into))
		}
		total := func() (n int) {
			for _, l := range keyedOf(lim).ringLens() {
				n += l
			}
			return n
		}
		assert.Equal(t, 100, total(), "%v: the frozen cells await a sweep", f)
		assert.Zero(t, lim.Sweep(), "%v: a taken cell is no eviction", f)
		assert.Zero(t, total(), "%v: the sweep dropped them", f)
	}
}
