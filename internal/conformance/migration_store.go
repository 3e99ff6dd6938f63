package conformance

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/kernel"
)

// The migration checks hold every store that moves keys (keyed.Mover) to
// the protocol of docs/design.md ("How a key moves"): keys taken from one
// store and put into another keep every decision, Take drops a key's hold,
// Put stores beyond the key bound rather than drop a state, Keys lists
// every key, the hooks are asked where and when the protocol says (Adopt
// and Redirect under no lock of the store's, Keep under the key's), and a
// call racing a move is neither lost nor counted twice.

// RunMigration runs the migration checks against the stores of v's New
// (one rule) and of c's NewLimits (composites; c may be nil for a variant
// without a keyed composite), whose limiters must be keyed.Movers.
// Limits a constructor refuses with admit.ErrUnsupported (the table's
// composites and sliding logs) are passed over; v.HashedKeys says whether
// the checks run with admit.WithHashedKeys too, and v.Store gives them the
// store's test hooks, of which they use Pause, Locked, Holds and CountIs
// where set.
func RunMigration(t *testing.T, v Variant, c *CompositeVariant) {
	m := movers{v, c}
	t.Run("TakePutRoundTrip", func(t *testing.T) { testTakePutRoundTrip(t, m) })
	t.Run("PutPastHorizon", func(t *testing.T) { testPutPastHorizon(t, m) })
	t.Run("TakeDropsHold", func(t *testing.T) { testTakeDropsHold(t, m) })
	t.Run("PutBeyondMaxKeys", func(t *testing.T) { testPutBeyondMaxKeys(t, m) })
	t.Run("Keys", func(t *testing.T) { testKeys(t, m) })
	t.Run("KeepRedirects", func(t *testing.T) { testKeepRedirects(t, m) })
	t.Run("KeepRedirectsReservations", func(t *testing.T) { testKeepRedirectsReservations(t, m) })
	t.Run("Adopt", func(t *testing.T) { testAdopt(t, m) })
	t.Run("KeepWithoutRedirect", func(t *testing.T) { testKeepWithoutRedirect(t, m) })
	t.Run("Hammer", func(t *testing.T) { testMoveHammer(t, m) })
}

// moveTexts are the limits the migration checks run over: a rule of each
// packing of the table's word (a token bucket in whole nanoseconds per
// token, in scaled units, one whose word has a horizon of ±10.7 days) and
// of the map store's (a token bucket whose states pack in a word, 4 per
// second, and one whose do not, 3 per second), every algorithm, and
// composites of every algorithm.
var moveTexts = []string{
	"token-bucket,10,1s",
	"token-bucket,7,7s",
	"token-bucket,9999,1s",
	"token-bucket,4,1s",
	"token-bucket,3,1s",
	"fixed-window,5,1s",
	"fixed-window,5,2s",
	"sliding-log,4,2s",
	"sliding-counter,7,1s",
	"sliding-counter,6,3s",
	"token-bucket,10,1s + fixed-window,1000,1h",
	"token-bucket,3,1s + token-bucket,5,4s",
	"fixed-window,3,1s + sliding-log,4,2s + sliding-counter,5,3s",
}

// mover is a store the migration checks move keys of.
type mover interface {
	Movable
	Len() int
	ReserveN(key string, n int, maxWait time.Duration) (admit.Reservation, bool)
	CancelReservation(key string, r admit.Reservation) bool
}

// movers builds a variant's stores for the migration checks.
type movers struct {
	v Variant
	c *CompositeVariant
}

