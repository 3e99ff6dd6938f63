package conformance

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
)

// lockedHook returns the variant's Locked hook, or nil in a build without
// it: the checks then leave out what they would assert with it.
func (m movers) lockedHook() func(admit.KeyedLimiter) bool {
	if m.v.Store == nil {
		return nil
	}
	return m.v.Store.Locked
}

// testKeepRedirects: with a Keep that refuses every key, a call on a key
// the store does not hold (an admission, a probe, a request that can never
// pass, AllowNWhich's) is decided by Redirect with its key and n, returns
// Redirect's decision and index, and stores nothing; Keep runs under the
// shard's lock, and Redirect after it is released. A call on a stored key
// asks no hook. A Keep that lets the key in, and a Keep without a
// Redirect, leave the store deciding as without hooks.
func testKeepRedirects(t *testing.T, m movers) {
	locked := m.lockedHook()
	for _, limits := range m.taken(t, moveTexts) {
		for _, hashed := range m.hashed() {
			text := limits.String() + " hashed=" + strconv.FormatBool(hashed)
			lim := m.new(t, limits, moveOpts(clock.NewFake(), hashed, admit.WithShards(1))...)
			require.True(t, lim.Allow("held").Allowed)
			redirect := admit.Decision{Allowed: true, Limit: 77, Remaining: 5}
			which := limits.Len() - 1
			var keeps, redirects []string
			keep := true
			lim.SetHooks(&keyed.Hooks{
				Keep: func(key string, _ keyed.Epoch) bool {
					if locked != nil {
						assert.True(t, locked(lim), "%s: Keep runs under the shard's lock", text)
					}
					keeps = append(keeps, key)
					return keep
				},
				Redirect: func(key string, n int) (admit.Decision, int) {
					if locked != nil {
						assert.False(t, locked(lim), "%s: Redirect runs with no lock held", text)
					}
					redirects = append(redirects, key+"/"+strconv.Itoa(n))
					return redirect, which
				},
			})
			d, w := AllowWhich(lim, "held", 1)
			assert.Equal(t, limits.Limit()-2, d.Remaining, "%s: the stored key decides in the store", text)
			assert.Zero(t, w)
			assert.Empty(t, keeps, "%s: a stored key asks no hook", text)

			keep = false
			for _, n := range []int{1, 0, -1, limits.Limit() + 1} {
				d, w := AllowWhich(lim, "moved", n)
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
			d, _ = AllowWhich(lim, "new", 1)
			assert.Equal(t, limits.Limit()-1, d.Remaining, "%s: a kept key is inserted as usual", text)
			assert.Equal(t, 2, lim.Len(), text)
			lim.SetHooks(nil)
			d, _ = AllowWhich(lim, "last", 1)
			assert.Equal(t, limits.Limit()-1, d.Remaining, "%s: no hooks", text)
			assert.Len(t, redirects, 5, text)
		}
	}
}

// testKeepRedirectsReservations: a reservation on a key Keep refuses is
// Redirect's decision: an admission is a reservation due now that cannot
// be cancelled, and a denial a refusal, taking nothing, whose Delay is the
// denial's RetryAfter (Never for a request that can never pass), so that
// WaitKey sleeps that long and asks again. Nothing is stored.
func testKeepRedirectsReservations(t *testing.T, m movers) {
	for _, limits := range m.taken(t, []string{"token-bucket,4,1s", "token-bucket,3,1s", "token-bucket,3,1s + token-bucket,5,4s"}) {
		for _, hashed := range m.hashed() {
			text := limits.String() + " hashed=" + strconv.FormatBool(hashed)
			lim := m.new(t, limits, moveOpts(clock.NewFake(), hashed)...)
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
			r, ok := lim.ReserveN("moved", 2, time.Hour)
			assert.True(t, ok, text)
			assert.Zero(t, r.Delay, text)
			assert.Equal(t, 2, r.N(), text)
			assert.False(t, lim.CancelReservation("moved", r), "%s: a redirected reservation cannot be cancelled", text)
			redirect = admit.Decision{Limit: 3, RetryAfter: 3 * time.Second}
			r, ok = lim.ReserveN("moved", 2, time.Hour)
			assert.False(t, ok, text)
			assert.Equal(t, 3*time.Second, r.Delay, "%s: a redirected denial: its RetryAfter", text)
			redirect = admit.Decision{Limit: 3, RetryAfter: admit.Never}
			r, ok = lim.ReserveN("moved", 2, time.Hour)
			assert.False(t, ok, text)
			assert.Equal(t, admit.Never, r.Delay, text)
			assert.Equal(t, 3, redirects, text)
			assert.Zero(t, lim.Len(), "%s: nothing stored", text)
		}
	}
}

// testAdopt: a call on a key the store does not hold calls Adopt before
// taking any lock of the store's, and decides on the state Adopt put there
// (a key spent in another store), without asking Keep; once the key is
// stored, its calls ask no hook. An Adopt that puts nothing leaves the call
// to Keep, which is asked with that call's Adopt's own Epoch, and to the
// insertion. Reservations adopt as calls do.
func testAdopt(t *testing.T, m movers) {
	locked := m.lockedHook()
	for _, limits := range m.taken(t, moveTexts) {
		for _, hashed := range m.hashed() {
			text := limits.String() + " hashed=" + strconv.FormatBool(hashed)
			o := moveOpts(clock.NewFake(), hashed, admit.WithShards(1))
			lim, other := m.new(t, limits, o...), m.new(t, limits, o...)
			require.True(t, other.AllowN("k", limits.Limit()).Allowed)
			spent := make([]kernel.PartState, limits.Len())
			var adopted []string
			keeps := 0
			lim.SetHooks(&keyed.Hooks{
				Adopt: func(key string) keyed.Epoch {
					if locked != nil {
						assert.False(t, locked(lim), "%s: Adopt runs before the store takes a lock", text)
					}
					adopted = append(adopted, key)
					if other.Take(key, spent) {
						require.True(t, lim.Put(key, spent))
					}
					return keyed.Epoch(len(key)) // a different Epoch for each key
				},
				Keep: func(key string, adopted keyed.Epoch) bool {
					assert.Equal(t, keyed.Epoch(len(key)), adopted, "%s: Keep is asked with the call's Adopt's Epoch", text)
					keeps++
					return true
				},
				Redirect: func(key string, _ int) (admit.Decision, int) {
					t.Errorf("%s: Redirect(%q) of a kept key", text, key)
					return admit.Decision{}, 0
				},
			})
			d, _ := AllowWhich(lim, "k", 1)
			assert.False(t, d.Allowed, "%s: the adopted key is spent", text)
			assert.Equal(t, []string{"k"}, adopted)
			assert.Zero(t, keeps, "%s: a key Adopt put asks no Keep", text)
			AllowWhich(lim, "k", 1)
			assert.Len(t, adopted, 1, "%s: a stored key asks no hook", text)

			d, _ = AllowWhich(lim, "new-key", 1)
			assert.True(t, d.Allowed, "%s: nothing to adopt: a new key", text)
			assert.Equal(t, []string{"k", "new-key"}, adopted)
			assert.Equal(t, 1, keeps)
			assert.Equal(t, 2, lim.Len())
			for range 3 {
				AllowWhich(lim, "k", 1)
				AllowWhich(lim, "new-key", 1)
			}
			assert.Len(t, adopted, 2, "%s: stored keys ask no hook", text)
			assert.Equal(t, 1, keeps, "%s: stored keys ask no hook", text)

			if buckets(limits) {
				require.True(t, other.AllowN("r", limits.Limit()).Allowed)
				r, ok := lim.ReserveN("r", 1, 0)
				assert.False(t, ok, "%s: the adopted key is spent", text)
				assert.Positive(t, r.Delay)
				assert.Equal(t, []string{"k", "new-key", "r"}, adopted)
				assert.Equal(t, 1, keeps)
			}
		}
	}
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

// testKeepWithoutRedirect: hooks with a Keep but no Redirect have nowhere
// to send a call their Keep refuses, so the store keeps the key, for one
// rule and a composite, in every container.
func testKeepWithoutRedirect(t *testing.T, m movers) {
	for _, limits := range m.taken(t, []string{"token-bucket,4,1s", "fixed-window,3,1s + sliding-log,4,2s", "fixed-window,3,1s + token-bucket,4,2s"}) {
		lim := m.new(t, limits, admit.WithClock(clock.NewFake()))
		lim.SetHooks(&keyed.Hooks{Keep: func(string, keyed.Epoch) bool { return false }})
		d := lim.AllowN("k", 1)
		assert.Equal(t, limits.Limit()-1, d.Remaining, "%v: a Keep without a Redirect keeps the key", limits)
		assert.Equal(t, 1, lim.Len(), "%v", limits)
	}
}
