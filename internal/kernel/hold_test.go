package kernel

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
)

// holdKey is one key of a limiter that keeps a hold, as the variants do.
type holdKey struct {
	k *TokenBucket
	s TokenBucketState
	h Hold
}

func (x *holdKey) allow(now time.Duration, n int) bool {
	v := x.k.Decide(&x.s, now, n)
	x.k.Show(&x.h, x.s, now)
	return v.Allowed
}

func (x *holdKey) reserve(now time.Duration, n int) (time.Duration, uint64) {
	d, ok, t := x.k.ReserveHold(&x.s, &x.h, now, n, admit.Never)
	if !ok {
		panic("refused")
	}
	return d, t
}

func (x *holdKey) cancel(now time.Duration, t uint64) bool {
	ok, drop := x.k.CancelHold(&x.s, &x.h, t, now)
	if drop {
		x.h = Hold{}
	}
	return ok
}

// TestHoldCancelsOnce: a reservation cancelled twice gives its tokens back
// once, even when a later reservation leaves exactly the state it left.
func TestHoldCancelsOnce(t *testing.T) {
	x := &holdKey{k: NewTokenBucket(tb(1, time.Second))}
	require.True(t, x.allow(0, 1))
	dA, tA := x.reserve(0, 1)
	require.Equal(t, time.Second, dA)
	afterA := x.s
	assert.True(t, x.cancel(0, tA))
	dB, tB := x.reserve(0, 1)
	require.Equal(t, time.Second, dB)
	require.Equal(t, afterA, x.s, "B leaves the state A left")
	assert.False(t, x.cancel(0, tA), "A was cancelled already")
	dC, _ := x.reserve(0, 1)
	assert.Equal(t, 2*time.Second, dC, "C waits behind B: 3 tokens over 2s, not 1s")
	assert.NotEqual(t, tA, tB)
}

// TestHoldStaleCancel: once a reading has seen the tokens due, a cancel at
// an older reading gives nothing back.
func TestHoldStaleCancel(t *testing.T) {
	for _, probe := range []int{0, 1} {
		x := &holdKey{k: NewTokenBucket(tb(1, time.Second))}
		require.True(t, x.allow(0, 1))
		_, tr := x.reserve(0, 1) // due at 1s
		x.allow(1500*time.Millisecond, probe)
		assert.False(t, x.cancel(500*time.Millisecond, tr), "probe n=%d at 1.5s saw the tokens due", probe)
		assert.False(t, x.allow(1500*time.Millisecond, 1), "the reservation's token is spent")
	}
	x := &holdKey{k: NewTokenBucket(tb(1, time.Second))}
	require.True(t, x.allow(0, 1))
	_, tr := x.reserve(0, 1)
	x.allow(900*time.Millisecond, 0)
	assert.True(t, x.cancel(500*time.Millisecond, tr), "nothing has seen the tokens due")
}

// TestHoldOnlyLatest: only the latest reservation can be cancelled; a
// foreign ticket neither cancels nor drops the hold.
func TestHoldOnlyLatest(t *testing.T) {
	x := &holdKey{k: NewTokenBucket(tb(2, 2*time.Second))}
	require.True(t, x.allow(0, 2))
	_, t1 := x.reserve(0, 1)
	_, t2 := x.reserve(0, 1)
	assert.False(t, x.cancel(0, t1), "t2 relies on t1's slot")
	assert.False(t, x.cancel(0, t2+1000), "a foreign ticket")
	assert.False(t, x.cancel(0, 0), "the zero ticket")
	assert.True(t, x.cancel(0, t2))
	assert.False(t, x.cancel(0, t1), "t1's hold was replaced by t2's")
	d, tn := x.reserve(0, 1)
	assert.Equal(t, 2*time.Second, d, "t2's slot is free again")
	assert.NotZero(t, tn)
	d0, t0 := x.reserve(0, 0)
	assert.Zero(t, d0)
	assert.Zero(t, t0, "n == 0 holds nothing")
	assert.True(t, x.cancel(0, tn), "a probe does not drop the hold")
}

// TestHoldImmediate: a reservation due at once cannot be cancelled.
func TestHoldImmediate(t *testing.T) {
	x := &holdKey{k: NewTokenBucket(tb(2, time.Second))}
	d, tr := x.reserve(0, 1)
	assert.Zero(t, d)
	assert.Zero(t, tr)
	assert.False(t, x.cancel(0, tr))
}
