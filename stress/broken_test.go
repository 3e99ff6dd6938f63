package stress

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/reservation"
)

// Deliberately broken limiters, kept so that the self-tests can show that
// the harness fails on each bug it hunts. Each is the tempting wrong version
// of a real design, built on the real kernels, with its bug marked BUG. None
// is ever used outside the self-tests.

// lostUpdateTB is a copy of the atomic variant's packed token bucket
// (atomic.tbCell: the whole state is the TAT in one word) whose publish is a
// plain Store instead of a CompareAndSwap. Two goroutines that load the same
// word both decide on it and both publish: two admissions for one token. The
// race detector is silent (every access is atomic); only an oracle sees it.
type lostUpdateTB struct {
	w     atomic.Uint64
	k     *kernel.TokenBucket
	clock clock.Clock
}

func newLostUpdateTB(rule admit.Rule, clk clock.Clock) *lostUpdateTB {
	k := kernel.NewTokenBucket(rule)
	if !k.Packable() {
		panic("lostUpdateTB wants a rule whose token is whole nanoseconds")
	}
	return &lostUpdateTB{k: k, clock: clk}
}

func (l *lostUpdateTB) AllowN(n int) admit.Decision {
	now := l.clock.Now()
	old := l.w.Load()
	s := kernel.TokenBucketState{TAT: old}
	d := l.k.Allow(&s, now, n)
	if s.TAT != old {
		between(hook.BeforeCAS) // where the real variant calls hook.Between
		l.w.Store(s.TAT)        // BUG: CompareAndSwap(old, s.TAT), retrying on failure
	}
	return d
}

// noClampFW is a fixed window under a mutex that trusts its caller's
// reading: a reading from a window older than the state's (a stale reading:
// the caller read the clock, then waited) starts that old window afresh,
// forgetting the newer window's count. The next fresh reading finds the
// state in an older window and starts the current window afresh too: its
// admissions so far are forgotten, and it admits up to Limit more.
type noClampFW struct {
	mu    sync.Mutex
	s     kernel.FixedWindowState
	k     *kernel.FixedWindow
	clock clock.Clock
}

func newNoClampFW(rule admit.Rule, clk clock.Clock) *noClampFW {
	return &noClampFW{k: kernel.NewFixedWindow(rule), clock: clk}
}

func (l *noClampFW) AllowN(n int) admit.Decision {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.s.Count > 0 && l.k.Index(now) < l.s.Window {
		l.s = kernel.FixedWindowState{} // BUG: the kernel counts a stale reading against the newest window
	}
	return l.k.Allow(&l.s, now, n)
}

// naiveStore is a keyed token-bucket store with the sweeper of
// sethvargo/go-limiter's memorystore and ulule/limiter's Clean
// (docs/reliability.md, the eviction hazard): a call looks its entry up under the map's read lock,
// releases it and then uses the entry under the entry's own lock; the sweeper
// collects idle keys under the read lock, releases it, and deletes them under
// the write lock without checking again. An entry used between the two
// phases is deleted with its consumption (the key's next call starts from a
// full bucket), and a call that looked an entry up just before the delete
// admits on an orphan while the next call creates a second budget.
type naiveStore struct {
	mu    sync.RWMutex
	m     map[string]*naiveEntry // guarded by mu
	k     *kernel.TokenBucket
	clock clock.Clock
}

type naiveEntry struct {
	mu sync.Mutex
	s  kernel.TokenBucketState // guarded by mu
}

func newNaiveStore(rule admit.Rule, clk clock.Clock) *naiveStore {
	return &naiveStore{m: map[string]*naiveEntry{}, k: kernel.NewTokenBucket(rule), clock: clk}
}

func (st *naiveStore) AllowN(key string, n int) admit.Decision {
	now := st.clock.Now()
	st.mu.RLock()
	e := st.m[key]
	st.mu.RUnlock()
	if e == nil {
		st.mu.Lock()
		if e = st.m[key]; e == nil {
			e = new(naiveEntry)
			st.m[key] = e
		}
		st.mu.Unlock()
	}
	between(hook.AfterLookup) // where a real store would call hook.Between
	e.mu.Lock()
	defer e.mu.Unlock()
	return st.k.Allow(&e.s, now, n)
}

