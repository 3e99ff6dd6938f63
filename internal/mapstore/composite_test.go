package mapstore

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/plumb"
	"github.com/admit-go/admit/internal/reservation"
)

// compositeTexts are the composites the tests run over: every algorithm,
// token buckets whose emission intervals are and are not whole
// nanoseconds, two to eight rules.
var compositeTexts = []string{
	"token-bucket,10,1s + fixed-window,1000,1h",
	"token-bucket,3,1s + token-bucket,5,4s",
	"token-bucket,3,1500ms + token-bucket,7,10s + token-bucket,2,333ms",
	"token-bucket,1,100ms + token-bucket,4,1s + token-bucket,9,1m + token-bucket,20,1h",
	"fixed-window,3,1s + sliding-log,4,2s + sliding-counter,5,3s",
	"sliding-counter,2,1s + token-bucket,4,3s + sliding-log,2,500ms + fixed-window,6,5s",
	"token-bucket,2,1s + token-bucket,3,2s + fixed-window,4,3s + fixed-window,5,4s + " +
		"sliding-log,3,2s + sliding-log,6,5s + sliding-counter,4,2s + sliding-counter,9,7s",
}

func mustLimits(t testing.TB, text string) admit.Limits {
	t.Helper()
	l, err := admit.ParseLimits(text)
	require.NoError(t, err)
	return l
}

// longest returns the longest Window of l's rules.
func longest(l admit.Limits) time.Duration {
	var w time.Duration
	for _, r := range l.Rules() {
		w = max(w, r.Window)
	}
	return w
}