// new returns the store of limits with opts, or nil if the variant refuses
// limits with admit.ErrUnsupported.
func (m movers) new(t require.TestingT, limits admit.Limits, opts ...admit.Option) mover {
	var lim admit.KeyedLimiter
	var err error
	switch {
	case limits.Len() == 1:
		lim, err = m.v.New(limits.At(0), opts...)
	case m.c == nil:
		return nil
	default:
		lim, err = m.c.NewLimits(limits, opts...)
	}
	if errors.Is(err, admit.ErrUnsupported) {
		return nil
	}
	require.NoError(t, err, "%s: new store of %v", m.v.Name, limits)
	s, ok := lim.(mover)
	require.True(t, ok, "%s: a %T (%v) is no keyed.Mover", m.v.Name, lim, limits)
	require.Equal(t, limits, s.Limits())
	return s
}

// taken returns the limits of texts the variant builds stores of, and
// fails t if it builds none.
func (m movers) taken(t *testing.T, texts []string) []admit.Limits {
	var out []admit.Limits
	for _, text := range texts {
		if l := mustLimits(t, text); m.new(t, l) != nil {
			out = append(out, l)
		}
	}
	require.NotEmpty(t, out, "%s: no store of any of %q", m.v.Name, texts)
	return out
}

// hashed returns the key forms the checks run with: full keys, and hashed
// keys if the variant has them.
func (m movers) hashed() []bool {
	if m.v.HashedKeys {
		return []bool{false, true}
	}
	return []bool{false}
}

// moveOpts returns the options of a store over clk, of hashed keys if hashed,
// with more.
func moveOpts(clk clock.Clock, hashed bool, more ...admit.Option) []admit.Option {
	o := append([]admit.Option{admit.WithClock(clk)}, more...)
	if hashed {
		o = append(o, admit.WithHashedKeys())
	}
	return o
}

// countIs reports whether lim counts n keys against its bound, or true
// when the variant has no CountIs hook in this build.
func (m movers) countIs(lim admit.KeyedLimiter, n int) bool {
	return m.v.Store == nil || m.v.Store.CountIs == nil || m.v.Store.CountIs(lim, n)
}

// longest returns the longest window of l's rules.
func longest(l admit.Limits) time.Duration {
	var w time.Duration
	for _, r := range l.Rules() {
		w = max(w, r.Window)
	}
	return w
}

// newMoveOracle returns the kernels' decisions for limits, one state per
// key that never moves, and the index of the rule that bound.
func newMoveOracle(limits admit.Limits) func(key string, now time.Duration, n int) (admit.Decision, int) {
	if limits.Len() == 1 {
		o := NewOracle(limits.At(0))
		return func(key string, now time.Duration, n int) (admit.Decision, int) { return o.Allow(key, now, n), 0 }
	}
	return NewCompositeOracle(limits).Allow
}