func (st *naiveStore) Sweep() int {
	now := st.clock.Now()
	var idle []string
	st.mu.RLock()
	for key, e := range st.m {
		e.mu.Lock()
		if st.k.Fresh(&e.s, now) {
			idle = append(idle, key)
		}
		e.mu.Unlock()
	}
	st.mu.RUnlock()
	between(hook.AfterLookup)
	st.mu.Lock()
	for _, key := range idle {
		delete(st.m, key) // BUG: deletes without checking that the entry is still idle
	}
	st.mu.Unlock()
	return len(idle)
}

// identitylessReserver is a keyed token bucket under one mutex whose
// cancellation judges a reservation by the state it left, not by which
// reservation it is: the design of admit's reservations before holds. A
// reservation cancelled once can be cancelled again after a later one left
// the same state, and a reservation of one key cancels another key's that
// happens to be in the same state: both give back tokens that were spent.
type identitylessReserver struct {
	mu    sync.Mutex
	k     *kernel.TokenBucket
	clock clock.Clock
	m     map[string]*kernel.TokenBucketState
	made  []reserved // a Reservation's ticket is its index here, plus 1
}

type reserved struct{ before, after kernel.TokenBucketState }

func newIdentitylessReserver(rule admit.Rule, clk clock.Clock) *identitylessReserver {
	return &identitylessReserver{k: kernel.NewTokenBucket(rule), clock: clk, m: map[string]*kernel.TokenBucketState{}}
}

func (b *identitylessReserver) state(key string) *kernel.TokenBucketState {
	s := b.m[key]
	if s == nil {
		s = new(kernel.TokenBucketState)
		b.m[key] = s
	}
	return s
}

func (b *identitylessReserver) AllowN(key string, n int) admit.Decision {
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.k.Allow(b.state(key), now, n)
}

func (b *identitylessReserver) ReserveN(key string, n int, maxWait time.Duration) (admit.Reservation, bool) {
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.state(key)
	before := *s
	d, ok := b.k.Reserve(s, now, n, maxWait)
	b.made = append(b.made, reserved{before, *s})
	return reservation.New(d, n, uint64(len(b.made))), ok
}

func (b *identitylessReserver) CancelReservation(key string, r admit.Reservation) bool {
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.made[reservation.Ticket(r)-1]
	return b.k.Cancel(b.state(key), now, m.before, m.after) // BUG: no identity: any reservation that left this state
}

// perRuleCAS is a composite limiter (admit.Limits) that keeps each rule's
// state in its own atomic word (a pointer to a state never modified once
// published) and decides and charges the rules one CompareAndSwap at a
// time, never all of them at once. Which BUG it has is its mode; each is a
// tempting way to build a lock-free composite from the lock-free cells of
// its rules.
type perRuleCAS struct {
	sp    *compositeSpec
	cells []atomic.Pointer[ruleWord] // one per rule, in order
	clock clock.Clock
	mode  perRuleMode
}

// ruleWord is one rule's state in a perRuleCAS.
type ruleWord struct{ s any }

type perRuleMode int

const (
	// chargeInTurn decides and charges the first rule by its own CAS, then
	// the second, and so on; a rule that denies returns the denial, and the
	// rules charged before it stay charged. No concurrency is needed: every
	// request that an earlier rule admits and a later one denies spends
	// the earlier rule's budget for nothing.
	chargeInTurn perRuleMode = iota
	// checkThenCharge decides every rule on its loaded word first (if one
	// denies, nothing is charged), then charges them one CAS at a time; a
	// CAS that fails decides that rule again on its new word, and if it now
	// denies (a concurrent request took its last units between the check
	// and the charge), returns the denial with the rules before it charged.
	// One goroutine alone gets exactly the composite's decisions.
	checkThenCharge
	// firstWordCAS decides every rule on its loaded word, then publishes
	// the first rule's word by CAS (retrying the whole decision if it
	// fails) and the other words by Store: as if the first word's CAS
	// guarded them all. Two requests that both pass the first CAS, the
	// second having loaded the other words before the first stored them,
	// charge the later rules once between them: those rules over-admit.
	firstWordCAS
)

