package keyed

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/admit-go/admit"
)

// Tests that kill mutants `make mutate` found alive; the survivors no test
// can kill are listed in docs/stress.md ("Mutation testing").

// TestMakeRoomStopsWhereRoomIsMade: once another shard's scan has made room
// and the room is reserved, no further shard is visited, as none is after
// the own shard made room (TestMakeRoom).
func TestMakeRoomStopsWhereRoomIsMade(t *testing.T) {
	var c Counter
	c.Reserve(1) // the store is full
	shards := make([]int, 4)
	var visited []int
	scan := func(sh *int, own bool, at time.Duration, limit int, soonest *time.Duration) (int, int) {
		i := shardIndex(shards, sh)
		visited = append(visited, i)
		if i == 1 { // the cursor's first shard other than the own one, 0
			c.Release(1)
			return 1, 1
		}
		return 1, 0
	}
	wait, ok := MakeRoom(&c, 1, shards, &shards[0], 0, time.Hour, scan)
	if !ok || wait != 0 {
		t.Errorf("MakeRoom = %v, %v; want the room shard 1 made", wait, ok)
	}
	if !slices.Equal(visited, []int{0, 1}) {
		t.Errorf("visited shards %v; want [0 1]: the own shard, then shard 1, which made room", visited)
	}
}

// TestHorizon: a key becomes fresh one Window after its last admission, two
// for the sliding counter, saturated.
func TestHorizon(t *testing.T) {
	for _, c := range []struct {
		alg    admit.Algorithm
		window time.Duration
		want   time.Duration
	}{
		{admit.TokenBucket, time.Second, time.Second},
		{admit.FixedWindow, time.Second, time.Second},
		{admit.SlidingLog, time.Second, time.Second},
		{admit.SlidingCounter, time.Second, 2 * time.Second},
		{admit.SlidingCounter, 1 << 62, math.MaxInt64},
		{admit.FixedWindow, 1 << 62, 1 << 62},
	} {
		r := admit.Rule{Algorithm: c.alg, Limit: 1, Window: c.window}
		if got := Horizon(r); got != c.want {
			t.Errorf("Horizon(%v) = %v, want %v", r, got, c.want)
		}
	}
}
