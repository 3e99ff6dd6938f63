package policy_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/policy"
	"github.com/admit-go/admit/sharded"
)

// gate stops one call of one key at two points of its path through a
// limiter of one Limit: as it enters the limiter (AllowN), and in the
// hooks' Keep, under the key's lock; it also stops a Reload's Put of the
// key there, before the Put takes the lock; and it counts the Puts the
// limiters refused. Each stop is armed once, by the test, and the call waits there
// until the test releases it.
type gate struct {
	key   string
	limit int // the Limit of the limiters that stop the key

	enter, keep, put stop
	refused          atomic.Int32 // Puts that found the key held
}

// stop is one point where an armed call waits: it says it arrived, and
// waits to be released.
type stop struct {
	armed   atomic.Bool
	arrived chan struct{}
	release chan struct{}
}

func newStop() stop { return stop{arrived: make(chan struct{}), release: make(chan struct{})} }

// at stops the call if the stop is armed, once.
func (s *stop) at() {
	if s.armed.CompareAndSwap(true, false) {
		close(s.arrived)
		<-s.release
	}
}

// gated is a store that moves keys, wrapped so that its gate can stop a
// call; everything else is the store's.
type gated struct {
	admit.KeyedLimiter
	keyed.Mover
	g     *gate
	after bool // the keep stop is after the hooks' Keep has answered, not before it asks
}

func (l *gated) mine(key string) bool {
	return key == l.g.key && l.Mover.Limits().At(0).Limit == l.g.limit
}

func (l *gated) Allow(key string) admit.Decision { return l.AllowN(key, 1) }

func (l *gated) AllowN(key string, n int) admit.Decision {
	if l.mine(key) {
		l.g.enter.at()
	}
	return l.KeyedLimiter.AllowN(key, n)
}

func (l *gated) AllowNWhich(key string, n int) (admit.Decision, int) {
	if l.mine(key) {
		l.g.enter.at()
	}
	return l.KeyedLimiter.(admit.CompositeStore).AllowNWhich(key, n)
}

// Decide is the path of the Service's calls (keyed.Mover).
func (l *gated) Decide(key string, n int) (admit.Decision, int, bool) {
	if l.mine(key) {
		l.g.enter.at()
	}
	return l.Mover.Decide(key, n)
}

func (l *gated) Put(key string, from []kernel.PartState) bool {
	if l.mine(key) {
		l.g.put.at()
	}
	ok := l.Mover.Put(key, from)
	if !ok {
		l.g.refused.Add(1)
	}
	return ok
}

func (l *gated) SetHooks(h *keyed.Hooks) {
	if h == nil || h.Keep == nil {
		l.Mover.SetHooks(h)
		return
	}
	w := *h
	w.Keep = func(key string, adopted keyed.Epoch) bool {
		if l.mine(key) && !l.after {
			l.g.keep.at()
		}
		ok := h.Keep(key, adopted)
		if l.mine(key) && l.after {
			l.g.keep.at()
		}
		return ok
	}
	l.Mover.SetHooks(&w)
}

