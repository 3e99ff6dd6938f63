package policy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
)

// TestAdoptDuringTheWindow: between a Reload's publication and its pass
// over the old limiters' keys, the first Check of a pair that moved finds
// its key missing in the new limiter, which adopts it (Take from the old
// limiter, Convert, Put) before deciding: the Check sees the state carried.
// The pass then finds nothing left to move for that pair, and moves the
// others; a pair adopted is not moved twice.
func TestAdoptDuringTheWindow(t *testing.T) {
	parse := func(text string) *Book {
		b, err := Parse(strings.NewReader(text))
		require.NoError(t, err)
		return b
	}
	s, err := NewService(parse("default = token-bucket,1000,1h\napi./x = fixed-window,10,1m\n"), admit.WithClock(clock.NewFake()))
	require.NoError(t, err)
	for _, u := range []string{"u", "v"} {
		for range 7 {
			require.True(t, s.Check(u, "/x").Allowed)
		}
	}
	old := s.cur.Load()
	oldLim := old.apis["/x"].lim.(admit.Store)

	s.mu.Lock()
	snap, err := s.compile(parse("default = token-bucket,1000,1h\napi./x = fixed-window,20,1m\n"), old, CarryConsumed)
	require.NoError(t, err)
	mv := s.open(old, snap, CarryConsumed)
	require.Equal(t, 2, oldLim.Len(), "nothing moved before the pass")

	d := s.Check("u", "/x")
	assert.Equal(t, admit.Decision{Allowed: true, Limit: 20, Remaining: 12, ResetAfter: d.ResetAfter}, d, "u adopted")
	assert.Equal(t, 1, oldLim.Len(), "u left the old limiter")

	s.moveAll(mv)
	s.close(mv)
	s.mu.Unlock()
	assert.Zero(t, oldLim.Len())
	assert.Equal(t, 12, s.CheckN("u", "/x", 0).Remaining, "u moved once")
	assert.Equal(t, 13, s.CheckN("v", "/x", 0).Remaining, "v moved by the pass")
	assert.Nil(t, s.moving.Load())
}
