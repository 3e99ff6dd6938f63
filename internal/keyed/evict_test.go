package keyed

import (
	"math"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/admit-go/admit"
)

// TestCounterLayout pins the padding: the words insertions and evictions
// write sit on a 128-byte stretch of their own, in the order of
// counterFields.
func TestCounterLayout(t *testing.T) {
	var c Counter
	var f counterFields
	for _, w := range []struct {
		name     string
		off, was uintptr
	}{
		{"n", unsafe.Offsetof(c.n), unsafe.Offsetof(f.n)},
		{"evictions", unsafe.Offsetof(c.evictions), unsafe.Offsetof(f.evictions)},
		{"denials", unsafe.Offsetof(c.denials), unsafe.Offsetof(f.denials)},
		{"cursor", unsafe.Offsetof(c.cursor), unsafe.Offsetof(f.cursor)},
	} {
		if w.off != CacheLinePad+w.was {
			t.Errorf("Counter.%s is at offset %d, want %d", w.name, w.off, CacheLinePad+w.was)
		}
	}
	if size := unsafe.Sizeof(c); size != 2*CacheLinePad {
		t.Errorf("Counter is %d bytes, want %d", size, 2*CacheLinePad)
	}
}

// TestCounterStats: Stats reports the keys and bound it is given and the
// evictions and denials counted; Release, Reserve and Evicted(0) count
// neither.
func TestCounterStats(t *testing.T) {
	var c Counter
	c.Reserve(4)
	c.Reserve(4)
	c.Release(1)
	c.Evicted(0)
	if got, want := c.Stats(1, 4), (admit.StoreStats{Keys: 1, MaxKeys: 4}); got != want {
		t.Errorf("Stats after Reserve, Release, Evicted(0) = %+v, want %+v", got, want)
	}
	c.Evicted(3)
	c.Evicted(2)
	c.Denied()
	if got, want := c.Stats(7, 0), (admit.StoreStats{Keys: 7, Evictions: 5, FullDenials: 1}); got != want {
		t.Errorf("Stats after Evicted(3), Evicted(2), Denied() = %+v, want %+v", got, want)
	}
}

func TestCounterReserve(t *testing.T) {
	var c Counter
	for i := range 3 {
		if !c.Reserve(3) {
			t.Fatalf("Reserve %d of 3 refused", i+1)
		}
	}
	if c.Reserve(3) {
		t.Fatal("a fourth key was counted in a store of 3")
	}
	c.Release(1)
	if !c.Reserve(3) {
		t.Fatal("a released slot was not given out again")
	}
}

func TestReading(t *testing.T) {
	if got := Reading(time.Second); got != time.Second-Slack {
		t.Errorf("Reading(1s) = %v", got)
	}
	if got := Reading(math.MinInt64 + 1); got != math.MinInt64 {
		t.Errorf("Reading near the bottom of the clock = %v, want it saturated", got)
	}
}

// TestMakeRoom: the caller's shard is scanned first; the others are visited
// only when it has no idle key, and a refusal reports the soonest reset.
func TestMakeRoom(t *testing.T) {
	var c Counter
	c.Reserve(1) // the store is full
	shards := make([]int, 4)
	var visited []int
	scan := func(sh *int, own bool, at time.Duration, limit int, soonest *time.Duration) (int, int) {
		visited = append(visited, int((uintptr(unsafe.Pointer(sh))-uintptr(unsafe.Pointer(&shards[0])))/unsafe.Sizeof(shards[0])))
		*soonest = min(*soonest, 5*time.Second)
		return 1, 0
	}
	wait, ok := MakeRoom(&c, 1, shards, &shards[2], 0, time.Hour, scan)
	if ok || wait != 5*time.Second+Slack {
		t.Errorf("MakeRoom in a full store with nothing idle = %v, %v; want a refusal after 5s+slack", wait, ok)
	}
	if len(visited) != 4 || visited[0] != 2 {
		t.Errorf("visited shards %v; want the own shard 2 first, then the three others", visited)
	}
	evictOwn := func(sh *int, own bool, at time.Duration, limit int, soonest *time.Duration) (int, int) {
		if own {
			c.Release(1) // what a store's scan does when it evicts
			return 1, 1
		}
		t.Error("another shard was visited although the own shard made room")
		return 0, 0
	}
	if _, ok := MakeRoom(&c, 1, shards, &shards[0], 0, time.Hour, evictOwn); !ok {
		t.Error("room made in the own shard was not reserved")
	}
}

