package mapstore

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
	"github.com/admit-go/admit/internal/plumb"
)

// migrateTexts are the limits the migration tests run over: one rule of
// every algorithm (a token bucket whose states pack into a word, 4 per
// second, and one whose do not, 3 per second) and composites of every
// algorithm.
var migrateTexts = []string{
	"token-bucket,4,1s",
	"token-bucket,3,1s",
	"fixed-window,5,2s",
	"sliding-log,4,2s",
	"sliding-counter,6,3s",
	"token-bucket,10,1s + fixed-window,1000,1h",
	"token-bucket,3,1s + token-bucket,5,4s",
	"fixed-window,3,1s + sliding-log,4,2s + sliding-counter,5,3s",
}

// movable is a store of New or NewLimits as the migration tests use it.
type movable interface {
	admit.CompositeStore
	keyed.Mover
}

// buckets reports whether every rule of limits is a token bucket: a store
// that reserves ahead.
func buckets(limits admit.Limits) bool {
	for _, r := range limits.Rules() {
		if r.Algorithm != admit.TokenBucket {
			return false
		}
	}
	return true
}

// newMovable returns the store of limits with the settings set: New's for
// one rule, NewLimits's for more.
func newMovable(t testing.TB, limits admit.Limits, set plumb.Settings) movable {
	t.Helper()
	var lim admit.CompositeStore
	if limits.Len() == 1 {
		lim = New(limits.At(0), set)
	} else {
		lim = NewLimits(limits, set)
	}
	m, ok := lim.(movable)
	require.True(t, ok, "%v: a %T is no keyed.Mover", limits, lim)
	require.Equal(t, limits, m.Limits())
	return m
}

// TestTakePutRoundTrip runs generated calls on a few keys, with the clock
// moving forwards and backwards, on a store whose keys are taken and put
// back, into it or into a second store of the same limits, between calls,
// against a store whose keys never move: every decision and binding index
// must be the unmoved store's. Take reports whether the key was held, Put
// refuses a key the store holds (and leaves it as it was), and the keys
// counted are the keys held.
func TestTakePutRoundTrip(t *testing.T) {
	var moved int
	rapid.Check(t, func(rt *rapid.T) {
		limits := mustLimits(t, rapid.SampledFrom(migrateTexts).Draw(rt, "limits"))
		window := longest(limits)
		fake := clock.NewFake()
		set := plumb.Settings{Clock: fake, Shards: rapid.SampledFrom([]int{1, 4}).Draw(rt, "shards"), HashedKeys: rapid.Bool().Draw(rt, "hashed"), MaxKeys: 1000}
		stores := [2]movable{newMovable(t, limits, set), newMovable(t, limits, set)}
		want := newMovable(t, limits, plumb.Settings{Clock: fake})
		where := map[string]int{} // the store that holds each key, or would insert it
		held := map[string]bool{}
		into := make([]kernel.PartState, limits.Len())
		for i := range rapid.IntRange(1, 60).Draw(rt, "ops") {
			key := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(rt, "key")
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
			case op == 0:
				fake.Advance(time.Duration(rapid.Int64Range(0, int64(window)).Draw(rt, "advance")))
			case op == 1:
				fake.Set(fake.Now() - time.Duration(rapid.Int64Range(0, int64(window/2)).Draw(rt, "back")))
			case op <= 4:
				from, to := where[key], rapid.IntRange(0, 1).Draw(rt, "to")
				if got := stores[from].Take(key, into); got != held[key] {
					rt.Fatalf("%v op %d: Take(%q) = %v, want %v", limits, i, key, got, held[key])
				}
				if got := stores[from].Take(key, into); got {
					rt.Fatalf("%v op %d: Take(%q) again = true, want false", limits, i, key)
				}
				if !held[key] {
					where[key] = to
					continue
				}
				if !stores[to].Put(key, into) {
					rt.Fatalf("%v op %d: Put(%q) into the store that does not hold it = false", limits, i, key)
				}
				if stores[to].Put(key, make([]kernel.PartState, limits.Len())) {
					rt.Fatalf("%v op %d: Put(%q) into the store that holds it = true", limits, i, key)
				}
				where[key] = to
				moved++
			default:
				n := rapid.IntRange(-1, limits.Limit()+1).Draw(rt, "n")
				expD, expW := conformance.AllowWhich(want, key, n)
				gotD, gotW := conformance.AllowWhich(stores[where[key]], key, n)
				if gotD != expD || gotW != expW {
					rt.Fatalf("%v op %d: AllowNWhich(t=%v, %q, %d) = %+v, %d; want %+v, %d", limits, i, fake.Now(), key, n, gotD, gotW, expD, expW)
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
				rt.Fatalf("%v op %d: the stores hold %d keys, want %d", limits, i, got, count)
			}
			for j, s := range stores {
				if !s.(interface{ countIs(int) bool }).countIs(s.Len()) {
					rt.Fatalf("%v op %d: store %d holds %d keys and counts another number", limits, i, j, s.Len())
				}
			}
		}
	})
	assert.Positive(t, moved, "no key was moved: the check proved nothing")
}

