package sharded_test

import (
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/internal/mapstore"
	"github.com/admit-go/admit/sharded"
)

// compositeVariants are NewLimits with full keys and with hashed keys, by
// the keys they store.
var compositeVariants = []struct {
	keys string
	v    conformance.CompositeVariant
}{
	{"full", conformance.CompositeVariant{
		Name:      "sharded",
		NewLimits: conformance.KeyedLimits(sharded.NewLimits),
		Supports:  func(admit.Algorithm) bool { return true },
	}},
	{"hashed", conformance.CompositeVariant{
		Name: "sharded-hashed",
		NewLimits: func(l admit.Limits, opts ...admit.Option) (admit.KeyedLimiter, error) {
			return sharded.NewLimits(l, append(opts, admit.WithHashedKeys())...)
		},
		Supports: func(admit.Algorithm) bool { return true },
	}},
}

// TestCompositeConformance runs the composite suite, its Stats checks and
// CompositeHeldMemoryReturns against compositeVariants.
func TestCompositeConformance(t *testing.T) {
	for _, c := range compositeVariants {
		t.Run("keys="+c.keys, func(t *testing.T) {
			conformance.RunComposite(t, c.v)
			t.Run("Stats", func(t *testing.T) { conformance.RunCompositeStats(t, c.v) })
			t.Run("HeldMemoryReturns", func(t *testing.T) { conformance.CompositeHeldMemoryReturns(t, c.v) })
		})
	}
}

func mustLimits(t testing.TB, text string) admit.Limits {
	t.Helper()
	l, err := admit.ParseLimits(text)
	require.NoError(t, err)
	return l
}

// TestLimitsOfOneRule: a Limits of one rule gets exactly what New returns
// for the rule, with every option.
func TestLimitsOfOneRule(t *testing.T) {
	for _, text := range []string{"token-bucket,3,1s", "fixed-window,3,1s", "sliding-log,3,1s", "sliding-counter,3,1s"} {
		for _, hashed := range []bool{false, true} {
			l := mustLimits(t, text)
			fake := clock.NewFake()
			opts := []admit.Option{admit.WithClock(fake), admit.WithShards(2), admit.WithMaxKeys(5)}
			if hashed {
				opts = append(opts, admit.WithHashedKeys())
			}
			keyed, err := sharded.NewLimits(l, opts...)
			require.NoError(t, err)
			plain, err := sharded.New(l.At(0), opts...)
			require.NoError(t, err)
			assert.Equal(t, reflect.TypeOf(plain), reflect.TypeOf(keyed), text)
			assert.Implements(t, (*admit.Store)(nil), keyed, text)
			for range 4 {
				assert.Equal(t, plain.AllowN("k", 2), keyed.AllowN("k", 2), text)
				fake.Advance(300 * time.Millisecond)
			}
		}
	}
}

// TestLimitsOptions: every option is honoured for a composite: the clock,
// the bound on keys (a full store denies a new key with the smallest Limit
// and the index of its rule), hashed keys (keys still apart), the shards;
// and bad input is an error wrapping the right sentinel.
func TestLimitsOptions(t *testing.T) {
	l := mustLimits(t, "token-bucket,10,1s + fixed-window,3,1h")
	for _, hashed := range []bool{false, true} {
		fake := clock.NewFake()
		opts := []admit.Option{admit.WithClock(fake), admit.WithShards(1), admit.WithMaxKeys(2)}
		if hashed {
			opts = append(opts, admit.WithHashedKeys())
		}
		lim, err := sharded.NewLimits(l, opts...)
		require.NoError(t, err)
		cs := lim
		require.True(t, lim.AllowN("a", 3).Allowed)
		require.True(t, lim.Allow("b").Allowed)
		d, which := cs.AllowNWhich("c", 1)
		assert.False(t, d.Allowed, "hashed %v: the store is full", hashed)
		assert.Equal(t, 3, d.Limit)
		assert.Equal(t, 1, which)
		assert.Equal(t, 2, cs.Len())
		d, which = cs.AllowNWhich("a", 1)
		assert.False(t, d.Allowed, "hashed %v: a spent its window", hashed)
		assert.Equal(t, 1, which)
		assert.Equal(t, time.Hour, d.RetryAfter, "the fake clock has not moved")
		fake.Set(time.Hour + time.Second) // every key is fresh
		assert.True(t, lim.Allow("c").Allowed, "hashed %v: room is made by evicting a fresh key", hashed)
		cs.Sweep()
		assert.Equal(t, 1, cs.Len(), "hashed %v: c stays, a and b go", hashed)
	}

	for _, c := range []struct {
		name   string
		limits admit.Limits
		opts   []admit.Option
		want   error
	}{
		{"zero Limits", admit.Limits{}, nil, admit.ErrInvalidRule},
		{"nil clock", l, []admit.Option{admit.WithClock(nil)}, admit.ErrInvalidOption},
		{"3 shards", l, []admit.Option{admit.WithShards(3)}, admit.ErrInvalidOption},
		{"0 keys", l, []admit.Option{admit.WithMaxKeys(0)}, admit.ErrInvalidOption},
	} {
		lim, err := sharded.NewLimits(c.limits, c.opts...)
		assert.ErrorIs(t, err, c.want, c.name)
		assert.Nil(t, lim, c.name)
	}
}