// TestCompositeDifferential runs generated sequences of AllowNWhich,
// reservations and their cancellations (on their own key and on others),
// Reset and forced evictions, over several keys with the fake clock moving
// forwards and backwards, against the oracle: every decision, binding
// index, reservation delay and cancellation must be the oracle's, although
// the store evicts keys the oracle keeps, and deletes their holds. As in
// the conformance suite's eviction equivalence, an eviction at reading at
// is forced only where no later call reads the clock earlier than at.
func TestCompositeDifferential(t *testing.T) {
	const (
		opMove = iota
		opEvict
		opReset
		opReserve
		opCancel
		opAllow
	)
	type op struct {
		kind     int
		at       time.Duration
		key      string
		n        int
		maxWait  time.Duration
		which    int  // opCancel: the index of the reservation among those made
		elsewise bool // opCancel: present it on key rather than on its own
	}
	var evicted, cancelled int
	rapid.Check(t, func(rt *rapid.T) {
		limits := mustLimits(t, rapid.SampledFrom(compositeTexts).Draw(rt, "limits"))
		reservable := kernel.NewComposite(limits).Reservable()
		window := longest(limits)
		now := time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, "start"))
		start := now
		count := rapid.IntRange(1, 100).Draw(rt, "ops")
		var ops []op
		reserves := 0
		for len(ops) < count {
			o := op{kind: opAllow, key: rapid.SampledFrom([]string{"a", "b", "c", "d"}).Draw(rt, "key")}
			switch k := rapid.IntRange(0, 13).Draw(rt, "op"); {
			case k <= 1:
				o.kind = opMove
				now += time.Duration(rapid.Int64Range(0, int64(2*window)).Draw(rt, "advance"))
			case k == 2:
				o.kind = opMove
				now += time.Duration(rapid.Int64Range(0, 10).Draw(rt, "nudge"))
			case k == 3:
				o.kind = opMove
				now -= time.Duration(rapid.Int64Range(0, int64(window)).Draw(rt, "back"))
			case k == 4:
				o.kind = opEvict
			case k == 5:
				o.kind = opReset
			case k <= 8 && reservable:
				o.kind = opReserve
				o.n = rapid.IntRange(-1, limits.Limit()+1).Draw(rt, "n")
				o.maxWait = time.Duration(rapid.SampledFrom([]int64{0, int64(window / 3), int64(2 * window), int64(admit.Never)}).Draw(rt, "maxWait"))
				reserves++
				if rapid.Bool().Draw(rt, "drain, wait, cancel") {
					// The key's smallest bucket drained, a reservation that
					// must wait, and its cancellation at the same reading.
					ops = append(ops,
						op{kind: opReserve, key: o.key, n: limits.Limit(), maxWait: admit.Never, at: now},
						op{kind: opReserve, key: o.key, n: rapid.IntRange(1, limits.Limit()).Draw(rt, "n"), maxWait: admit.Never, at: now})
					reserves++
					o = op{kind: opCancel, key: o.key, which: reserves - 1}
				}
			case k <= 10 && reservable && reserves > 0:
				o.kind = opCancel
				o.which = reserves - 1 // the latest, the one most likely live
				if rapid.Bool().Draw(rt, "older") {
					o.which = rapid.IntRange(0, reserves-1).Draw(rt, "reservation")
				}
				o.elsewise = rapid.IntRange(0, 3).Draw(rt, "elsewhere") == 0
			default:
				o.n = rapid.IntRange(-1, limits.Limit()+1).Draw(rt, "n")
			}
			o.at = now
			ops = append(ops, o)
		}
		// later[i] is the earliest reading of the calls from op i on.
		later := make([]time.Duration, len(ops)+1)
		later[len(ops)] = 1<<63 - 1
		for i := len(ops) - 1; i >= 0; i-- {
			later[i] = later[i+1]
			if k := ops[i].kind; k == opAllow || k == opReserve || k == opCancel {
				later[i] = min(later[i], ops[i].at)
			}
		}

		fake := clock.NewFake()
		fake.Set(start)
		set := plumb.Settings{Clock: fake, Shards: rapid.SampledFrom([]int{1, 4}).Draw(rt, "shards"), HashedKeys: rapid.Bool().Draw(rt, "hashed")}
		lim := NewLimits(limits, set)
		keyed := lim
		want := conformance.NewCompositeOracle(limits)
		type made struct {
			key    string
			r      admit.Reservation
			ticket uint64 // the oracle's
		}
		var reservations []made
		for i, o := range ops {
			switch o.kind {
			case opMove:
				fake.Set(o.at)
			case opEvict:
				before := lim.Len()
				n := EvictAt(lim, min(o.at, later[i+1]))
				if after := lim.Len(); after != before-n {
					rt.Fatalf("%v op %d: EvictAt evicted %d of %d keys, but %d remain", limits, i, n, before, after)
				}
				evicted += n
			case opReset:
				lim.Reset(o.key)
				want.Reset(o.key)
			case opReserve:
				d, ok, ticket := want.Reserve(o.key, o.at, o.n, o.maxWait)
				r, gotOK := keyed.ReserveN(o.key, o.n, o.maxWait)
				if r.Delay != d || gotOK != ok || (reservation.Ticket(r) == 0) != (ticket == 0) {
					rt.Fatalf("%v op %d: ReserveN(t=%v, %q, %d, %v) = %v, %v, ticket %d; want %v, %v, ticket %d",
						limits, i, o.at, o.key, o.n, o.maxWait, r.Delay, gotOK, reservation.Ticket(r), d, ok, ticket)
				}
				reservations = append(reservations, made{o.key, r, ticket})
			case opCancel:
				m := reservations[o.which]
				on := m.key
				if o.elsewise {
					on = o.key
				}
				exp := want.Cancel(on, m.ticket, o.at)
				if got := keyed.CancelReservation(on, m.r); got != exp {
					rt.Fatalf("%v op %d: CancelReservation(t=%v, %q, reservation %d of %q) = %v, want %v", limits, i, o.at, on, o.which, m.key, got, exp)
				}
				if exp {
					cancelled++
				}
			default:
				expD, expW := want.Allow(o.key, o.at, o.n)
				gotD, gotW := lim.AllowNWhich(o.key, o.n)
				if gotD != expD || gotW != expW {
					rt.Fatalf("%v op %d: AllowNWhich(t=%v, %q, %d) = %+v, %d; want %+v, %d", limits, i, o.at, o.key, o.n, gotD, gotW, expD, expW)
				}
			}
		}
	})
	if !testing.Short() {
		// With -short's 20 cases, a forced eviction of a fresh key or a
		// composite of token buckets only (the ones that reserve) is
		// sometimes not drawn at all; the full run draws enough, and
		// TestCompositeEvictsOnlyFresh and TestCompositeReservations evict and
		// cancel deterministically.
		assert.Positive(t, evicted, "no forced eviction evicted a key: the check proved nothing")
		assert.Positive(t, cancelled, "no cancellation was honoured: the check proved nothing")
	}
}

