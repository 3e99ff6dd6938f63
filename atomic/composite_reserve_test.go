package atomic_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/clock"
)

// reserver is a keyed or single-key composite reserver seen as one key's.
type reserver struct {
	name    string
	allowN  func(n int) admit.Decision
	reserve func(n int, maxWait time.Duration) (admit.Reservation, bool)
	cancel  func(key string, r admit.Reservation) bool // key: where the cancellation is presented
	state   func() []uint64                            // each part's TAT word
	lim     any
}

// reservers returns a keyed store's key "k" and a single-key limiter of
// limits, in each form, on clock fake.
func reservers(t *testing.T, limits admit.Limits, fake *clock.Fake) []reserver {
	var rs []reserver
	for _, form := range compositeForms {
		keyed, err := admitatomic.NewLimitsForm(limits, form.pair, admit.WithClock(fake))
		require.NoError(t, err)
		kr := keyed.(keyedReserver)
		rs = append(rs, reserver{
			name:    "keyed " + admitatomic.LimitsForm(keyed),
			allowN:  func(n int) admit.Decision { return kr.AllowN("k", n) },
			reserve: func(n int, w time.Duration) (admit.Reservation, bool) { return kr.ReserveN("k", n, w) },
			cancel:  func(key string, r admit.Reservation) bool { return kr.CancelReservation(key, r) },
			state:   func() []uint64 { return tats(t, keyed, "k") },
			lim:     keyed,
		})
		single, err := admitatomic.NewLimitsLimiterForm(limits, form.pair, admit.WithClock(fake))
		require.NoError(t, err)
		sr := single.(admit.Reserver)
		rs = append(rs, reserver{
			name:    "single " + admitatomic.LimitsForm(single),
			allowN:  sr.AllowN,
			reserve: sr.ReserveN,
			cancel: func(key string, r admit.Reservation) bool {
				if key != "k" {
					return false // a single key has no other
				}
				return sr.CancelReservation(r)
			},
			state: func() []uint64 { return tats(t, single, "") },
			lim:   single,
		})
	}
	return rs
}

// tats returns the TAT word of each part of key's state in lim.
func tats(t *testing.T, lim any, key string) []uint64 {
	s, _, ok := admitatomic.LimitsState(lim, key)
	require.True(t, ok, "the key is stored")
	w := make([]uint64, len(s))
	for i := range s {
		w[i] = s[i].A
	}
	return w
}

// TestLimitsReserveCancel: a reservation takes its tokens in every rule
// (each part's state moves), holds the key while it can be cancelled, and
// its cancellation gives them back in every rule (each part's state is
// what it was), at most once, only on the key it was made on, and only
// while it is not due at the newest reading the key has seen.
func TestLimitsReserveCancel(t *testing.T) {
	// 10 per second and 3 per minute: 100ms and 20s a token.
	limits := mustLimits(t, "token-bucket,10,1s + token-bucket,3,1m")
	fake := clock.NewFake()
	for _, r := range reservers(t, limits, fake) {
		fake.Set(0)
		require.True(t, r.allowN(3).Allowed, r.name)
		before := r.state()

		res, ok := r.reserve(1, time.Minute)
		require.True(t, ok, r.name)
		assert.Equal(t, 20*time.Second, res.Delay, "%s: the slower rule sets the wait", r.name)
		after := r.state()
		for i := range before {
			assert.NotEqual(t, before[i], after[i], "%s: the reservation takes its token in rule %d", r.name, i)
		}
		assert.True(t, admitatomic.LimitsHeld(r.lim, "k"), "%s: a live reservation holds the key", r.name)
		assert.False(t, r.cancel("other", res), "%s: a cancellation on another key", r.name)
		assert.Equal(t, after, r.state(), "%s: nothing given back on another key", r.name)
		assert.True(t, r.cancel("k", res), "%s: the cancellation", r.name)
		assert.Equal(t, before, r.state(), "%s: the token given back in every rule", r.name)
		copied := res
		assert.False(t, r.cancel("k", copied), "%s: a reservation is cancelled at most once", r.name)
		assert.False(t, admitatomic.LimitsHeld(r.lim, "k"), "%s: released by the cancellation", r.name)

		// Refused: nothing taken.
		_, ok = r.reserve(1, time.Second)
		assert.False(t, ok, "%s: a wait of 20s exceeds 1s", r.name)
		assert.Equal(t, before, r.state(), "%s: a refused reservation takes nothing", r.name)

		// A later reservation is the one that can be cancelled.
		first, ok := r.reserve(1, time.Hour)
		require.True(t, ok, r.name)
		second, ok := r.reserve(1, time.Hour)
		require.True(t, ok, r.name)
		assert.Equal(t, 40*time.Second, second.Delay, r.name)
		assert.False(t, r.cancel("k", first), "%s: the first's tokens are promised to the second's slot", r.name)
		assert.True(t, r.cancel("k", second), r.name)

		// Judged at the newest reading seen: a probe past the due time, then
		// a cancellation at a stale reading.
		third, ok := r.reserve(1, time.Hour)
		require.True(t, ok, r.name)
		assert.Equal(t, 40*time.Second, third.Delay, r.name)
		fake.Set(45 * time.Second)
		r.allowN(0)
		fake.Set(time.Second)
		assert.False(t, r.cancel("k", third), "%s: due at 40s, a reading of 45s seen by a probe", r.name)
	}
}