// testTakePutRoundTrip runs generated calls on a few keys (short and long:
// the table keeps them in its slots' words and out of them), on two stores
// of the same limits whose keys are taken and put, into the same store or
// the other, between calls: every decision and binding index is the
// kernels' on one state per key that never moves. In a near run the clock
// moves forwards and backwards within the limits' windows, and Take
// reports whether the key was held (a key is stored by its first
// admission), the stores hold exactly the keys held and count them against
// their bound; in a far run it jumps to readings days apart, past the
// table's packed horizon, where the stores may evict. Take of a key taken
// reports false, Put into a store without the key true, and Put into one
// that holds it false, leaving it as it was.
func testTakePutRoundTrip(t *testing.T, m movers) {
	const day = 24 * time.Hour
	farTimes := []time.Duration{0, time.Second, 10*day + 23*time.Hour, 11 * day, -11 * day}
	all := m.taken(t, moveTexts)
	keys := []string{"a", "bb", "a-long-key-past-fifteen-bytes"}
	moved := 0
	rapid.Check(t, func(rt *rapid.T) {
		limits := rapid.SampledFrom(all).Draw(rt, "limits")
		far := rapid.Bool().Draw(rt, "far")
		window := longest(limits)
		fake := clock.NewFake()
		o := moveOpts(fake, m.v.HashedKeys && rapid.Bool().Draw(rt, "hashed"),
			admit.WithShards(rapid.SampledFrom([]int{1, 2, 4}).Draw(rt, "shards")), admit.WithMaxKeys(1000))
		stores := [2]mover{m.new(rt, limits, o...), m.new(rt, limits, o...)}
		want := newMoveOracle(limits)
		where := map[string]int{} // the store that holds each key, or would insert it
		held := map[string]bool{}
		into := make([]kernel.PartState, limits.Len())
		for i := range rapid.IntRange(1, 60).Draw(rt, "ops") {
			key := rapid.SampledFrom(keys).Draw(rt, "key")
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
			case op == 0 && far:
				fake.Set(rapid.SampledFrom(farTimes).Draw(rt, "t") + time.Duration(rapid.IntRange(0, 5000).Draw(rt, "dt")))
			case op == 0:
				fake.Advance(time.Duration(rapid.Int64Range(0, int64(window)).Draw(rt, "advance")))
			case op == 1 && !far:
				fake.Set(fake.Now() - time.Duration(rapid.Int64Range(0, int64(window/2)).Draw(rt, "back")))
			case op <= 4:
				from, to := where[key], rapid.IntRange(0, 1).Draw(rt, "to")
				got := stores[from].Take(key, into)
				if !far && got != held[key] {
					rt.Fatalf("%v op %d: Take(%q) = %v, want %v", limits, i, key, got, held[key])
				}
				if stores[from].Take(key, into) {
					rt.Fatalf("%v op %d: Take(%q) again = true, want false", limits, i, key)
				}
				where[key] = to
				if !got {
					continue
				}
				if !stores[to].Put(key, into) {
					rt.Fatalf("%v op %d: Put(%q) into the store that does not hold it = false", limits, i, key)
				}
				if stores[to].Put(key, make([]kernel.PartState, limits.Len())) {
					rt.Fatalf("%v op %d: Put(%q) into the store that holds it = true", limits, i, key)
				}
				moved++
			default:
				n := rapid.IntRange(-1, min(limits.Limit(), 11)+1).Draw(rt, "n")
				expD, expW := want(key, fake.Now(), n)
				gotD, gotW := AllowWhich(stores[where[key]], key, n)
				if gotD != expD || gotW != expW {
					rt.Fatalf("%v op %d: AllowNWhich(t=%v, %q, %d) in store %d = %+v, %d; kernel %+v, %d", limits, i, fake.Now(), key, n, where[key], gotD, gotW, expD, expW)
				}
				held[key] = held[key] || (expD.Allowed && n > 0)
			}
			total := stores[0].Len() + stores[1].Len()
			if far {
				if total > len(keys) {
					rt.Fatalf("%v op %d: the stores hold %d keys, of %d", limits, i, total, len(keys))
				}
			} else if count := countTrue(held); total != count {
				rt.Fatalf("%v op %d: the stores hold %d keys, want %d", limits, i, total, count)
			}
			for j, s := range stores {
				if !m.countIs(s, s.Len()) {
					rt.Fatalf("%v op %d: store %d holds %d keys and counts another number", limits, i, j, s.Len())
				}
			}
		}
	})
	assert.Positive(t, moved, "no key was moved: the check proved nothing")
}

// countTrue returns how many values of m are true.
func countTrue(m map[string]bool) int {
	n := 0
	for _, v := range m {
		if v {
			n++
		}
	}
	return n
}

