package locked_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/locked"
)

func TestCompositeConformance(t *testing.T) {
	v := conformance.CompositeVariant{
		Name:             "locked",
		NewLimits:        conformance.KeyedLimits(locked.NewLimits),
		NewLimitsLimiter: locked.NewLimitsLimiter,
		Supports:         func(admit.Algorithm) bool { return true },
	}
	conformance.RunComposite(t, v)
	t.Run("Stats", func(t *testing.T) { conformance.RunCompositeStats(t, v) })
	t.Run("HeldMemoryReturns", func(t *testing.T) { conformance.CompositeHeldMemoryReturns(t, v) })
}

func mustLimits(t testing.TB, text string) admit.Limits {
	t.Helper()
	l, err := admit.ParseLimits(text)
	require.NoError(t, err)
	return l
}

// TestLimitsOfOneRule: a Limits of one rule gets exactly what New and
// NewLimiter return for the rule: the same type, the same decisions.
func TestLimitsOfOneRule(t *testing.T) {
	for _, text := range []string{"token-bucket,3,1s", "fixed-window,3,1s", "sliding-log,3,1s", "sliding-counter,3,1s"} {
		l := mustLimits(t, text)
		fake := clock.NewFake()
		keyed, err := locked.NewLimits(l, admit.WithClock(fake))
		require.NoError(t, err)
		plain, err := locked.New(l.At(0), admit.WithClock(fake))
		require.NoError(t, err)
		assert.Equal(t, reflect.TypeOf(plain), reflect.TypeOf(keyed), text)
		assert.Implements(t, (*admit.Store)(nil), keyed, text)
		single, err := locked.NewLimitsLimiter(l, admit.WithClock(fake))
		require.NoError(t, err)
		plainSingle, err := locked.NewLimiter(l.At(0), admit.WithClock(fake))
		require.NoError(t, err)
		assert.Equal(t, reflect.TypeOf(plainSingle), reflect.TypeOf(single), text)
		for range 4 {
			assert.Equal(t, plain.AllowN("k", 2), keyed.AllowN("k", 2), text)
			assert.Equal(t, plainSingle.AllowN(2), single.AllowN(2), text)
			fake.Advance(300 * time.Millisecond)
		}
	}
}

// TestLimitsInterfaces: for two rules or more, NewLimits's CompositeStore
// is never a Store (it has no one Rule), and its ReserveN reserves ahead
// exactly when every rule is a token bucket (otherwise it refuses a spent
// key with the denial's RetryAfter); NewLimitsLimiter is a
// CompositeLimiter, and a Reserver exactly then.
func TestLimitsInterfaces(t *testing.T) {
	for _, c := range []struct {
		text       string
		reservable bool
	}{
		{"token-bucket,10,1s + fixed-window,1000,1h", false},
		{"token-bucket,10,1s + token-bucket,1000,1h", true},
		{"sliding-log,2,1s + sliding-counter,5,1m + fixed-window,9,1h", false},
	} {
		l := mustLimits(t, c.text)
		keyed, err := locked.NewLimits(l, admit.WithClock(clock.NewFake()))
		require.NoError(t, err)
		assert.Equal(t, l, keyed.Limits())
		_, isStore := keyed.(admit.Store)
		assert.False(t, isStore, c.text)
		for keyed.Allow("k").Allowed {
		}
		denied := keyed.Allow("k")
		r, ok := keyed.ReserveN("k", 1, admit.Never)
		assert.Equal(t, c.reservable, ok, "%s: ReserveN of a spent key reserves ahead", c.text)
		if !c.reservable {
			assert.Equal(t, denied.RetryAfter, r.Delay, c.text)
		}

		single, err := locked.NewLimitsLimiter(l)
		require.NoError(t, err)
		cl, ok := single.(admit.CompositeLimiter)
		require.True(t, ok, c.text)
		assert.Equal(t, l, cl.Limits())
		_, isReserver := single.(admit.Reserver)
		assert.Equal(t, c.reservable, isReserver, c.text)
	}
}