// countIs reports whether the store counts exactly n keys against
// WithMaxKeys, probing its count with Reserve (which counts one more only
// below the bound it is given) and giving back what the probe counted. It
// must not race other calls of the store.
func (l *store[KT, S]) countIs(n int) bool {
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

// hammerTexts are the limits TestMigrateHammer runs over: Limits of a few
// hundred, so that a move lands while the key still has budget.
var hammerTexts = []string{
	"token-bucket,200,1s",
	"token-bucket,300,1s", // 3,333,333.3ns per token: unpacked states
	"fixed-window,200,1s",
	"sliding-log,200,1s",
	"sliding-counter,200,1s",
	"token-bucket,200,1s + fixed-window,250,1h",
	"fixed-window,300,1s + sliding-log,200,2s + sliding-counter,250,3s",
}

// hammerMove runs goroutines that admit one request at a time on one key
// while the key moves from one store of limits to another (a migration),
// with the clock frozen, and returns the admissions of both stores
// together and the calls Redirect decided. Goroutine 0 calls the old store
// throughout, as a call holding the old snapshot does: after attempt
// moveAt it has the key moved and waits for the move, so that its later
// calls find the key missing, are refused by Keep and are redirected.
// (After a lazy move its first call goes to the new store, whose Adopt
// carries the key; only then do its calls on the old store find it
// missing.) It makes limit+moveAt attempts, enough to spend the new
// store's budget alone. The other goroutines split 2×limit attempts, those
// of even index on the old store, those of odd index on the store the
// snapshot names.
func hammerMove(t *testing.T, limits admit.Limits, hashed, lazy bool, goroutines int, lose bool) (admitted, redirected int64) {
	const key, moveAt = "k", 20
	set := plumb.Settings{Clock: clock.NewFake(), Shards: 4, HashedKeys: hashed}
	from, to := newMovable(t, limits, set), newMovable(t, limits, set)
	m := conformance.NewMigration(from, to)
	m.Lose = lose
	limit := limits.Limit()
	var total atomic.Int64
	start, done := make(chan struct{}), make(chan struct{})
	go func() {
		<-start
		m.Move(lazy, key)
		close(done)
	}()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			attempts := 2 * limit / (goroutines - 1)
			if g == 0 {
				attempts = limit + moveAt
			}
			for a := range attempts {
				var lim admit.KeyedLimiter = from
				if g%2 == 1 || (g == 0 && lazy && a == moveAt) {
					lim = m.Current()
				}
				if lim.Allow(key).Allowed {
					total.Add(1)
				}
				if g == 0 && a == moveAt-1 {
					close(start)
					<-done
				}
			}
		}()
	}
	wg.Wait()
	assert.Zero(t, from.Len(), "the old store holds no key")
	assert.Equal(t, 1, to.Len(), "the new store holds the key")
	return total.Load(), m.Redirected()
}

