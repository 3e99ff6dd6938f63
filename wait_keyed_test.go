package admit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/sharded"
)

// keyedBuckets are the keyed token buckets of the three stores, whose
// ReserveN reserves ahead. The tests that use a window of 2s+1ns (an
// emission interval of 1s+0.5ns, which does not pack into one word) exercise
// the atomic store's snapshot cells and the sharded store's full states.
var keyedBuckets = []struct {
	name string
	new  func(admit.Rule, ...admit.Option) (admit.Store, error)
}{
	{"locked", locked.New},
	{"sharded", sharded.New},
	{"sharded-hashed", func(r admit.Rule, o ...admit.Option) (admit.Store, error) {
		return sharded.New(r, append(o, admit.WithHashedKeys())...)
	}},
	{"atomic", admitatomic.New},
}

// TestWaitKeyPacesTokenBuckets: five waiters on one key of a bucket of 2
// refilled one token a second proceed at 0, 0, 1s, 2s, 3s, each in its own
// slot, while another key is unaffected.
func TestWaitKeyPacesTokenBuckets(t *testing.T) {
	for _, tc := range keyedBuckets {
		for _, window := range []time.Duration{2 * time.Second, 2*time.Second + 1} {
			t.Run(tc.name+"/"+window.String(), func(t *testing.T) {
				inBubble(t, func(t *testing.T, clk admit.Option) {
					lim, err := tc.new(rule(admit.TokenBucket, 2, window), clk)
					require.NoError(t, err)
					times, errs := waitAll(context.Background(), func(ctx context.Context, n int) error {
						return admit.WaitKeyN(ctx, lim, "a", n)
					}, 1, 1, 1, 1, 1)
					for _, err := range errs {
						assert.NoError(t, err)
					}
					// The k-th slot after the bucket's two tokens is due at
					// the ceiling of k emission intervals, k×window/2.
					slot := func(k time.Duration) time.Duration { return (k*window + 1) / 2 }
					assert.Equal(t, []time.Duration{0, 0, slot(1), slot(2), slot(3)}, times)
					if window == 2*time.Second {
						assert.Equal(t, []time.Duration{0, 0, time.Second, 2 * time.Second, 3 * time.Second}, times)
					}

					start := time.Now()
					require.NoError(t, admit.WaitKeyN(context.Background(), lim, "b", 2))
					assert.Equal(t, time.Duration(0), time.Since(start), "key b has its own full bucket")
				})
			})
		}
	}
}

// TestWaitKeyCancelGivesBack: a keyed waiter cancelled before its slot gives
// its token back, so the next waiter gets that slot, not the one after.
func TestWaitKeyCancelGivesBack(t *testing.T) {
	for _, tc := range keyedBuckets {
		t.Run(tc.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T, clk admit.Option) {
				lim, err := tc.new(rule(admit.TokenBucket, 1, time.Second), clk)
				require.NoError(t, err)
				require.True(t, lim.Allow("k").Allowed)
				start := time.Now()
				ctx, cancel := context.WithCancel(context.Background())
				errc := make(chan error)
				go func() { errc <- admit.WaitKey(ctx, lim, "k") }() // reserves the slot at 1s
				time.Sleep(500 * time.Millisecond)
				cancel()
				assert.ErrorIs(t, <-errc, context.Canceled)
				require.NoError(t, admit.WaitKey(context.Background(), lim, "k"))
				assert.Equal(t, time.Second, time.Since(start), "the cancelled slot at 1s was given back")
			})
		})
	}
}