// TestLimitsErrors: invalid Limits and options are errors wrapping the
// right sentinel, never a panic or a silent default.
func TestLimitsErrors(t *testing.T) {
	good := mustLimits(t, "token-bucket,10,1s + fixed-window,1000,1h")
	for _, c := range []struct {
		name   string
		limits admit.Limits
		opts   []admit.Option
		keyed  error // NewLimits's
		single error // NewLimitsLimiter's
	}{
		{"zero Limits", admit.Limits{}, nil, admit.ErrInvalidRule, admit.ErrInvalidRule},
		{"nil clock", good, []admit.Option{admit.WithClock(nil)}, admit.ErrInvalidOption, admit.ErrInvalidOption},
		{"3 shards", good, []admit.Option{admit.WithShards(3)}, admit.ErrInvalidOption, admit.ErrInvalidOption},
		{"0 keys", good, []admit.Option{admit.WithMaxKeys(0)}, admit.ErrInvalidOption, admit.ErrInvalidOption},
		{"hashed keys", good, []admit.Option{admit.WithHashedKeys()}, admit.ErrUnsupported, admit.ErrUnsupported},
		{"shards", good, []admit.Option{admit.WithShards(4)}, nil, admit.ErrUnsupported},
		{"max keys", good, []admit.Option{admit.WithMaxKeys(10)}, nil, admit.ErrUnsupported},
	} {
		keyed, err := locked.NewLimits(c.limits, c.opts...)
		if c.keyed == nil {
			assert.NoError(t, err, c.name)
			assert.NotNil(t, keyed, c.name)
		} else {
			assert.ErrorIs(t, err, c.keyed, "NewLimits: %s", c.name)
			assert.Nil(t, keyed, c.name)
		}
		single, err := locked.NewLimitsLimiter(c.limits, c.opts...)
		assert.ErrorIs(t, err, c.single, "NewLimitsLimiter: %s", c.name)
		assert.Nil(t, single, c.name)
	}
}

// TestLimitsAllowNWhich: the binding rule of a composite, on the keyed
// store and the single key, and its Limit in the Decision.
func TestLimitsAllowNWhich(t *testing.T) {
	fake := clock.NewFake()
	l := mustLimits(t, "fixed-window,5,1m + token-bucket,2,1s")
	keyed, err := locked.NewLimits(l, admit.WithClock(fake))
	require.NoError(t, err)
	single, err := locked.NewLimitsLimiter(l, admit.WithClock(fake))
	require.NoError(t, err)
	for i, step := range []struct {
		n       int
		allowed bool
		which   int
		limit   int
	}{
		{1, true, 1, 2},  // 4 in the window, 1 token: the bucket
		{1, true, 1, 2},  // 3 and 0
		{1, false, 1, 2}, // the bucket needs 500ms, the window has room
		{6, false, 0, 5}, // above both Limits: Never in both, the first
	} {
		d, which := keyed.AllowNWhich("k", step.n)
		sd, swhich := single.(admit.CompositeLimiter).AllowNWhich(step.n)
		assert.Equal(t, d, sd, "step %d: the keyed store and the single key differ", i)
		assert.Equal(t, which, swhich, "step %d", i)
		if d.Allowed != step.allowed || which != step.which || d.Limit != step.limit {
			t.Errorf("step %d: AllowNWhich(k, %d) = %+v, %d; want allowed %v, which %d, limit %d", i, step.n, d, which, step.allowed, step.which, step.limit)
		}
	}
}