// TestCompositeAllowNWhich: a step table on one key of "token-bucket,2,1s +
// fixed-window,3,10s": the binding rule is the one with the smallest
// Remaining on an admission and the largest RetryAfter on a denial, the
// first on a tie, and the Decision's Limit is its Limit.
func TestCompositeAllowNWhich(t *testing.T) {
	fake := clock.NewFake()
	lim := NewLimits(mustLimits(t, "token-bucket,2,1s + fixed-window,3,10s"), plumb.Settings{Clock: fake})
	for i, step := range []struct {
		at        time.Duration
		n         int
		allowed   bool
		remaining int
		retry     time.Duration
		which     int
	}{
		{0, 0, true, 2, 0, 0},                       // a probe: 2 tokens, 3 in the window
		{0, 1, true, 1, 0, 0},                       // 1 token, 2 in the window
		{0, 1, true, 0, 0, 0},                       // 0 and 1: the bucket binds
		{0, 1, false, 0, 500 * time.Millisecond, 0}, // the bucket needs 500ms, the window has room
		{time.Second, 1, true, 0, 0, 1},             // 1 token left, 0 in the window: the window binds
		{2 * time.Second, 1, false, 0, 8 * time.Second, 1},
		{2 * time.Second, 3, false, 0, admit.Never, 0}, // above the bucket's Limit: Never, beyond the window's 8s
		{10 * time.Second, 2, true, 0, 0, 0},           // a new window, a full bucket: both 0 and 1; 0 < 1
	} {
		fake.Set(step.at)
		d, which := lim.AllowNWhich("k", step.n)
		limit := []int{2, 3}[step.which]
		if d.Allowed != step.allowed || d.Remaining != step.remaining || d.RetryAfter != step.retry || which != step.which || d.Limit != limit {
			t.Errorf("step %d: AllowNWhich(t=%v, k, %d) = %+v, %d; want allowed %v, remaining %d, retry %v, which %d, limit %d",
				i, step.at, step.n, d, which, step.allowed, step.remaining, step.retry, step.which, limit)
		}
	}
}

// TestCompositeEvictsOnlyFresh: a key of "token-bucket,2,1s +
// fixed-window,5,1h" whose bucket is full again is not evicted while its
// window still counts its admissions, and is once the window has ended;
// afterwards it decides as a new key.
func TestCompositeEvictsOnlyFresh(t *testing.T) {
	for _, hashed := range []bool{false, true} {
		fake := clock.NewFake()
		lim := NewLimits(mustLimits(t, "token-bucket,2,1s + fixed-window,5,1h"), plumb.Settings{Clock: fake, Shards: 1, HashedKeys: hashed})
		require.True(t, lim.AllowN("k", 2).Allowed)
		fake.Set(time.Minute) // the bucket is full, the window holds 2
		assert.Zero(t, EvictAt(lim, time.Minute), "hashed %v: the window still counts the key's admissions", hashed)
		assert.Zero(t, lim.Sweep())
		assert.Equal(t, 1, lim.Len())
		d, _ := lim.AllowNWhich("k", 0)
		assert.Equal(t, 2, d.Remaining)
		fake.Set(time.Hour + time.Second) // a new window, beyond Sweep's slack
		assert.Equal(t, 1, lim.Sweep(), "hashed %v: every rule is fresh", hashed)
		assert.Zero(t, lim.Len())
		d, which := lim.AllowNWhich("k", 2)
		assert.Equal(t, admit.Decision{Allowed: true, Limit: 2, Remaining: 0, ResetAfter: time.Hour - time.Second}, d)
		assert.Equal(t, 0, which)
	}
}