// TestMigrateHammer: goroutines admit on one key while it moves from one
// store to another of the same limits, with the clock frozen (so nothing
// is ever given back), over every algorithm and composites, full and
// hashed keys, moves eager (the Reload carries the key) and lazy (Adopt
// carries it), a sweep of GOMAXPROCS and goroutine counts: the admissions
// of both stores together are exactly the Limit (no admission lost or
// counted twice across Take), and calls on the old store after the move
// were redirected. A move that loses the state is caught: the admissions
// then exceed the Limit.
func TestMigrateHammer(t *testing.T) {
	procs, counts, texts := []int{1, 4}, []int{3, 8}, hammerTexts
	if testing.Short() {
		procs, counts, texts = []int{2}, []int{4}, hammerTexts[3:6]
	}
	for _, text := range texts {
		limits := mustLimits(t, text)
		for _, hashed := range []bool{false, true} {
			for _, lazy := range []bool{false, true} {
				for _, p := range procs {
					for _, g := range counts {
						t.Run(fmt.Sprintf("limits=%s/hashed=%v/lazy=%v/procs=%d/goroutines=%d", text, hashed, lazy, p, g), func(t *testing.T) {
							defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(p))
							admitted, redirected := hammerMove(t, limits, hashed, lazy, g, false)
							assert.Equal(t, int64(limits.Limit()), admitted, "admissions of both stores together")
							assert.Positive(t, redirected, "goroutine 0's calls after the move")
						})
					}
				}
			}
		}
	}
	for _, lazy := range []bool{false, true} {
		t.Run(fmt.Sprintf("lost state/lazy=%v", lazy), func(t *testing.T) {
			limits := mustLimits(t, hammerTexts[0])
			admitted, _ := hammerMove(t, limits, false, lazy, 4, true)
			assert.Greater(t, admitted, int64(limits.Limit()), "a move that puts the key fresh must over-admit")
		})
	}
}

// unlocked reports whether no shard's lock is held, trying each.
func (l *store[KT, S]) unlocked() bool {
	for i := range l.shards {
		if !l.shards[i].mu.TryLock() {
			return false
		}
		l.shards[i].mu.Unlock()
	}
	return true
}

// TestKeepRedirects: with a Keep that refuses every key, a call on a key the
// store does not hold (an admission, a probe, a request that can never
// pass, AllowNWhich's) is decided by Redirect with its key and n, returns
// Redirect's decision and index, and stores nothing; Keep runs under the
// shard's lock, and Redirect after it is released. A call on a stored key
// asks no hook. A Keep that lets the key in, and a Keep without a
// Redirect, leave the store deciding as without hooks.
func TestKeepRedirects(t *testing.T) {
	for _, text := range migrateTexts {
		for _, hashed := range []bool{false, true} {
			limits := mustLimits(t, text)
			lim := newMovable(t, limits, plumb.Settings{Clock: clock.NewFake(), Shards: 1, HashedKeys: hashed})
			require.True(t, lim.Allow("held").Allowed)
			free := lim.(interface{ unlocked() bool })
			redirect := admit.Decision{Allowed: true, Limit: 77, Remaining: 5}
			which := limits.Len() - 1
			var keeps, redirects []string
			keep := true
			lim.SetHooks(&keyed.Hooks{
				Keep: func(key string, _ keyed.Epoch) bool {
					assert.False(t, free.unlocked(), "%s: Keep runs under the shard's lock", text)
					keeps = append(keeps, key)
					return keep
				},
				Redirect: func(key string, n int) (admit.Decision, int) {
					assert.True(t, free.unlocked(), "%s: Redirect runs with no lock held", text)
					redirects = append(redirects, key+"/"+strconv.Itoa(n))
					return redirect, which
				},
			})
			d, w := conformance.AllowWhich(lim, "held", 1)
			assert.Equal(t, limits.Limit()-2, d.Remaining, "%s: the stored key decides in the store", text)
			assert.Zero(t, w)
			assert.Empty(t, keeps, "%s: a stored key asks no hook", text)

			keep = false
			for _, n := range []int{1, 0, -1, limits.Limit() + 1} {
				d, w := conformance.AllowWhich(lim, "moved", n)
				assert.Equal(t, redirect, d, "%s: AllowNWhich(moved, %d)", text, n)
				if limits.Len() > 1 {
					assert.Equal(t, which, w, "%s: AllowNWhich(moved, %d)'s index is Redirect's", text, n)
				}
			}
			assert.Equal(t, redirect, lim.Allow("moved"))
			assert.Equal(t, []string{"moved/1", "moved/0", "moved/-1", "moved/" + strconv.Itoa(limits.Limit()+1), "moved/1"}, redirects, text)
			assert.Len(t, keeps, 5, text)
			assert.Equal(t, 1, lim.Len(), "%s: nothing stored", text)

			keep = true
			d, _ = conformance.AllowWhich(lim, "new", 1)
			assert.Equal(t, limits.Limit()-1, d.Remaining, "%s: a kept key is inserted as usual", text)
			assert.Equal(t, 2, lim.Len(), text)
			lim.SetHooks(&keyed.Hooks{Keep: func(string, keyed.Epoch) bool { return false }})
			d, _ = conformance.AllowWhich(lim, "other", 1)
			assert.Equal(t, limits.Limit()-1, d.Remaining, "%s: a Keep without a Redirect keeps the key", text)
			lim.SetHooks(nil)
			d, _ = conformance.AllowWhich(lim, "last", 1)
			assert.Equal(t, limits.Limit()-1, d.Remaining, "%s: no hooks", text)
			assert.Len(t, redirects, 5, text)
		}
	}
}