// TestLimitsLimiterDifferential: the single-key composite limiter, and key
// "a" of the keyed store, decide, reserve and cancel as the kernel with a
// kernel.CompositeHold does, over generated calls with the fake clock
// moving forwards and backwards (a stale reading is a call that read the
// clock before another's).
func TestLimitsLimiterDifferential(t *testing.T) {
	texts := []string{
		"token-bucket,3,1s + token-bucket,5,4s",
		"token-bucket,3,1500ms + token-bucket,7,10s + token-bucket,2,333ms",
		"fixed-window,3,1s + sliding-log,4,2s + sliding-counter,5,3s + token-bucket,2,1s",
	}
	rapid.Check(t, func(rt *rapid.T) {
		l := mustLimits(t, rapid.SampledFrom(texts).Draw(rt, "limits"))
		fake := clock.NewFake()
		fake.Set(time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, "start")))
		single, err := locked.NewLimitsLimiter(l, admit.WithClock(fake))
		require.NoError(rt, err)
		keyed, err := locked.NewLimits(l, admit.WithClock(fake))
		require.NoError(rt, err)
		k := kernel.NewComposite(l)
		state := make([]kernel.PartState, k.Len())
		var hold kernel.CompositeHold
		type made struct {
			single, keyed admit.Reservation
			ticket        uint64 // the kernel's
		}
		var reservations []made
		for i := range rapid.IntRange(1, 60).Draw(rt, "ops") {
			now := fake.Now()
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
			case op == 0:
				fake.Advance(time.Duration(rapid.Int64Range(0, int64(3*time.Second)).Draw(rt, "advance")))
			case op == 1:
				fake.Set(now - time.Duration(rapid.Int64Range(0, int64(time.Second)).Draw(rt, "back")))
			case op <= 4 && k.Reservable():
				n := rapid.IntRange(-1, l.Limit()+1).Draw(rt, "n")
				maxWait := time.Duration(rapid.SampledFrom([]int64{0, int64(time.Second), int64(admit.Never)}).Draw(rt, "maxWait"))
				d, ok, ticket := k.ReserveHold(state, &hold, now, n, maxWait)
				r, gotOK := single.(admit.Reserver).ReserveN(n, maxWait)
				kr, keyedOK := keyed.ReserveN("a", n, maxWait)
				if r.Delay != d || gotOK != ok || kr.Delay != d || keyedOK != ok {
					rt.Fatalf("%v op %d: ReserveN(t=%v, %d, %v) = %v, %v (keyed %v, %v), want %v, %v", l, i, now, n, maxWait, r.Delay, gotOK, kr.Delay, keyedOK, d, ok)
				}
				reservations = append(reservations, made{r, kr, ticket})
			case op <= 6 && k.Reservable() && len(reservations) > 0:
				m := reservations[len(reservations)-1]
				if rapid.Bool().Draw(rt, "older") {
					m = rapid.SampledFrom(reservations).Draw(rt, "reservation")
				}
				ok, drop := k.CancelHold(state, &hold, m.ticket, now)
				if drop {
					hold = kernel.CompositeHold{}
				}
				got := single.(admit.Reserver).CancelReservation(m.single)
				gotKeyed := keyed.CancelReservation("a", m.keyed)
				if got != ok || gotKeyed != ok {
					rt.Fatalf("%v op %d: CancelReservation(t=%v) = %v (keyed %v), want %v", l, i, now, got, gotKeyed, ok)
				}
			default:
				n := rapid.IntRange(-1, l.Limit()+1).Draw(rt, "n")
				want, wantWhich := k.Allow(state, now, n)
				if hold.Ticket != 0 && !k.Observe(&hold, state, now) {
					hold = kernel.CompositeHold{}
				}
				got, which := single.(admit.CompositeLimiter).AllowNWhich(n)
				gotKeyed, keyedWhich := keyed.AllowNWhich("a", n)
				if got != want || which != wantWhich || gotKeyed != want || keyedWhich != wantWhich {
					rt.Fatalf("%v op %d: AllowNWhich(t=%v, %d) = %+v, %d (keyed %+v, %d), want %+v, %d", l, i, now, n, got, which, gotKeyed, keyedWhich, want, wantWhich)
				}
			}
		}
	})
}

// TestLimitsLimiterCancel: a single-key reservation takes its tokens in
// every rule and its cancellation gives them back in every rule, at most
// once, and never once it was due at a reading the limiter has seen.
func TestLimitsLimiterCancel(t *testing.T) {
	fake := clock.NewFake()
	lim, err := locked.NewLimitsLimiter(mustLimits(t, "token-bucket,2,1s + token-bucket,3,6s"), admit.WithClock(fake))
	require.NoError(t, err)
	res := lim.(admit.Reserver)
	require.True(t, lim.AllowN(2).Allowed) // bucket 0 empty, bucket 1 holds 1
	r, ok := res.ReserveN(1, time.Hour)
	require.True(t, ok)
	assert.Equal(t, 500*time.Millisecond, r.Delay)
	assert.Equal(t, 0, lim.AllowN(0).Remaining, "bucket 1 paid too")
	assert.True(t, res.CancelReservation(r))
	assert.False(t, res.CancelReservation(r), "at most once")
	d := lim.AllowN(0)
	assert.Equal(t, 0, d.Remaining, "bucket 0 is empty again, as before the reservation")
	fake.Set(500 * time.Millisecond)
	assert.Equal(t, 1, lim.AllowN(0).Remaining, "bucket 1's token is back: bucket 0 binds with 1")

	r, ok = res.ReserveN(2, time.Hour) // bucket 1 binds: 1.5s to its second token
	require.True(t, ok)
	fake.Set(500*time.Millisecond + r.Delay)
	lim.AllowN(0) // the reservation is due at this reading
	fake.Set(600 * time.Millisecond)
	assert.False(t, res.CancelReservation(r), "it was due at a reading the limiter has seen")
}

// TestLimitsLimiterAllocs: a single-key composite decides without
// allocating.
func TestLimitsLimiterAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	fake := clock.NewFake()
	for _, text := range []string{"token-bucket,10,1s + fixed-window,1000,1h", "token-bucket,10,1s + token-bucket,1000,1h"} {
		lim, err := locked.NewLimitsLimiter(mustLimits(t, text), admit.WithClock(fake))
		require.NoError(t, err)
		lim.Allow()
		assert.Zero(t, testing.AllocsPerRun(100, func() {
			fake.Advance(100 * time.Millisecond)
			if !lim.Allow().Allowed {
				panic("every call is admitted")
			}
		}), text)
	}
}