func newPerRuleCAS(ls admit.Limits, clk clock.Clock, mode perRuleMode) *perRuleCAS {
	c := &perRuleCAS{sp: newCompositeSpec(ls), cells: make([]atomic.Pointer[ruleWord], ls.Len()), clock: clk, mode: mode}
	for i, p := range c.sp.parts {
		c.cells[i].Store(&ruleWord{p.init()})
	}
	return c
}

// charge decides n on rule i's word and publishes the result by CAS,
// deciding again on the new word until the CAS succeeds or the rule denies.
func (c *perRuleCAS) charge(i int, now time.Duration, n int) admit.Decision {
	for {
		old := c.cells[i].Load()
		d, next := c.sp.parts[i].step(old.s, now, n)
		if !d.Allowed || n <= 0 {
			return d
		}
		between(hook.BeforeCAS)
		if c.cells[i].CompareAndSwap(old, &ruleWord{next}) {
			return d
		}
	}
}

func (c *perRuleCAS) AllowN(n int) admit.Decision {
	now := c.clock.Now()
	k := len(c.cells)
	ds := make([]admit.Decision, k)
	switch c.mode {
	case chargeInTurn:
		for i := range k {
			if ds[i] = c.charge(i, now, n); !ds[i].Allowed {
				return denial(ds[i]) // BUG: the rules before i stay charged
			}
		}
	case checkThenCharge:
		olds := make([]*ruleWord, k)
		nexts := make([]any, k)
		for i := range k {
			olds[i] = c.cells[i].Load()
			if ds[i], nexts[i] = c.sp.parts[i].step(olds[i].s, now, n); !ds[i].Allowed {
				return denial(ds[i])
			}
		}
		for i := range k {
			if n <= 0 {
				break
			}
			between(hook.BeforeCAS)
			if c.cells[i].CompareAndSwap(olds[i], &ruleWord{nexts[i]}) {
				continue
			}
			if ds[i] = c.charge(i, now, n); !ds[i].Allowed {
				return denial(ds[i]) // BUG: the rules before i stay charged
			}
		}
	case firstWordCAS:
		for {
			olds := make([]*ruleWord, k)
			nexts := make([]any, k)
			for i := range k {
				olds[i] = c.cells[i].Load()
				if ds[i], nexts[i] = c.sp.parts[i].step(olds[i].s, now, n); !ds[i].Allowed {
					return denial(ds[i])
				}
			}
			if n <= 0 {
				break
			}
			between(hook.BeforeCAS)
			if !c.cells[0].CompareAndSwap(olds[0], &ruleWord{nexts[0]}) {
				continue
			}
			between(hook.BeforeCAS)
			for i := 1; i < k; i++ {
				c.cells[i].Store(&ruleWord{nexts[i]}) // BUG: CompareAndSwap(olds[i], …), all or none
			}
			break
		}
	}
	// An admission: the composite's Decision from the rules'.
	var d admit.Decision
	d.Allowed = true
	for i, pd := range ds {
		if i == 0 || pd.Remaining < d.Remaining {
			d.Remaining, d.Limit = pd.Remaining, pd.Limit
		}
		d.ResetAfter = max(d.ResetAfter, pd.ResetAfter)
	}
	return d
}

// denial is the Decision of a composite denied by a rule whose own
// denial is d: well formed, though it leaves out the other rules' waits.
func denial(d admit.Decision) admit.Decision {
	return admit.Decision{Limit: d.Limit, RetryAfter: d.RetryAfter, ResetAfter: d.ResetAfter}
}