// TestWaitKeyRefusesAtOnce: n above the limit and a deadline shorter than the
// wait refuse at once, consuming nothing, whether the key is stored or not.
func TestWaitKeyRefusesAtOnce(t *testing.T) {
	for _, tc := range keyedBuckets {
		t.Run(tc.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T, clk admit.Option) {
				lim, err := tc.new(rule(admit.TokenBucket, 2, 2*time.Second), clk)
				require.NoError(t, err)
				store := lim.(interface{ Len() int })
				start := time.Now()

				assert.ErrorIs(t, admit.WaitKeyN(context.Background(), lim, "new", 3), admit.ErrExceedsLimit)
				assert.Zero(t, store.Len(), "a refused reservation stores no key")

				require.NoError(t, admit.WaitKeyN(context.Background(), lim, "k", 2)) // empty k's bucket
				assert.ErrorIs(t, admit.WaitKeyN(context.Background(), lim, "k", 3), admit.ErrExceedsLimit)
				short, cancelShort := context.WithTimeout(context.Background(), 999*time.Millisecond)
				defer cancelShort()
				assert.ErrorIs(t, admit.WaitKey(short, lim, "k"), admit.ErrWouldExceedDeadline, "the next token is 1s away")
				assert.Equal(t, time.Duration(0), time.Since(start), "every refusal was immediate")
				assert.Equal(t, 0, lim.AllowN("k", 0).Remaining)
				assert.Equal(t, 1, store.Len())

				enough, cancelEnough := context.WithTimeout(context.Background(), time.Second)
				defer cancelEnough()
				assert.NoError(t, admit.WaitKey(enough, lim, "k"), "nothing was consumed by the refusals: the token is due at 1s")
				assert.Equal(t, time.Second, time.Since(start))
			})
		})
	}
}

// TestKeyedReserveFullStore: in a full store whose keys are all in debt, a
// reservation on a new key is refused like Allow, with the same wait, and
// stores nothing.
func TestKeyedReserveFullStore(t *testing.T) {
	for _, tc := range keyedBuckets {
		t.Run(tc.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T, clk admit.Option) {
				lim, err := tc.new(rule(admit.TokenBucket, 2, 2*time.Second), clk, admit.WithMaxKeys(1), admit.WithShards(1))
				require.NoError(t, err)
				kr := lim
				r, ok := kr.ReserveN("a", 2, 0)
				require.True(t, ok)
				assert.Equal(t, time.Duration(0), r.Delay)
				r, ok = kr.ReserveN("a", 1, time.Second)
				require.True(t, ok)
				assert.Equal(t, time.Second, r.Delay)

				d := lim.AllowN("b", 0) // a probe needs no room
				assert.True(t, d.Allowed)
				denied := lim.Allow("b")
				require.False(t, denied.Allowed)
				r, ok = kr.ReserveN("b", 1, time.Hour)
				assert.False(t, ok)
				assert.Equal(t, denied.RetryAfter, r.Delay)
				assert.Equal(t, 1, lim.Len())
				assert.False(t, kr.CancelReservation("b", r), "nothing to give back")

				short, cancel := context.WithTimeout(context.Background(), denied.RetryAfter/2)
				defer cancel()
				assert.ErrorIs(t, admit.WaitKey(short, lim, "b"), admit.ErrWouldExceedDeadline, "room appears after the deadline")
				start := time.Now()
				require.NoError(t, admit.WaitKey(context.Background(), lim, "b"), "a waiter for a new key sleeps until room may appear and asks again")
				assert.GreaterOrEqual(t, time.Since(start), denied.RetryAfter)
				assert.Equal(t, 1, lim.Len(), "a made room for b")
			})
		})
	}
}