// testPutPastHorizon: a token bucket's state the store never made, decided
// 11 days in (past the horizon of the table's packed word, where the table
// keeps it in a held record, as its slow path does), put into a store, is
// decided as the kernel decides it, and Take gives it back unchanged.
func testPutPastHorizon(t *testing.T, m movers) {
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 9999, Window: time.Second}
	limits := mustLimits(t, rule.String())
	for _, hashed := range m.hashed() {
		fake := clock.NewFake()
		fake.Set(11 * 24 * time.Hour)
		b := m.new(t, limits, moveOpts(fake, hashed)...)
		require.NotNil(t, b, "%s: no store of %v", m.v.Name, rule)
		k := kernel.NewTokenBucket(rule)
		var s kernel.TokenBucketState
		for range 3 {
			k.Decide(&s, fake.Now(), 1)
		}
		_, fits := k.Pack(s)
		require.False(t, fits, "the state packs: not past the horizon")
		var buf [1]kernel.PartState
		buf[0].SetTB(s)
		require.True(t, b.Put("k", buf[:]))
		want := k.Decide(&s, fake.Now(), 2).Decision(rule.Limit)
		assert.Equal(t, want, b.AllowN("k", 2), "hashed %v", hashed)
		require.True(t, b.Take("k", buf[:]))
		assert.Equal(t, s, buf[0].TB(), "hashed %v: the state taken", hashed)
	}
}

// testTakeDropsHold: a reservation made before Take cannot be cancelled
// after it, in the store it was made in (even once the key is put back)
// or in the one the key moved to; its tokens stay taken in the state
// carried, and Take deletes the hold's record.
func testTakeDropsHold(t *testing.T, m movers) {
	for _, c := range []struct {
		text  string
		retry time.Duration // the RetryAfter after the move, when exact
	}{
		{"token-bucket,2,1s", time.Second}, // the reservation waits 500ms, the next token 1s
		{"token-bucket,4,1s", 0},
		{"token-bucket,3,1s", 0},
		{"token-bucket,3,1s + token-bucket,5,4s", 0},
	} {
		limits := mustLimits(t, c.text)
		for _, hashed := range m.hashed() {
			o := moveOpts(clock.NewFake(), hashed)
			a, b := m.new(t, limits, o...), m.new(t, limits, o...)
			if a == nil {
				continue
			}
			what := c.text + " hashed=" + strconv.FormatBool(hashed)
			require.True(t, a.AllowN("k", limits.Limit()).Allowed)
			r, ok := a.ReserveN("k", 1, time.Hour)
			require.True(t, ok)
			require.Positive(t, r.Delay, "%s: a reservation that waits", what)
			holds := func(lim admit.KeyedLimiter) int { return -1 }
			if m.v.Store != nil && m.v.Store.Holds != nil {
				holds = m.v.Store.Holds
				require.Equal(t, 1, holds(a), what)
			}
			into := make([]kernel.PartState, limits.Len())
			require.True(t, a.Take("k", into))
			if h := holds(a); h >= 0 {
				assert.Zero(t, h, "%s: Take deletes the hold's record", what)
			}
			assert.False(t, a.CancelReservation("k", r), "%s: the hold went with Take", what)
			require.True(t, b.Put("k", into))
			assert.False(t, b.CancelReservation("k", r), "%s: not in the store the key moved to", what)
			assert.Zero(t, a.Len(), what)
			assert.Equal(t, 1, b.Len(), what)
			d, _ := AllowWhich(b, "k", 1)
			assert.False(t, d.Allowed, "%s: the reservation's tokens are still taken", what)
			assert.Greater(t, d.RetryAfter, r.Delay, "%s: the next token is due after the reservation's", what)
			if c.retry != 0 {
				assert.Equal(t, c.retry, d.RetryAfter, what)
			}
			require.True(t, b.Take("k", into))
			require.True(t, a.Put("k", into))
			assert.False(t, a.CancelReservation("k", r), "%s: not after the key came back", what)
		}
	}
}

