package stress

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
	"github.com/admit-go/admit/policy"
)

// The move-back workload: a policy.Service whose two books swap two limits,
// so that every Reload moves each pair to the other limiter and the next
// moves it back, carrying its state (CarryProportional). Book A gives the
// default 10 and the API /keep 20, book B the default 20 and /keep 10:
// both limiters of each API live in both books. Goroutines Check four
// pairs (two on the default, two on /keep) on a frozen clock while a
// reloader alternates the books; once it is done, each pair is checked
// until denied.
//
// The oracle: on a frozen clock the fraction of a pair's budget in use
// never falls (a proportional carry keeps it, rounding up), and an
// admission under 10 raises it by 2/20, one under 20 by 1/20: so with
// points 2 per admission under 10 and 1 under 20 (CheckNWhich names the
// limits), a pair gets at most 20 points. More is a state lost in a move;
// the Service's own Puts that find their key held (none may, as no
// Reload here starts a pair afresh) are counted as the second oracle.
//
// Every store is wrapped (moveBackStore) so that the windows of the race
// open on a 2-core machine without build tags: a Check that enters a
// limiter waits, now and then, until the Reload in progress has finished,
// so that it finds its pair moved away; and in the hooks' Keep, under the
// key's lock, it waits now and then for the next Reload to publish its
// book, which may send the pair back here. The waits are bounded in
// yields, never in time. planted replaces Keep with the old one, which
// asked only whether the current book sends the pair to this limiter: the
// self-test requires the workload to catch it.

// moveBackPairs are the workload's pairs, user → API: each user on one
// API, so that the planted Keep, which is given only the user, knows the
// pair.
var moveBackPairs = map[string]string{"u0": "/x", "u1": "/x", "u2": "/keep", "u3": "/keep"}