// shardIndex returns the index of sh in shards.
func shardIndex(shards []int, sh *int) int {
	return int((uintptr(unsafe.Pointer(sh)) - uintptr(unsafe.Pointer(&shards[0]))) / unsafe.Sizeof(shards[0]))
}

// TestMakeRoomTakenMeanwhile: another shard's idle key is evicted, but a
// concurrent insertion takes the room before this call can reserve it. The
// refusal's RetryAfter is the slack alone: room appears, it was just taken,
// so asking again soon is right, not the wait for the keys examined.
func TestMakeRoomTakenMeanwhile(t *testing.T) {
	var c Counter
	c.Reserve(2)
	c.Reserve(2) // the store is full
	shards := make([]int, 4)
	scan := func(sh *int, own bool, at time.Duration, limit int, soonest *time.Duration) (int, int) {
		if own {
			*soonest = min(*soonest, 5*time.Second) // a busy key
			return 1, 0
		}
		if shardIndex(shards, sh) == 1 {
			c.Release(1) // what a store's scan does when it evicts
			if !c.Reserve(2) {
				t.Fatal("the concurrent insertion found no room")
			}
			return 1, 1
		}
		return 0, 0
	}
	wait, ok := MakeRoom(&c, 2, shards, &shards[0], 0, time.Hour, scan)
	if ok || wait != Slack {
		t.Errorf("MakeRoom whose room was taken meanwhile = %v, %v; want a refusal after the slack, %v", wait, ok, Slack)
	}
}

// TestMakeRoomScanBudget: a full store's new key examines at most FullScan
// keys in all: each shard's scan gets what the earlier ones left, and no
// shard is visited once the budget is spent.
func TestMakeRoomScanBudget(t *testing.T) {
	var c Counter
	c.Reserve(1) // the store is full
	shards := make([]int, 4)
	held := []int{20, 5, 10, 30} // keys per shard
	var visited, limits []int
	scan := func(sh *int, own bool, at time.Duration, limit int, soonest *time.Duration) (int, int) {
		i := shardIndex(shards, sh)
		visited, limits = append(visited, i), append(limits, limit)
		return min(limit, held[i]), 0
	}
	if _, ok := MakeRoom(&c, 1, shards, &shards[0], 0, time.Hour, scan); ok {
		t.Fatal("MakeRoom reserved room in a full store of busy keys")
	}
	// The cursor starts the others at shard (8 mod 4) = 0, the own shard,
	// which is skipped: then 1 (5 keys), 2 (the 7 left of 32), and not 3.
	if !slices.Equal(visited, []int{0, 1, 2}) || !slices.Equal(limits, []int{FullScan, FullScan - 20, FullScan - 25}) {
		t.Errorf("scans of shards %v with limits %v; want shards [0 1 2] with limits [%d %d %d]",
			visited, limits, FullScan, FullScan-20, FullScan-25)
	}
}