// TestCompositeMaxKeys: in a full store whose key is not fresh, a new key
// is denied with the smallest Limit and the index of the first rule that
// has it, and stores nothing; once the stored key is fresh, the new key
// makes room by evicting it.
func TestCompositeMaxKeys(t *testing.T) {
	fake := clock.NewFake()
	lim := NewLimits(mustLimits(t, "fixed-window,9,1s + token-bucket,4,2s + token-bucket,4,8s"), plumb.Settings{Clock: fake, Shards: 1, MaxKeys: 1})
	require.True(t, lim.Allow("a").Allowed)
	d, which := lim.AllowNWhich("b", 1)
	assert.False(t, d.Allowed)
	assert.Equal(t, 4, d.Limit)
	assert.Equal(t, 1, which, "the first rule of the smallest Limit")
	assert.Positive(t, d.RetryAfter)
	assert.Equal(t, 1, lim.Len())
	fake.Set(10 * time.Second) // every rule of a is fresh
	d, _ = lim.AllowNWhich("b", 1)
	assert.True(t, d.Allowed)
	assert.Equal(t, 1, lim.Len())
}

// TestCompositeReset: Reset gives the key a fresh budget in every rule,
// leaves other keys alone, and voids the key's reservation.
func TestCompositeReset(t *testing.T) {
	fake := clock.NewFake()
	lim := NewLimits(mustLimits(t, "token-bucket,2,1s + token-bucket,3,1h"), plumb.Settings{Clock: fake})
	res := lim
	require.True(t, lim.AllowN("a", 2).Allowed)
	require.True(t, lim.AllowN("b", 2).Allowed)
	r, ok := res.ReserveN("a", 1, time.Second)
	require.True(t, ok)
	require.Equal(t, 500*time.Millisecond, r.Delay)
	lim.Reset("a")
	assert.False(t, res.CancelReservation("a", r), "the reservation went with the state")
	d, _ := lim.AllowNWhich("a", 0)
	assert.Equal(t, 2, d.Remaining, "a fresh bucket in every rule")
	d, which := lim.AllowNWhich("b", 1)
	assert.False(t, d.Allowed, "b kept its state")
	assert.Equal(t, 0, which)
	assert.Equal(t, 1, lim.Len())
	lim.Reset("missing") // does nothing
	assert.Equal(t, 1, lim.Len())
}

// storedParts returns a copy of the stored state of key in a store of full
// keys, or nil if the store does not hold it.
func storedParts[S any](t *testing.T, lim admit.CompositeStore, key string) []kernel.PartState {
	t.Helper()
	l := lim.(tbCompFullKeys[S]).compFullKeys
	for i := range l.shards {
		if s := l.shards[i].m[key]; s != nil {
			return append([]kernel.PartState(nil), parts(s)...)
		}
	}
	return nil
}

// TestCompositeReservations: a reservation takes its tokens in every rule
// and waits for the slowest; its cancellation gives them back in every rule,
// at most once (a copy of it is refused), never on another key, and never
// once it was due at a reading the key has seen.
func TestCompositeReservations(t *testing.T) {
	fake := clock.NewFake()
	limits := mustLimits(t, "token-bucket,2,1s + token-bucket,3,6s")
	lim := NewLimits(limits, plumb.Settings{Clock: fake, Shards: 1})
	res := lim
	k := kernel.NewComposite(limits)
	state := func(key string) []kernel.PartState { return storedParts[[2]kernel.PartState](t, lim, key) }

	require.True(t, lim.AllowN("a", 2).Allowed) // bucket 0 empty, bucket 1 holds 1
	require.True(t, lim.AllowN("b", 2).Allowed)
	before, other := state("a"), state("b")

	r, ok := res.ReserveN("a", 1, time.Hour)
	require.True(t, ok)
	assert.Equal(t, 500*time.Millisecond, r.Delay, "bucket 0 binds: a token every 500ms")
	after := state("a")
	want := append([]kernel.PartState(nil), before...)
	d, ok := k.Reserve(want, 0, 1, time.Hour)
	require.True(t, ok)
	require.Equal(t, 500*time.Millisecond, d)
	assert.Equal(t, want, after, "charged in every rule as the kernel charges")
	assert.NotEqual(t, before[1], after[1], "bucket 1 paid too")

	assert.False(t, res.CancelReservation("b", r), "not on another key")
	assert.Equal(t, other, state("b"))
	copied := r
	assert.True(t, res.CancelReservation("a", r))
	assert.Equal(t, before, state("a"), "given back in every rule")
	assert.False(t, res.CancelReservation("a", copied), "at most once, copies included")
	assert.Equal(t, before, state("a"))

	// Bucket 1 binds the next: 1 token, then one every 2s.
	r1, ok := res.ReserveN("a", 2, time.Hour)
	require.True(t, ok)
	assert.Equal(t, 2*time.Second, r1.Delay)
	fake.Set(2 * time.Second) // due now: a probe shows it the reading
	lim.AllowNWhich("a", 0)
	fake.Set(time.Second) // a stale reading
	assert.False(t, res.CancelReservation("a", r1), "it was due at a reading the key has seen")
}