// TestKeepRedirectsReservations: a reservation on a key Keep refuses is
// Redirect's decision: an admission is a reservation due now that cannot
// be cancelled, and a denial a refusal, taking nothing, whose Delay is the
// denial's RetryAfter (Never for a request that can never pass), so that
// WaitKey sleeps that long and asks again. Nothing is stored.
func TestKeepRedirectsReservations(t *testing.T) {
	for _, text := range []string{"token-bucket,4,1s", "token-bucket,3,1s", "token-bucket,3,1s + token-bucket,5,4s"} {
		limits := mustLimits(t, text)
		lim := newMovable(t, limits, plumb.Settings{Clock: clock.NewFake()})
		res := lim
		redirect := admit.Decision{Allowed: true, Limit: 3, Remaining: 1}
		var redirects int
		lim.SetHooks(&keyed.Hooks{
			Keep: func(string, keyed.Epoch) bool { return false },
			Redirect: func(key string, n int) (admit.Decision, int) {
				redirects++
				assert.Equal(t, "moved", key)
				assert.Equal(t, 2, n)
				return redirect, 0
			},
		})
		r, ok := res.ReserveN("moved", 2, time.Hour)
		assert.True(t, ok, text)
		assert.Zero(t, r.Delay, text)
		assert.Equal(t, 2, r.N(), text)
		assert.False(t, res.CancelReservation("moved", r), "%s: nothing to cancel", text)
		redirect = admit.Decision{Limit: 3, RetryAfter: 3 * time.Second}
		r, ok = res.ReserveN("moved", 2, time.Hour)
		assert.False(t, ok, text)
		assert.Equal(t, 3*time.Second, r.Delay, "%s: the denial's RetryAfter", text)
		redirect = admit.Decision{Limit: 3, RetryAfter: admit.Never}
		r, ok = res.ReserveN("moved", 2, time.Hour)
		assert.False(t, ok, text)
		assert.Equal(t, admit.Never, r.Delay, text)
		assert.Equal(t, 3, redirects, text)
		assert.Zero(t, lim.Len(), "%s: nothing stored", text)
	}
}