// moveBackRun is one run of the workload on the stores of keyed (one rule)
// or keyedLimits (composites): lo and hi are the limits of 10 and of 20.
// It reports the first violation, or nil.
func moveBackRun(keyed func(admit.Rule, ...admit.Option) (admit.Store, error),
	keyedLimits func(admit.Limits, ...admit.Option) (admit.CompositeStore, error),
	lo, hi string, reloads, hammers int, seed uint64, planted bool) error {
	mb := &moveBack{seed: seed, planted: planted}
	opts := []admit.Option{admit.WithClock(clock.NewFake())}
	if keyed != nil {
		opts = append(opts, policy.WithFactory(func(r admit.Rule, o ...admit.Option) (admit.KeyedLimiter, error) {
			return mb.wrap(keyed(r, o...))
		}))
	}
	if keyedLimits != nil {
		opts = append(opts, policy.WithLimitsFactory(func(l admit.Limits, o ...admit.Option) (admit.KeyedLimiter, error) {
			return mb.wrap(keyedLimits(l, o...))
		}))
	}
	bookA, err := policy.Parse(strings.NewReader("default = " + lo + "\napi./keep = " + hi + "\n"))
	if err != nil {
		return err
	}
	bookB, err := policy.Parse(strings.NewReader("default = " + hi + "\napi./keep = " + lo + "\n"))
	if err != nil {
		return err
	}
	svc, err := policy.NewService(bookA, opts...)
	if err != nil {
		return err
	}
	mb.svc.Store(svc)
	points := map[string]*atomic.Int64{}
	users := make([]string, 0, len(moveBackPairs))
	for u := range moveBackPairs {
		points[u] = new(atomic.Int64)
		users = append(users, u)
	}
	check := func(u string) bool {
		d, l, _ := svc.CheckNWhich(u, moveBackPairs[u], 1)
		if d.Allowed {
			points[u].Add(int64(20 / l.At(0).Limit))
		}
		return d.Allowed
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for h := range hammers {
		wg.Go(func() {
			for i := h; !stop.Load(); i++ {
				check(users[i%len(users)])
			}
		})
	}
	carry := policy.WithCarry(policy.CarryProportional)
	for i := range reloads {
		book := bookB
		if i%2 == 1 {
			book = bookA
		}
		if err := svc.Reload(book, carry); err != nil {
			stop.Store(true)
			wg.Wait()
			return err
		}
		mb.reloads.Add(1)
		runtime.Gosched()
	}
	stop.Store(true)
	wg.Wait()
	for _, u := range users {
		for check(u) {
		}
	}
	var errs []error
	for _, u := range users {
		if p := points[u].Load(); p > 20 {
			errs = append(errs, fmt.Errorf("over-admission: pair (%s, %s) got %d points (2 per admission under 10, 1 under 20): a fraction of its budget above 1, where at most 20 fit", u, moveBackPairs[u], p))
		}
	}
	if n := mb.refused.Load(); n > 0 {
		errs = append(errs, fmt.Errorf("lost state: %d of the Reloads' Puts found their key held and dropped the state they carried", n))
	}
	return errors.Join(errs...)
}

// moveBack is one run's state, shared by its wrapped stores.
type moveBack struct {
	svc     atomic.Pointer[policy.Service]
	reloads atomic.Int64 // Reloads finished
	refused atomic.Int64 // Puts that found their key held
	seed    uint64
	calls   atomic.Uint64
	planted bool
}

// now reports, with probability 1/8 drawn from a counter hashed with the
// seed, that a call should wait at a window.
func (mb *moveBack) now() bool { return mix64(mb.seed^mb.calls.Add(1))%8 == 0 }

// patience bounds each wait, in yields.
const moveBackPatience = 200

// untilReloaded waits until a Reload finishes, or patience runs out.
func (mb *moveBack) untilReloaded() {
	r := mb.reloads.Load()
	for range moveBackPatience {
		if mb.reloads.Load() != r {
			return
		}
		runtime.Gosched()
	}
}

// untilPublished waits until a Reload publishes its book, or patience runs
// out (the next Reload may be waiting for the lock the caller holds).
func (mb *moveBack) untilPublished() {
	svc := mb.svc.Load()
	b := svc.Book()
	for range moveBackPatience {
		if svc.Book() != b {
			return
		}
		runtime.Gosched()
	}
}

// wrap boxes a store of the Service's factory (lim, err are its results).
func (mb *moveBack) wrap(lim admit.KeyedLimiter, err error) (admit.KeyedLimiter, error) {
	if err != nil {
		return nil, err
	}
	st, ok := lim.(keyed.Mover)
	if !ok {
		return nil, fmt.Errorf("stress: %T moves no keys", lim)
	}
	return &moveBackStore{KeyedLimiter: lim, Mover: st, mb: mb}, nil
}

// moveBackStore is a store that moves keys, with the workload's waits
// around it and, when planted, the old Keep.
type moveBackStore struct {
	admit.KeyedLimiter
	keyed.Mover
	mb *moveBack
}

func (s *moveBackStore) Allow(key string) admit.Decision { return s.AllowN(key, 1) }

func (s *moveBackStore) AllowN(key string, n int) admit.Decision {
	if s.mb.now() {
		s.mb.untilReloaded() // the call holds a limiter of a book that may be gone
	}
	return s.KeyedLimiter.AllowN(key, n)
}

func (s *moveBackStore) AllowNWhich(key string, n int) (admit.Decision, int) {
	if s.mb.now() {
		s.mb.untilReloaded()
	}
	return s.KeyedLimiter.(admit.CompositeStore).AllowNWhich(key, n)
}

// Decide is the path of the Service's calls (keyed.Mover).
func (s *moveBackStore) Decide(key string, n int) (admit.Decision, int, bool) {
	if s.mb.now() {
		s.mb.untilReloaded()
	}
	return s.Mover.Decide(key, n)
}

func (s *moveBackStore) Put(key string, from []kernel.PartState) bool {
	ok := s.Mover.Put(key, from)
	if !ok {
		s.mb.refused.Add(1)
	}
	return ok
}

func (s *moveBackStore) SetHooks(h *keyed.Hooks) {
	if h == nil || h.Keep == nil {
		s.Mover.SetHooks(h)
		return
	}
	w := *h
	w.Keep = func(key string, adopted keyed.Epoch) bool {
		if s.mb.now() {
			s.mb.untilPublished() // under the key's lock: the next book may send the pair back here
		}
		if s.mb.planted {
			// BUG: the old Keep, which asked only whether the current book
			// sends the pair here, and let a call store a fresh state that
			// a Reload's move was still to bring here.
			return s.mb.svc.Load().Book().LimitsFor(key, moveBackPairs[key]) == s.Mover.Limits()
		}
		return h.Keep(key, adopted)
	}
	s.Mover.SetHooks(&w)
}

// moveBackCases are the limits of 10 and of 20 the workload runs with: each
// algorithm, and a composite.
var moveBackCases = []struct {
	name   string
	lo, hi string
	limits bool // a composite: built by keyedLimits
}{
	{"fixed-window", "fixed-window,10,1h", "fixed-window,20,1h", false},
	{"token-bucket", "token-bucket,10,1h", "token-bucket,20,1h", false},
	{"sliding-log", "sliding-log,10,1h", "sliding-log,20,1h", false},
	{"sliding-counter", "sliding-counter,10,1h", "sliding-counter,20,1h", false},
	{"composite", "fixed-window,10,1h + token-bucket,10,2h", "fixed-window,20,1h + token-bucket,20,2h", true},
}

// TestMoveBack runs the move-back workload on every keyed variant's
// stores, for each algorithm and a composite, a few runs each.
func TestMoveBack(t *testing.T) {
	runs := budget{full: 8, short: 2}.get()
	for _, v := range variants {
		for _, c := range moveBackCases {
			t.Run(v.name+"/"+c.name, func(t *testing.T) {
				keyed, keyedLimits := v.keyed, v.keyedLimits
				if c.limits {
					keyed = nil
				} else {
					keyedLimits = nil
				}
				for run := range runs {
					err := moveBackRun(keyed, keyedLimits, c.lo, c.hi, 30, 8, seedFor(t)+uint64(run), false)
					if errors.Is(err, admit.ErrUnsupported) {
						t.Skipf("%s: %v", v.name, err)
					}
					if err != nil {
						t.Fatalf("run %d (seed %d): %v", run, seedFor(t)+uint64(run), err)
					}
				}
			})
		}
	}
}

// TestSelfTestMoveBack plants the old Keep and requires the move-back
// workload to catch it, on a store of each variant.
func TestSelfTestMoveBack(t *testing.T) {
	trials := *trialsFlag
	if trials == 0 {
		trials = budget{full: 20, short: 10}.get()
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			for trial := 1; trial <= trials; trial++ {
				err := moveBackRun(v.keyed, nil, "fixed-window,10,1h", "fixed-window,20,1h", 30, 8, seedFor(t)+uint64(trial), true)
				if err != nil {
					t.Logf("caught in trial %d: %v", trial, err)
					return
				}
			}
			t.Errorf("the move-back workload did not catch the planted Keep in %d trials", trials)
		})
	}
}