// TestKeyedReserveWindows: a window's store reserves nothing ahead. Its
// ReserveN admits n now when AllowN would (Delay 0, true, charged as an
// admission), and otherwise takes nothing and reports the denial's
// RetryAfter as the Delay, with false, whatever maxWait; cancelling either
// gives nothing back.
func TestKeyedReserveWindows(t *testing.T) {
	stores := []struct {
		name string
		new  func(admit.Rule, ...admit.Option) (admit.Store, error)
	}{{"locked", locked.New}, {"sharded", sharded.New}, {"atomic", admitatomic.New}}
	for _, alg := range []admit.Algorithm{admit.FixedWindow, admit.SlidingCounter, admit.SlidingLog} {
		for _, tc := range stores {
			fake := clock.NewFake()
			lim, err := tc.new(rule(alg, 2, time.Second), admit.WithClock(fake))
			if alg == admit.SlidingLog && tc.name == "atomic" {
				require.ErrorIs(t, err, admit.ErrUnsupported)
				continue
			}
			require.NoError(t, err, "%s %v", tc.name, alg)
			r, ok := lim.ReserveN("a", 1, time.Hour)
			require.True(t, ok, "%s %v: ReserveN of a fresh key", tc.name, alg)
			assert.Equal(t, time.Duration(0), r.Delay, "%s %v", tc.name, alg)
			assert.False(t, lim.CancelReservation("a", r), "%s %v: an admission is not given back", tc.name, alg)
			d := lim.AllowN("a", 0)
			assert.Equal(t, 1, d.Remaining, "%s %v: ReserveN charged its admission", tc.name, alg)
			require.True(t, lim.Allow("a").Allowed)
			denied := lim.AllowN("a", 1)
			require.False(t, denied.Allowed)
			r, ok = lim.ReserveN("a", 1, time.Hour)
			assert.False(t, ok, "%s %v: a window reserves nothing ahead", tc.name, alg)
			assert.Equal(t, denied.RetryAfter, r.Delay, "%s %v: the Delay of a refusal is the denial's RetryAfter", tc.name, alg)
			assert.False(t, lim.CancelReservation("a", r), "%s %v", tc.name, alg)
			assert.Equal(t, denied, lim.AllowN("a", 1), "%s %v: the refusal took nothing", tc.name, alg)
		}
	}
}

// TestWaitDeadlineExactlyEnough: a wait that ends exactly at the context's
// deadline is taken and admitted at that instant, on every path: a token
// bucket's reservation, a window's polling, and a new key's wait for room
// in a full store; one nanosecond less is refused at once, consuming
// nothing.
func TestWaitDeadlineExactlyEnough(t *testing.T) {
	type waiter struct {
		name  string
		build func(clk admit.Option) (wait func(context.Context) error, probe func() int, need time.Duration)
	}
	waiters := []waiter{
		{"reservation", func(clk admit.Option) (func(context.Context) error, func() int, time.Duration) {
			lim, err := admitatomic.NewLimiter(rule(admit.TokenBucket, 1, time.Second), clk)
			if err != nil {
				panic(err)
			}
			lim.Allow()
			return func(ctx context.Context) error { return admit.Wait(ctx, lim) }, func() int { return lim.AllowN(0).Remaining }, time.Second
		}},
		{"polling", func(clk admit.Option) (func(context.Context) error, func() int, time.Duration) {
			lim, err := locked.NewLimiter(rule(admit.FixedWindow, 1, time.Second), clk)
			if err != nil {
				panic(err)
			}
			need := lim.Allow().ResetAfter // the window's end
			return func(ctx context.Context) error { return admit.Wait(ctx, lim) }, func() int { return lim.AllowN(0).Remaining }, need
		}},
		{"full store", func(clk admit.Option) (func(context.Context) error, func() int, time.Duration) {
			lim, err := locked.New(rule(admit.TokenBucket, 2, 2*time.Second), clk, admit.WithMaxKeys(1), admit.WithShards(1))
			if err != nil {
				panic(err)
			}
			lim.AllowN("a", 2)
			need := lim.Allow("b").RetryAfter // when room may appear
			return func(ctx context.Context) error { return admit.WaitKey(ctx, lim, "b") }, func() int { return lim.AllowN("b", 0).Remaining }, need
		}},
	}
	for _, w := range waiters {
		t.Run(w.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T, clk admit.Option) {
				wait, probe, need := w.build(clk)
				require.Positive(t, need)
				before := probe()
				short, cancelShort := context.WithTimeout(context.Background(), need-1)
				defer cancelShort()
				start := time.Now()
				assert.ErrorIs(t, wait(short), admit.ErrWouldExceedDeadline)
				assert.Zero(t, time.Since(start), "refused at once")
				assert.Equal(t, before, probe(), "consuming nothing")
				exact, cancelExact := context.WithTimeout(context.Background(), need)
				defer cancelExact()
				assert.NoError(t, wait(exact), "a wait of exactly the time left is taken")
				assert.Equal(t, need, time.Since(start))
			})
		})
	}
}