// TestCompositeAllocs: an admitted and a denied AllowNWhich on a stored key
// allocate nothing, for the example composite and for one of every
// algorithm, with full and hashed keys; so do a reservation and its
// cancellation once the key's hold has its entry.
func TestCompositeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, text := range []string{
		"token-bucket,10,1s + fixed-window,1000,1h",
		"token-bucket,1000,1s + fixed-window,1000,1h + sliding-log,1000,1h + sliding-counter,1000,1h",
	} {
		for _, hashed := range []bool{false, true} {
			fake := clock.NewFake()
			lim := NewLimits(mustLimits(t, text), plumb.Settings{Clock: fake, HashedKeys: hashed})
			require.True(t, lim.Allow("hot").Allowed)
			allocs := testing.AllocsPerRun(100, func() {
				fake.Advance(100 * time.Millisecond)
				if d, _ := lim.AllowNWhich("hot", 1); !d.Allowed {
					panic("every call is admitted")
				}
			})
			assert.Zero(t, allocs, "%s, hashed %v: allocations per admitted Allow on a stored key", text, hashed)
			require.True(t, lim.AllowN("spent", lim.Limits().Limit()).Allowed)
			allocs = testing.AllocsPerRun(100, func() {
				if lim.Allow("spent").Allowed {
					panic("the key is spent")
				}
			})
			assert.Zero(t, allocs, "%s, hashed %v: allocations per denied Allow", text, hashed)
		}
	}
	fake := clock.NewFake()
	lim := NewLimits(mustLimits(t, "token-bucket,1,1s + token-bucket,2,10s"), plumb.Settings{Clock: fake})
	res := lim
	require.True(t, lim.Allow("k").Allowed)
	cycle := func() {
		r, ok := res.ReserveN("k", 1, time.Hour)
		if !ok || r.Delay <= 0 || !res.CancelReservation("k", r) {
			panic("a reservation that waits, cancelled before it is due")
		}
	}
	cycle()
	assert.Zero(t, testing.AllocsPerRun(100, cycle), "allocations per ReserveN and CancelReservation")
}

// TestCompositeBytesPerKey reports the heap bytes per stored key of the
// example composite with full keys of 10 bytes (run with -v); docs/keyed-stores.md
// quotes it.
func TestCompositeBytesPerKey(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("a memory count, meaningful only without the race detector")
	}
	const keys = 100_000
	for _, hashed := range []bool{false, true} {
		fake := clock.NewFake()
		names := make([]string, keys)
		for i := range names {
			names[i] = fmt.Sprintf("user-%05d", i)
		}
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		lim := NewLimits(mustLimits(t, "token-bucket,10,1s + fixed-window,1000,1h"), plumb.Settings{Clock: fake, HashedKeys: hashed})
		for _, k := range names {
			lim.Allow(k)
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		require.Equal(t, keys, lim.Len())
		t.Logf("hashed keys %v: %.0f bytes per key", hashed, float64(m1.HeapAlloc-m0.HeapAlloc)/keys)
		runtime.KeepAlive(lim)
		runtime.KeepAlive(names) // counted in both readings: the caller's keys are not the store's
	}
}