// TestMakeRoomRetryAfter: the refusal's RetryAfter is the soonest time the
// scans found only when they examined every key of the store, which needs
// at most FullShards shards and at most FullScan keys, and no shard skipped;
// otherwise it is the horizon, whatever the keys examined said. Either way
// the slack is added.
func TestMakeRoomRetryAfter(t *testing.T) {
	const horizon = time.Hour
	for _, tc := range []struct {
		name    string
		shards  int
		keys    int64 // the store's count, and its maximum
		skipped bool  // a busy shard was skipped
		want    time.Duration
	}{
		{"every key examined", FullShards, FullScan, false, 5 * time.Second},
		{"more shards than it visits", 2 * FullShards, 2, false, horizon},
		{"more keys than it examines", 2, FullScan + 1, false, horizon},
		{"a busy shard skipped", 2, 2, true, horizon},
	} {
		var c Counter
		for range tc.keys {
			c.Reserve(tc.keys)
		}
		shards := make([]int, tc.shards)
		probed := false
		scan := func(sh *int, own bool, at time.Duration, limit int, soonest *time.Duration) (int, int) {
			if soonest != nil {
				probed = true
				*soonest = min(*soonest, 5*time.Second)
			}
			if !own && tc.skipped {
				return 0, 0
			}
			if own {
				return min(limit, int(tc.keys)-(tc.shards-1)), 0 // one key in each other shard
			}
			return min(limit, 1), 0
		}
		wait, ok := MakeRoom(&c, tc.keys, shards, &shards[0], 0, horizon, scan)
		if ok || wait != tc.want+Slack {
			t.Errorf("%s: MakeRoom = %v, %v; want a refusal after %v", tc.name, wait, ok, tc.want+Slack)
		}
		if probing := tc.shards <= FullShards && tc.keys <= FullScan; probed != probing {
			t.Errorf("%s: scans asked for the soonest time: %v, want %v (probes cost, and only an exact answer needs them)", tc.name, probed, probing)
		}
	}
}

// TestMapRebuild: a Map is rebuilt when a deletion leaves a quarter of its
// peak, if that peak was at least RebuildMin; a smaller Map keeps its map,
// so that what a map keeps after a burst is a map of fewer than RebuildMin
// entries, and a shard that holds a key at a time makes no map for each
// hold. A map that plain deletions (a pruning) left empty is dropped by the
// next Delete that finds it at a quarter of its peak.
func TestMapRebuild(t *testing.T) {
	for _, c := range []struct {
		peak, left int
		wantNil    bool
		wantPeak   int
	}{
		{RebuildMin, RebuildMin / 4, false, RebuildMin / 4}, // a quarter left: rebuilt to its size
		{RebuildMin, RebuildMin/4 + 1, false, RebuildMin},   // more than a quarter: kept
		{RebuildMin, 0, false, RebuildMin / 4},              // rebuilt at a quarter, kept small
		{4 * RebuildMin, 0, false, RebuildMin / 4},          // rebuilt at 32 and at 8
		{RebuildMin - 1, 0, false, RebuildMin - 1},          // a peak below RebuildMin: kept, empty
		{40_000, 1, false, 9},                               // rebuilt at 10000, 2500, 625, 156, 39 and 9
		{40_000, 0, false, 9},                               // the same, and at most a map of 9 kept
		{4 * RebuildMin, RebuildMin, false, RebuildMin},     // rebuilt once, at a quarter
	} {
		var m Map[int, int]
		for i := range c.peak {
			m.Put(i, i)
		}
		m.Put(0, -1) // an overwrite adds nothing
		for i := range c.peak - c.left {
			m.Delete(i)
		}
		if len(m.M) != c.left || (m.M == nil) != c.wantNil || m.peak != c.wantPeak {
			t.Errorf("peak %d, %d left: len %d, nil %t, peak %d; want len %d, nil %t, peak %d",
				c.peak, c.left, len(m.M), m.M == nil, m.peak, c.left, c.wantNil, c.wantPeak)
		}
		for i := c.peak - c.left; i < c.peak; i++ {
			if v, ok := m.M[i]; !ok || v != i {
				t.Errorf("peak %d, %d left: entry %d = %d, %t after the deletions; want %d, true", c.peak, c.left, i, v, ok, i)
			}
		}
	}
	var m Map[int, int]
	for i := range 4 * RebuildMin {
		m.Put(i, i)
	}
	for i := range 4*RebuildMin - 1 {
		delete(m.M, i) // a pruning
	}
	m.Delete(4*RebuildMin - 1)
	if m.M != nil || m.peak != 0 {
		t.Errorf("a map of peak %d emptied by plain deletions and a Delete: nil %t, peak %d; want nil, peak 0", 4*RebuildMin, m.M == nil, m.peak)
	}

}