// TestLimitsEvictAt: with one shard or many, a forced eviction evicts no key
// whose rules are not all fresh, and every key once they are.
func TestLimitsEvictAt(t *testing.T) {
	fake := clock.NewFake()
	for _, shards := range []int{1, 64} {
		lim, err := sharded.NewLimits(mustLimits(t, "token-bucket,2,1s + sliding-log,2,1s"), admit.WithClock(fake), admit.WithShards(shards))
		require.NoError(t, err)
		for i := range 200 {
			require.True(t, lim.Allow("user-"+strconv.Itoa(i)).Allowed)
		}
		assert.Zero(t, mapstore.EvictAt(lim, fake.Now()), "no key is fresh yet")
		assert.Equal(t, 200, mapstore.EvictAt(lim, fake.Now()+time.Second), "every key is fresh a window later")
	}
}

// TestLimitsReservations: a composite of token buckets reserves ahead: its
// reservations wait for the slowest rule, and their cancellation gives back
// in every rule, only on its key, with full and hashed keys; any other
// composite reserves nothing ahead.
func TestLimitsReservations(t *testing.T) {
	for _, hashed := range []bool{false, true} {
		fake := clock.NewFake()
		opts := []admit.Option{admit.WithClock(fake)}
		if hashed {
			opts = append(opts, admit.WithHashedKeys())
		}
		lim, err := sharded.NewLimits(mustLimits(t, "token-bucket,2,1s + token-bucket,3,6s"), opts...)
		require.NoError(t, err)
		res := lim
		require.True(t, lim.AllowN("a", 2).Allowed) // bucket 0 empty, bucket 1 holds 1
		require.True(t, lim.AllowN("b", 2).Allowed)
		r, ok := res.ReserveN("a", 2, time.Hour)
		require.True(t, ok)
		assert.Equal(t, 2*time.Second, r.Delay, "bucket 1 binds: its second token is 2s away")
		assert.False(t, res.CancelReservation("b", r), "hashed %v: not on another key", hashed)
		assert.True(t, res.CancelReservation("a", r))
		assert.False(t, res.CancelReservation("a", r), "at most once")
		fake.Set(500 * time.Millisecond)
		d, which := lim.AllowNWhich("a", 1)
		assert.True(t, d.Allowed, "hashed %v: both buckets have their tokens back", hashed)
		assert.Equal(t, 0, which)
		d, which = lim.AllowNWhich("b", 1)
		assert.True(t, d.Allowed, "hashed %v: b is untouched", hashed)
		assert.Equal(t, 0, d.Remaining)
		assert.Equal(t, 0, which)

		other, err := sharded.NewLimits(mustLimits(t, "token-bucket,2,1s + fixed-window,3,6s"), opts...)
		require.NoError(t, err)
		require.True(t, other.AllowN("a", 2).Allowed)
		denied := other.Allow("a")
		r, ok = other.ReserveN("a", 1, time.Hour)
		assert.False(t, ok, "a fixed window reserves nothing ahead")
		assert.Equal(t, denied.RetryAfter, r.Delay)
	}
}

// TestLimitsAgainstKernel: several keys of a composite of every algorithm,
// with full and hashed keys, decide as the kernel on a state per key, with
// the clock moving and Sweep evicting the fresh keys in between.
func TestLimitsAgainstKernel(t *testing.T) {
	l := mustLimits(t, "token-bucket,4,1s + fixed-window,6,3s + sliding-log,5,2s + sliding-counter,7,4s")
	for _, hashed := range []bool{false, true} {
		fake := clock.NewFake()
		opts := []admit.Option{admit.WithClock(fake), admit.WithShards(2)}
		if hashed {
			opts = append(opts, admit.WithHashedKeys())
		}
		lim, err := sharded.NewLimits(l, opts...)
		require.NoError(t, err)
		cs := lim
		oracle := conformance.NewCompositeOracle(l)
		swept := 0
		for i := range 3000 {
			key := "k" + strconv.Itoa(i*7%5)
			n := i * 13 % 6
			want, wantWhich := oracle.Allow(key, fake.Now(), n)
			got, which := cs.AllowNWhich(key, n)
			if got != want || which != wantWhich {
				t.Fatalf("hashed %v, call %d: AllowNWhich(t=%v, %q, %d) = %+v, %d; want %+v, %d", hashed, i, fake.Now(), key, n, got, which, want, wantWhich)
			}
			fake.Advance(time.Duration(i*7919%1000) * time.Millisecond)
			if i%100 == 99 { // a lull: the keys become idle
				fake.Advance(10 * time.Second)
				swept += cs.Sweep()
			}
		}
		assert.Positive(t, swept, "hashed %v: no key was ever idle: the check proved nothing", hashed)
	}
}