// TestMoveBack: a Reload that moves a pair back into a limiter it left
// carries the pair's state there, even when a Check that the first Reload
// sent to that limiter finds the pair missing, and is asked whether to
// keep it only after the second Reload published its book and before its
// move put the state back.
//
// Book A gives the pair (u, /x) fixed-window 10 per hour (the default),
// book B 20 (its default; the API entry /keep has the other, so that both
// limiters live in both books), WithCarry(CarryProportional), on a frozen
// clock. u spends 5 of 10 under A. A Check loads book A and stops as it
// enters u's limiter of 10; Reload 1 (to B) moves u to the limiter of 20
// (10 of 20 spent). The Check goes on, finds u missing, and stops in Keep,
// under u's lock; Reload 2 (to A) publishes book A and its move comes to
// Put u back (5 of 10), where it waits for the lock. The Check goes on:
// Keep must not let it store a fresh state for u (which the move's Put
// then finds, dropping the carried one: 9 left after the Check, and the
// pair admitted 15 times under a limit of 10). It is decided on the state
// carried: 4 left, and no Put refused.
func TestMoveBack(t *testing.T) {
	gateIt := func(l admit.KeyedLimiter, err error, g *gate) (admit.KeyedLimiter, error) {
		if err != nil {
			return nil, err
		}
		return &gated{KeyedLimiter: l, Mover: l.(keyed.Mover), g: g}, nil
	}
	single := func(f func(admit.Rule, ...admit.Option) (admit.Store, error)) func(*gate) []admit.Option {
		return func(g *gate) []admit.Option {
			return []admit.Option{policy.WithFactory(func(r admit.Rule, o ...admit.Option) (admit.KeyedLimiter, error) {
				l, err := f(r, o...)
				return gateIt(l, err, g)
			})}
		}
	}
	composite := func(f func(admit.Limits, ...admit.Option) (admit.CompositeStore, error)) func(*gate) []admit.Option {
		return func(g *gate) []admit.Option {
			return []admit.Option{policy.WithLimitsFactory(func(l admit.Limits, o ...admit.Option) (admit.KeyedLimiter, error) {
				k, err := f(l, o...)
				return gateIt(k, err, g)
			})}
		}
	}
	const compLo, compHi = "fixed-window,10,1h + token-bucket,10,1h", "fixed-window,20,1h + token-bucket,20,1h"
	cases := []struct {
		name   string
		lo, hi string // the limits of 10 and of 20
		opts   func(g *gate) []admit.Option
	}{
		{"locked/fixed-window", "fixed-window,10,1h", "fixed-window,20,1h", single(locked.New)},
		{"sharded/fixed-window", "fixed-window,10,1h", "fixed-window,20,1h", single(sharded.New)},
		{"sharded/sliding-log", "sliding-log,10,1h", "sliding-log,20,1h", single(sharded.New)},
		{"atomic/token-bucket", "token-bucket,10,1h", "token-bucket,20,1h", single(admitatomic.New)},
		{"atomic/fixed-window", "fixed-window,10,1h", "fixed-window,20,1h", single(admitatomic.New)},
		{"locked/composite", compLo, compHi, composite(locked.NewLimits)},
		{"sharded/composite", compLo, compHi, composite(sharded.NewLimits)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := &gate{key: "u", limit: 10, enter: newStop(), keep: newStop(), put: newStop()}
			close(g.put.release) // the Put only says it arrived
			bookA := parse(t, "default = "+c.lo+"\napi./keep = "+c.hi+"\n")
			bookB := parse(t, "default = "+c.hi+"\napi./keep = "+c.lo+"\n")
			s := service(t, bookA, append(c.opts(g), admit.WithClock(clock.NewFake()))...)
			carry := policy.WithCarry(policy.CarryProportional)
			spendN(t, s, "u", "/x", 5)

			var wg sync.WaitGroup
			var d admit.Decision
			g.enter.armed.Store(true)
			wg.Go(func() { d = s.Check("u", "/x") })
			<-g.enter.arrived // the Check loaded book A, and is entering u's limiter of 10
			require.NoError(t, s.Reload(bookB, carry))
			require.Equal(t, 10, remaining(s, "u", "/x"), "Reload 1 carried 10 of 20 spent")

			g.keep.armed.Store(true)
			close(g.enter.release)
			<-g.keep.arrived // u is missing, the Check holds its lock
			var reload2 error
			g.put.armed.Store(true)
			wg.Go(func() { reload2 = s.Reload(bookA, carry) })
			<-g.put.arrived // book A is published, and the move waits for u's lock
			close(g.keep.release)
			wg.Wait()

			require.NoError(t, reload2)
			assert.True(t, d.Allowed, "the racing Check: %+v", d)
			assert.Zero(t, g.refused.Load(), "a Put found u held: a carried state was dropped")
			assert.Equal(t, 4, remaining(s, "u", "/x"), "5 spent, carried to 10 of 20 and back to 5 of 10, and the racing Check")
		})
	}
}
