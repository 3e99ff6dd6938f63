package admit_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/sharded"
)

// keyedComposites are the keyed stores of composite limits, which reserve
// ahead when every rule is a token bucket.
var keyedComposites = []struct {
	name string
	new  func(admit.Limits, ...admit.Option) (admit.CompositeStore, error)
}{
	{"locked", locked.NewLimits},
	{"sharded", sharded.NewLimits},
	{"sharded-hashed", func(l admit.Limits, o ...admit.Option) (admit.CompositeStore, error) {
		return sharded.NewLimits(l, append(o, admit.WithHashedKeys())...)
	}},
}

func parseLimits(t *testing.T, text string) admit.Limits {
	t.Helper()
	l, err := admit.ParseLimits(text)
	require.NoError(t, err)
	return l
}

// TestWaitKeyPacesComposites: five waiters on one key of "a bucket of 2
// refilled a token a second, and a bucket of 3 refilled a token every 2s"
// proceed at 0, 0, 1s (the first bucket's slot), 2s (both buckets' slot)
// and 4s (the second bucket's slot): each waits for the slower of its
// rules, in its own slot, while another key is unaffected.
func TestWaitKeyPacesComposites(t *testing.T) {
	for _, tc := range keyedComposites {
		t.Run(tc.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T, clk admit.Option) {
				lim, err := tc.new(parseLimits(t, "token-bucket,2,2s + token-bucket,3,6s"), clk)
				require.NoError(t, err)
				times, errs := waitAll(context.Background(), func(ctx context.Context, n int) error {
					return admit.WaitKeyN(ctx, lim, "a", n)
				}, 1, 1, 1, 1, 1)
				for _, err := range errs {
					assert.NoError(t, err)
				}
				assert.Equal(t, []time.Duration{0, 0, time.Second, 2 * time.Second, 4 * time.Second}, times)

				start := time.Now()
				require.NoError(t, admit.WaitKeyN(context.Background(), lim, "b", 2))
				assert.Equal(t, time.Duration(0), time.Since(start), "key b has its own full buckets")
			})
		})
	}
}

// TestWaitKeyCompositeCancelGivesBack: a composite waiter cancelled before
// its slot gives its tokens back in every rule, so the next waiter gets
// that slot: at 1s, where a first bucket not given back would make it 2s
// and a second bucket not given back 5s.
func TestWaitKeyCompositeCancelGivesBack(t *testing.T) {
	for _, tc := range keyedComposites {
		t.Run(tc.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T, clk admit.Option) {
				lim, err := tc.new(parseLimits(t, "token-bucket,1,1s + token-bucket,2,10s"), clk)
				require.NoError(t, err)
				require.True(t, lim.Allow("k").Allowed) // bucket 0 empty, bucket 1 holds 1
				start := time.Now()
				ctx, cancel := context.WithCancel(context.Background())
				errc := make(chan error)
				go func() { errc <- admit.WaitKey(ctx, lim, "k") }() // reserves the slot at 1s in both buckets
				synctest.Wait()                                      // the waiter sleeps on its reservation
				cancel()
				assert.ErrorIs(t, <-errc, context.Canceled)
				require.NoError(t, admit.WaitKey(context.Background(), lim, "k"))
				assert.Equal(t, time.Second, time.Since(start), "the cancelled slot was given back in both buckets")
			})
		})
	}
}

// TestWaitKeyCompositePolls: a composite with a window reserves nothing
// ahead (its ReserveN refuses with the denial's RetryAfter); WaitKey sleeps
// that long and asks again, as it polls, and proceeds when every rule
// admits.
func TestWaitKeyCompositePolls(t *testing.T) {
	for _, tc := range keyedComposites {
		t.Run(tc.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T, clk admit.Option) {
				lim, err := tc.new(parseLimits(t, "token-bucket,2,1s + fixed-window,3,10s"), clk)
				require.NoError(t, err)
				start := time.Now()
				for range 4 {
					require.NoError(t, admit.WaitKey(context.Background(), lim, "k"))
				}
				// 0, 0, 500ms (the bucket), then 10s (the window's next).
				assert.Equal(t, 10*time.Second, time.Since(start))
			})
		})
	}
}