// TestLimitsReserveSeenByDenial: a denial shows the hold its reading too,
// for a cancellation at a stale reading after it, and a cancellation
// before the due time still succeeds after a stale denial.
func TestLimitsReserveSeenByDenial(t *testing.T) {
	limits := mustLimits(t, "token-bucket,10,1s + token-bucket,3,1m")
	fake := clock.NewFake()
	for _, r := range reservers(t, limits, fake) {
		fake.Set(0)
		require.True(t, r.allowN(3).Allowed, r.name)
		res, ok := r.reserve(1, time.Minute)
		require.True(t, ok, r.name)
		fake.Set(10 * time.Second)
		assert.False(t, r.allowN(3).Allowed, "%s: the bucket of 3 owes a token", r.name)
		fake.Set(time.Second)
		assert.True(t, r.cancel("k", res), "%s: not due at 10s, the newest reading seen", r.name)

		res, ok = r.reserve(1, time.Minute)
		require.True(t, ok, r.name)
		fake.Set(30 * time.Second)
		assert.False(t, r.allowN(3).Allowed, "%s: a denial at 30s, past the due time", r.name)
		fake.Set(2 * time.Second)
		assert.False(t, r.cancel("k", res), "%s: due at 20s, a reading of 30s seen by a denial", r.name)
	}
}

// TestLimitsReservedKeyEvicted: a key held by a reservation is not evicted
// while the reservation can be cancelled, and is once it is due and fresh.
func TestLimitsReservedKeyEvicted(t *testing.T) {
	limits := mustLimits(t, "token-bucket,10,1s + token-bucket,3,1m")
	for _, form := range compositeForms {
		fake := clock.NewFake()
		keyed, err := admitatomic.NewLimitsForm(limits, form.pair, admit.WithClock(fake))
		require.NoError(t, err)
		store := keyed.(admit.CompositeStore)
		require.True(t, keyed.AllowN("k", 3).Allowed)
		res, ok := keyed.(keyedReserver).ReserveN("k", 1, time.Minute)
		require.True(t, ok)
		fake.Set(time.Second)
		assert.Zero(t, store.Sweep(), "%s: held by a live reservation", form.name)
		fake.Set(10 * time.Minute)
		assert.Equal(t, 1, store.Sweep(), "%s: due, then fresh", form.name)
		assert.Zero(t, store.Len(), form.name)
		assert.False(t, keyed.(keyedReserver).CancelReservation("k", res), "%s: evicted as fresh, so due", form.name)
	}
}

// TestLimitsReserveHammer: on a frozen clock, goroutines admit while others
// reserve and at once cancel, on one key of two token buckets: a
// cancellation fails when another call took tokens in between. The faster bucket's TAT then counts every token taken and not
// given back, one emission interval each: at the end it lies exactly
// (admitted + reservations kept) intervals past the reading, so no
// admission was lost or doubled around a hold, and no cancellation gave
// back what it should not have, or twice.
func TestLimitsReserveHammer(t *testing.T) {
	limits := mustLimits(t, "token-bucket,10,1s + token-bucket,1000,1h")
	const start = time.Hour
	for _, form := range compositeForms {
		fake := clock.NewFake()
		fake.Set(start)
		keyed, err := admitatomic.NewLimitsForm(limits, form.pair, admit.WithClock(fake))
		require.NoError(t, err)
		kr := keyed.(keyedReserver)
		var mu sync.Mutex
		admitted, kept, cancelled := 0, 0, 0
		var wg sync.WaitGroup
		begin := make(chan struct{})
		for g := range 8 {
			wg.Go(func() {
				<-begin
				a, k, c := 0, 0, 0
				for range 2000 {
					if g%2 == 0 {
						if keyed.Allow("k").Allowed {
							a++
						}
						continue
					}
					r, ok := kr.ReserveN("k", 1, 5*time.Second)
					if !ok {
						continue
					}
					k++
					if kr.CancelReservation("k", r) { // fails if another call came between
						k--
						c++
					}
				}
				mu.Lock()
				admitted, kept, cancelled = admitted+a, kept+k, cancelled+c
				mu.Unlock()
			})
		}
		close(begin)
		wg.Wait()
		s, _, ok := admitatomic.LimitsState(keyed, "k")
		require.True(t, ok)
		tat := time.Duration(int64(s[0].A ^ 1<<63))
		assert.Equal(t, start+time.Duration(admitted+kept)*100*time.Millisecond, tat,
			"%s: %d admitted, %d reservations kept, %d cancelled", admitatomic.LimitsForm(keyed), admitted, kept, cancelled)
		t.Logf("%s: %d admitted, %d reservations kept, %d cancelled", admitatomic.LimitsForm(keyed), admitted, kept, cancelled)
	}
}