// testPutBeyondMaxKeys: Take uncounts its key, so the store has room for a
// new one; Put stores a key in a full store rather than drop its state,
// counting it beyond the bound, and new keys are then denied until
// evictions bring the count back under it.
func testPutBeyondMaxKeys(t *testing.T, m movers) {
	limits := mustLimits(t, "fixed-window,1,1h")
	fake := clock.NewFake()
	o := moveOpts(fake, false, admit.WithShards(1), admit.WithMaxKeys(1))
	a, b := m.new(t, limits, o...), m.new(t, limits, o...)
	require.NotNil(t, a, "%s: no store of %v", m.v.Name, limits)
	require.True(t, a.Allow("a").Allowed)
	require.True(t, b.Allow("b").Allowed)
	assert.False(t, a.Allow("c").Allowed, "a full store")
	into := make([]kernel.PartState, 1)
	require.True(t, a.Take("a", into))
	assert.True(t, a.Allow("c").Allowed, "Take made room")
	require.True(t, b.Put("a", into))
	assert.Equal(t, 2, b.Len(), "stored beyond the bound")
	assert.True(t, m.countIs(b, 2), "counted beyond the bound")
	assert.False(t, b.Allow("a").Allowed, "the carried state: a spent window")
	assert.False(t, b.Allow("d").Allowed, "over the bound: no new key")
	fake.Set(2 * time.Hour) // a and b are fresh
	assert.True(t, b.Allow("d").Allowed, "room made by evicting fresh keys")
	assert.True(t, m.countIs(b, b.Len()))
}

// trickyKeys are keys whose slot words in the table are easy to confuse:
// the empty key, keys that differ only by a trailing zero byte or by
// length, keys at the 15/16-byte boundary between inline and out-of-line,
// and long keys that share a prefix.
func trickyKeys() []string {
	keys := []string{"", "\x00", "\x00\x00", "a", "a\x00", "ab", "abcdefgh", "abcdefgh\x00"}
	for _, n := range []int{7, 8, 9, 14, 15, 16, 17, 31, 64, 200} {
		keys = append(keys, strings.Repeat("k", n), strings.Repeat("k", n-1)+"x")
	}
	return append(keys, strings.Repeat("\xff", 15), strings.Repeat("\xff", 16))
}

// testKeys: Keys yields every key the store holds exactly once, the tricky
// ones among them, through the table's rebuilds, in one shard and across
// many, and no key taken; it stops when yield returns false; yield may
// Take the key it is given. A store of hashed keys returns false and
// yields nothing.
func testKeys(t *testing.T, m movers) {
	texts := []string{"fixed-window,2,1h", "sliding-log,2,1s", "token-bucket,4,1s", "token-bucket,10,1s + fixed-window,1000,1h"}
	for _, limits := range m.taken(t, texts) {
		for _, shards := range []int{1, 16} {
			what := limits.String() + " shards=" + strconv.Itoa(shards)
			lim := m.new(t, limits, moveOpts(clock.NewFake(), false, admit.WithShards(shards))...)
			keys := trickyKeys()
			for i := range 500 {
				keys = append(keys, "user-"+strconv.Itoa(i))
			}
			for _, k := range keys {
				require.True(t, lim.Allow(k).Allowed, "%s: %q", what, k)
			}
			into := make([]kernel.PartState, limits.Len())
			kept := len(keys) - 10
			for _, k := range keys[kept:] {
				require.True(t, lim.Take(k, into), "%s: %q", what, k)
			}
			var got []string
			require.True(t, lim.Keys(func(k string) bool { got = append(got, k); return true }))
			want := slices.Clone(keys[:kept])
			slices.Sort(want)
			slices.Sort(got)
			assert.Equal(t, want, got, what)

			calls := 0
			require.True(t, lim.Keys(func(string) bool { calls++; return calls < 3 }))
			assert.Equal(t, 3, calls, "%s: yield returned false", what)

			taken := 0
			require.True(t, lim.Keys(func(k string) bool {
				if lim.Take(k, into) {
					taken++
				}
				return true
			}))
			assert.Equal(t, kept, taken, what)
			assert.Zero(t, lim.Len(), what)
		}
		if m.v.HashedKeys {
			hashed := m.new(t, limits, moveOpts(clock.NewFake(), true)...)
			require.True(t, hashed.Allow("k").Allowed)
			assert.False(t, hashed.Keys(func(string) bool { t.Error("a key yielded by a store of hashed keys"); return true }), limits.String())
		}
	}
}