// TestAdopt: a call on a key the store does not hold calls Adopt before
// taking any lock of the store's, and decides on the state Adopt put there
// (a key spent in another store), without asking Keep; once the key is
// stored, its calls ask no hook. An Adopt that puts nothing leaves the call
// to Keep and the insertion. Reservations adopt as calls do.
func TestAdopt(t *testing.T) {
	for _, text := range migrateTexts {
		for _, hashed := range []bool{false, true} {
			limits := mustLimits(t, text)
			fake := clock.NewFake()
			set := plumb.Settings{Clock: fake, Shards: 1, HashedKeys: hashed}
			lim, other := newMovable(t, limits, set), newMovable(t, limits, set)
			free := lim.(interface{ unlocked() bool })
			require.True(t, other.AllowN("k", limits.Limit()).Allowed)
			spent := make([]kernel.PartState, limits.Len())
			var adopted []string
			keeps := 0
			lim.SetHooks(&keyed.Hooks{
				Adopt: func(key string) keyed.Epoch {
					assert.True(t, free.unlocked(), "%s: Adopt runs before the store takes a lock", text)
					adopted = append(adopted, key)
					if other.Take(key, spent) {
						require.True(t, lim.Put(key, spent))
					}
					return 7
				},
				Keep: func(_ string, adopted keyed.Epoch) bool {
					assert.Equal(t, keyed.Epoch(7), adopted, "%v: Keep is asked with the call's Adopt's Epoch", text)
					keeps++
					return true
				},
				Redirect: func(string, int) (admit.Decision, int) { panic("kept") },
			})
			d, _ := conformance.AllowWhich(lim, "k", 1)
			assert.False(t, d.Allowed, "%s, hashed %v: the adopted key is spent", text, hashed)
			assert.Equal(t, []string{"k"}, adopted)
			assert.Zero(t, keeps, "%s: a key Adopt put asks no Keep", text)
			conformance.AllowWhich(lim, "k", 1)
			assert.Len(t, adopted, 1, "%s: a stored key asks no hook", text)

			d, _ = conformance.AllowWhich(lim, "new", 1)
			assert.True(t, d.Allowed, "%s: nothing to adopt: a new key", text)
			assert.Equal(t, []string{"k", "new"}, adopted)
			assert.Equal(t, 1, keeps)
			assert.Equal(t, 2, lim.Len())

			if res := lim; buckets(limits) {
				require.True(t, other.AllowN("r", limits.Limit()).Allowed)
				r, ok := res.ReserveN("r", 1, 0)
				assert.False(t, ok, "%s: the adopted key is spent", text)
				assert.Positive(t, r.Delay)
				assert.Equal(t, []string{"k", "new", "r"}, adopted)
				assert.Equal(t, 1, keeps)
			}
		}
	}
}

// TestKeys: Keys yields every key the store holds, once each, across
// shards, for one rule and a composite; it stops when yield returns false;
// yield may Take the key it is given. A store of hashed keys returns false
// and yields nothing.
func TestKeys(t *testing.T) {
	const n = 500
	for _, text := range []string{"sliding-log,2,1s", "token-bucket,4,1s", "token-bucket,10,1s + fixed-window,1000,1h"} {
		limits := mustLimits(t, text)
		lim := newMovable(t, limits, plumb.Settings{Clock: clock.NewFake(), Shards: 16})
		var want []string
		for i := range n {
			k := "user-" + strconv.Itoa(i)
			want = append(want, k)
			require.True(t, lim.Allow(k).Allowed)
		}
		var got []string
		require.True(t, lim.Keys(func(k string) bool { got = append(got, k); return true }))
		assert.ElementsMatch(t, want, got, text)

		got = got[:0]
		require.True(t, lim.Keys(func(k string) bool { got = append(got, k); return len(got) < 10 }))
		assert.Len(t, got, 10, "%s: stopped by yield", text)

		into := make([]kernel.PartState, limits.Len())
		taken := 0
		require.True(t, lim.Keys(func(k string) bool {
			if lim.Take(k, into) {
				taken++
			}
			return true
		}))
		assert.Equal(t, n, taken, text)
		assert.Zero(t, lim.Len(), text)

		hashed := newMovable(t, limits, plumb.Settings{Clock: clock.NewFake(), HashedKeys: true})
		require.True(t, hashed.Allow("k").Allowed)
		assert.False(t, hashed.Keys(func(string) bool { t.Error("a key yielded by a store of hashed keys"); return true }), text)
	}
}

