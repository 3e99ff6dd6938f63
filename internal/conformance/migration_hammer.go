package conformance

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
)

// hammerTexts are the limits testMoveHammer runs over: Limits of a few
// hundred, so that a move lands while the key still has budget, in each
// packing (a token bucket in whole nanoseconds per token; in scaled units
// or, in the map store, unpacked; over a long window).
var hammerTexts = []string{
	"token-bucket,200,1s",
	"fixed-window,200,1s",
	"sliding-log,200,1s",
	"token-bucket,200,1s + fixed-window,250,1h",
	"token-bucket,300,1s",
	"token-bucket,600,7s",
	"sliding-counter,200,1s",
	"fixed-window,300,1s + sliding-log,200,2s + sliding-counter,250,3s",
}

// hammerRun is one configuration of testMoveHammer.
type hammerRun struct {
	limits     admit.Limits
	hashed     bool
	lazy       bool // the move carries no key: Adopt does
	paused     bool // the move runs at the pause point of a call on the old store
	goroutines int
	lose       bool // the move puts the key fresh: a broken move
}

// testMoveHammer: goroutines admit on one key while it moves from one
// store to another of the same limits (NewMigration, as a policy.Service's
// Reload moves it), with the clock frozen (so nothing is ever given back),
// over every algorithm and composites, full and hashed keys, moves eager
// (the Reload carries the key) and lazy (Adopt carries it), a move made
// while a call on the old store is stopped at its pause point (for the
// table: after it has loaded the key's word and before it publishes, so
// that Take's freeze must make it fail and go to Keep), and a sweep of
// GOMAXPROCS and goroutine counts: the admissions of both stores together
// are exactly the Limit (no admission lost or counted twice across Take),
// calls on the old store after the move were redirected, and the key ends
// in the new store, spent. A move that loses the state is caught: the
// admissions then exceed the Limit.
func testMoveHammer(t *testing.T, m movers) {
	procs, counts, texts := []int{1, 4}, []int{3, 8}, hammerTexts
	if testing.Short() {
		procs, counts, texts = []int{2}, []int{4}, hammerTexts[:4]
	}
	for _, limits := range m.taken(t, texts) {
		for _, hashed := range m.hashed() {
			for _, lazy := range []bool{false, true} {
				for _, paused := range []bool{false, true} {
					for _, p := range procs {
						for _, g := range counts {
							name := fmt.Sprintf("limits=%s/hashed=%v/lazy=%v/paused=%v/procs=%d/goroutines=%d", limits, hashed, lazy, paused, p, g)
							t.Run(name, func(t *testing.T) {
								if paused && (m.v.Store == nil || m.v.Store.Pause == nil) {
									t.Skipf("%s: the store's pause point is not in this build; the variant's tests set it in builds with -tags admittest (make test)", m.v.Name)
								}
								defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(p))
								admitted, redirected := hammerMove(t, m, hammerRun{limits: limits, hashed: hashed, lazy: lazy, paused: paused, goroutines: g})
								assert.Equal(t, int64(limits.Limit()), admitted, "admissions of both stores together")
								assert.Positive(t, redirected, "goroutine 0's calls after the move")
							})
						}
					}
				}
			}
		}
	}
	limits := mustLimits(t, hammerTexts[0])
	for _, lazy := range []bool{false, true} {
		t.Run(fmt.Sprintf("lost state/lazy=%v", lazy), func(t *testing.T) {
			admitted, _ := hammerMove(t, m, hammerRun{limits: limits, lazy: lazy, goroutines: 4, lose: true})
			assert.Greater(t, admitted, int64(limits.Limit()), "a move that puts the key fresh must over-admit")
		})
	}
}

// hammerMove runs goroutines that admit one request at a time on one key
// while the key moves from one store of r.limits to another (a Migration),
// with the clock frozen, and returns the admissions of both stores
// together and the calls Redirect decided. Goroutine 0 calls the old store
// throughout, as a call holding the old snapshot does: after attempt
// moveAt it has the key moved and waits for the move, so that its later
// calls find the key missing, are refused by Keep and are redirected. A
// paused move is made instead by the first call on the old store to reach
// its pause point from attempt moveAt on (goroutine 0's at moveAt if no
// other's), and goroutine 0 waits for it after that attempt. (After a lazy
// move goroutine 0's next call goes to the new store, whose Adopt carries
// the key; only then do its calls on the old store find it missing.) It
// makes limit+moveAt attempts, enough to spend the new store's budget
// alone. The other goroutines split 2×limit attempts, those of even index
// on the old store, those of odd index on the store the snapshot names.
func hammerMove(t *testing.T, m movers, r hammerRun) (admitted, redirected int64) {
	const key, moveAt = "k", 20
	o := moveOpts(clock.NewFake(), r.hashed, admit.WithShards(4))
	from, to := m.new(t, r.limits, o...), m.new(t, r.limits, o...)
	mig := NewMigration(from, to)
	mig.Lose = r.lose
	limit := r.limits.Limit()
	waitAt, adoptAt := moveAt-1, moveAt // the attempt after which goroutine 0 waits, and its first on the new store
	if r.paused {
		waitAt, adoptAt = moveAt, moveAt+1
	}
	var total atomic.Int64
	start, done := make(chan struct{}), make(chan struct{})
	move := func() {
		mig.Move(r.lazy, key)
		close(done)
	}
	if !r.paused {
		go func() {
			<-start
			move()
		}()
	}
	var wg sync.WaitGroup
	for g := range r.goroutines {
		wg.Go(func() {
			attempts := 2 * limit / (r.goroutines - 1)
			if g == 0 {
				attempts = limit + moveAt
			}
			for a := range attempts {
				if g == 0 && a == moveAt && r.paused {
					m.v.Store.Pause(from, move)
				}
				var lim admit.KeyedLimiter = from
				if g%2 == 1 || (g == 0 && r.lazy && a == adoptAt) {
					lim = mig.Current()
				}
				if lim.Allow(key).Allowed {
					total.Add(1)
				}
				if g == 0 && a == waitAt {
					close(start)
					<-done
				}
			}
		})
	}
	wg.Wait()
	assert.Zero(t, from.Len(), "the old store holds no key")
	assert.Equal(t, 1, to.Len(), "the new store holds the key")
	if !r.lose {
		assert.False(t, to.Allow(key).Allowed, "the key is spent in the new store")
	}
	return total.Load(), mig.Redirected()
}
