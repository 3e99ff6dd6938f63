package admit_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/locked"
)

// The Wait tests run inside synctest bubbles: time there is fake and moves
// only when every goroutine in the bubble is blocked, so waits are exact and
// take no real time. The limiters read the bubble's time through bubbleClock.

type bubbleClock struct{ start time.Time }

func (c bubbleClock) Now() time.Duration { return time.Since(c.start) }

func inBubble(t *testing.T, f func(t *testing.T, clock admit.Option)) {
	synctest.Test(t, func(t *testing.T) {
		defer admit.UseFreshTimers()()
		f(t, admit.WithClock(bubbleClock{time.Now()}))
	})
}

func rule(alg admit.Algorithm, limit int, window time.Duration) admit.Rule {
	return admit.Rule{Algorithm: alg, Limit: limit, Window: window}
}

// waitAll starts one waiter per n in ns, all at the same instant, and returns
// the bubble times at which each returned (sorted) and their errors.
func waitAll(ctx context.Context, wait func(context.Context, int) error, ns ...int) ([]time.Duration, []error) {
	start := time.Now()
	var (
		mu    sync.Mutex
		times []time.Duration
		errs  []error
		wg    sync.WaitGroup
	)
	for _, n := range ns {
		wg.Go(func() {
			err := wait(ctx, n)
			mu.Lock()
			times = append(times, time.Since(start))
			errs = append(errs, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(times)
	return times, errs
}

// TestWaitPacesTokenBuckets: five waiters on a bucket of 2 refilled one token
// a second proceed at 0, 0, 1s, 2s, 3s, each in its own slot, for both
// lock-free forms and the mutex variant.
func TestWaitPacesTokenBuckets(t *testing.T) {
	for _, tc := range []struct {
		name string
		new  func(admit.Rule, ...admit.Option) (admit.Limiter, error)
	}{
		{"atomic", admitatomic.NewLimiter},
		{"locked", locked.NewLimiter},
		{"atomic-snapshot", func(r admit.Rule, o ...admit.Option) (admit.Limiter, error) {
			return admitatomic.NewTokenBucketSnapshot(r, o...)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T, clk admit.Option) {
				lim, err := tc.new(rule(admit.TokenBucket, 2, 2*time.Second), clk)
				require.NoError(t, err)
				_, isReserver := lim.(admit.Reserver)
				require.True(t, isReserver)
				times, errs := waitAll(context.Background(), func(ctx context.Context, n int) error { return admit.WaitN(ctx, lim, n) }, 1, 1, 1, 1, 1)
				for _, err := range errs {
					assert.NoError(t, err)
				}
				s := time.Second
				assert.Equal(t, []time.Duration{0, 0, s, 2 * s, 3 * s}, times)
			})
		})
	}
}

// TestWaitPollsWindows: the windows have no reservations; waiters sleep for
// RetryAfter and try again. With one slot per window, three waiters proceed
// at 0, 1s and 2s.
func TestWaitPollsWindows(t *testing.T) {
	for _, tc := range []struct {
		name string
		new  func(admit.Rule, ...admit.Option) (admit.Limiter, error)
		alg  admit.Algorithm
	}{
		{"atomic/fixed-window", admitatomic.NewLimiter, admit.FixedWindow},
		{"locked/sliding-log", locked.NewLimiter, admit.SlidingLog},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T, clk admit.Option) {
				lim, err := tc.new(rule(tc.alg, 1, time.Second), clk)
				require.NoError(t, err)
				times, errs := waitAll(context.Background(), func(ctx context.Context, n int) error { return admit.WaitN(ctx, lim, n) }, 1, 1, 1)
				for _, err := range errs {
					assert.NoError(t, err)
				}
				assert.Equal(t, []time.Duration{0, time.Second, 2 * time.Second}, times)
			})
		})
	}
}

// TestWaitRefusesAtOnce: a done context, n above the limit, and a deadline
// shorter than the wait all return at once, consuming nothing.
func TestWaitRefusesAtOnce(t *testing.T) {
	inBubble(t, func(t *testing.T, clk admit.Option) {
		lim, err := admitatomic.NewLimiter(rule(admit.TokenBucket, 2, 2*time.Second), clk)
		require.NoError(t, err)
		remaining := func() int { return lim.AllowN(0).Remaining }
		start := time.Now()

		done, cancel := context.WithCancel(context.Background())
		cancel()
		assert.ErrorIs(t, admit.Wait(done, lim), context.Canceled)

		err = admit.WaitN(context.Background(), lim, 3)
		assert.ErrorIs(t, err, admit.ErrExceedsLimit)

		require.NoError(t, admit.WaitN(context.Background(), lim, 2)) // empty the bucket
		short, cancelShort := context.WithTimeout(context.Background(), 999*time.Millisecond)
		defer cancelShort()
		err = admit.Wait(short, lim)
		assert.ErrorIs(t, err, admit.ErrWouldExceedDeadline, "the next token is 1s away")
		assert.Equal(t, time.Duration(0), time.Since(start), "every refusal was immediate")
		assert.Equal(t, 0, remaining())

		enough, cancelEnough := context.WithTimeout(context.Background(), time.Second)
		defer cancelEnough()
		assert.NoError(t, admit.Wait(enough, lim), "nothing was consumed by the refusals: the token is due at 1s")
		assert.Equal(t, time.Second, time.Since(start))
	})
}

// TestWaitCancelGivesBack: a waiter cancelled before its slot gives its token
// back, so the next waiter gets that slot, not the one after.
func TestWaitCancelGivesBack(t *testing.T) {
	inBubble(t, func(t *testing.T, clk admit.Option) {
		lim, err := admitatomic.NewLimiter(rule(admit.TokenBucket, 1, time.Second), clk)
		require.NoError(t, err)
		require.True(t, lim.Allow().Allowed)
		start := time.Now()
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error)
		go func() { errc <- admit.Wait(ctx, lim) }() // reserves the slot at 1s
		time.Sleep(500 * time.Millisecond)
		cancel()
		assert.ErrorIs(t, <-errc, context.Canceled)
		require.NoError(t, admit.Wait(context.Background(), lim))
		assert.Equal(t, time.Second, time.Since(start), "the cancelled slot at 1s was given back")
	})
}

// TestWaitKey waits on one key of a keyed limiter; other keys are unaffected.
func TestWaitKey(t *testing.T) {
	inBubble(t, func(t *testing.T, clk admit.Option) {
		lim, err := admitatomic.New(rule(admit.TokenBucket, 1, time.Second), clk)
		require.NoError(t, err)
		start := time.Now()
		require.NoError(t, admit.WaitKey(context.Background(), lim, "a"))
		require.NoError(t, admit.WaitKey(context.Background(), lim, "b"))
		assert.Equal(t, time.Duration(0), time.Since(start))
		require.NoError(t, admit.WaitKey(context.Background(), lim, "a"))
		assert.Equal(t, time.Second, time.Since(start))
		assert.ErrorIs(t, admit.WaitKeyN(context.Background(), lim, "a", 2), admit.ErrExceedsLimit)
	})
}

// TestWaitAllocs: a wait that needs no sleep allocates nothing.
func TestWaitAllocs(t *testing.T) {
	lim, err := admitatomic.NewLimiter(rule(admit.TokenBucket, 1_000_000, time.Millisecond))
	require.NoError(t, err)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		if err := admit.Wait(ctx, lim); err != nil {
			panic(err)
		}
	})
	assert.Zero(t, allocs)
}