// holdCount returns how many entries the shards' holds have.
func (l *store[KT, S]) holdCount() int {
	n := 0
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		n += len(sh.holds.M) + len(sh.cheld.M)
		sh.mu.Unlock()
	}
	return n
}

// TestTakeDropsHold: a reservation made before Take cannot be cancelled
// after it, in the store it was made in (even once the key is put back) or
// in the one the key moved to; its tokens stay taken in the state carried.
func TestTakeDropsHold(t *testing.T) {
	for _, text := range []string{"token-bucket,4,1s", "token-bucket,3,1s", "token-bucket,3,1s + token-bucket,5,4s"} {
		for _, hashed := range []bool{false, true} {
			limits := mustLimits(t, text)
			fake := clock.NewFake()
			set := plumb.Settings{Clock: fake, HashedKeys: hashed}
			a, b := newMovable(t, limits, set), newMovable(t, limits, set)
			res := a
			require.True(t, a.AllowN("k", limits.Limit()).Allowed)
			r, ok := res.ReserveN("k", 1, time.Hour)
			require.True(t, ok)
			require.Positive(t, r.Delay, "%s: a reservation that waits", text)
			into := make([]kernel.PartState, limits.Len())
			held := a.(interface{ holdCount() int })
			require.Equal(t, 1, held.holdCount())
			require.True(t, a.Take("k", into))
			assert.Zero(t, held.holdCount(), "%s, hashed %v: Take deletes the hold's entry", text, hashed)
			assert.False(t, res.CancelReservation("k", r), "%s, hashed %v: the hold went with Take", text, hashed)
			require.True(t, b.Put("k", into))
			assert.False(t, b.CancelReservation("k", r), "%s: not in the store the key moved to", text)
			d, _ := conformance.AllowWhich(b, "k", 1)
			assert.False(t, d.Allowed, "%s: the reservation's tokens are still taken", text)
			assert.Greater(t, d.RetryAfter, r.Delay, "%s: the next token is due after the reservation's", text)
			require.True(t, b.Take("k", into))
			require.True(t, a.Put("k", into))
			assert.False(t, res.CancelReservation("k", r), "%s: not after the key came back", text)
		}
	}
}

// TestPutBeyondMaxKeys: Take uncounts its key, so the store has room for a
// new one; Put stores a key in a full store rather than drop its state,
// counting it beyond the bound, and new keys are then denied until
// evictions bring the count back under it.
func TestPutBeyondMaxKeys(t *testing.T) {
	limits := mustLimits(t, "fixed-window,1,1h")
	fake := clock.NewFake()
	set := plumb.Settings{Clock: fake, Shards: 1, MaxKeys: 1}
	a, b := newMovable(t, limits, set), newMovable(t, limits, set)
	require.True(t, a.Allow("a").Allowed)
	require.True(t, b.Allow("b").Allowed)
	assert.False(t, a.Allow("c").Allowed, "a full store")
	into := make([]kernel.PartState, 1)
	require.True(t, a.Take("a", into))
	assert.True(t, a.Allow("c").Allowed, "Take made room")
	require.True(t, b.Put("a", into))
	assert.Equal(t, 2, b.Len(), "stored beyond the bound")
	assert.True(t, b.(interface{ countIs(int) bool }).countIs(2))
	assert.False(t, b.Allow("a").Allowed, "the carried state: a spent window")
	assert.False(t, b.Allow("d").Allowed, "over the bound: no new key")
	fake.Set(2 * time.Hour) // a and b are fresh
	assert.True(t, b.Allow("d").Allowed, "room made by evicting fresh keys")
	assert.True(t, b.(interface{ countIs(int) bool }).countIs(b.Len()))
}
