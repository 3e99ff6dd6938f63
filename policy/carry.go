package policy

import (
	"fmt"
	"maps"
	"slices"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
)

// How a Reload carries the state of the pairs whose limits change
// (docs/design.md, "How a key moves", has the protocol; internal/keyed the
// store's side of it). A Service's limiters are shared, one per (limits,
// API) keyed by user, so a limiter can hold pairs whose limits change beside
// pairs whose limits do not: keys move one by one, never a whole limiter.
//
// Every limiter that is a keyed.Mover has, for its life, a Keep hook (may
// the pair be stored here afresh: does it resolve to this limiter in the
// current snapshot, and is no move still to bring its state here? see keep)
// and a Redirect hook (decide the call again, through the current
// snapshot), which it consults only when it would insert a key it does not
// hold. The Service itself decides through the limiter's Decide, which
// reports a call Keep refused as moved, deciding nothing, and decides it
// again under its current snapshot; Redirect is for a caller of the
// limiter's own AllowN (one that kept it from its factory). A Reload
// carrying state:
//
//  1. compiles the new snapshot, reusing the limiters of unchanged limits,
//     and refuses (canCarry) if a pair whose limits change is kept, on
//     either side, by a limiter without the protocol;
//  2. opens the migration window (s.moving), numbered by a new Epoch, and
//     gives every limiter of the new snapshot an Adopt hook: once the
//     snapshot is published, a key it does not hold is first taken from
//     the pair's limiter in the old snapshot, converted and put;
//  3. publishes the snapshot, which names the Reload (snapshot.mig);
//  4. takes, converts and puts every key of every old limiter whose pair
//     now resolves to other limits (the eager pass);
//  5. closes the window and removes the Adopt hooks.
//
// Each move runs under the migration mutex, moveMu, taken before any
// limiter's own mutex (Adopt runs before the limiter takes its shard's
// mutex): two limiters that trade pairs in one Reload cannot deadlock, and
// a key moves once. A call that was inside an old limiter when the snapshot
// was published either decided before the Take (its admission is in the
// state carried) or finds its key missing, is refused by Keep (the pair
// resolves elsewhere now) and is decided again under the new limits
// (moved): no admission is lost or counted twice. A call that a Reload
// sent to a limiter and that finds its pair missing there only after a
// later Reload has published a snapshot that sends the pair back is refused
// too, unless its own Adopt settled the pair under that later Reload (Keep
// is given Adopt's Epoch): it is decided again, and adopts the pair first,
// so that the later Reload's move never finds the pair stored afresh.

// ReloadOption configures one [Service.Reload]. Build it with [WithCarry];
// an invalid one makes Reload return an error wrapping
// [admit.ErrInvalidOption] and change nothing.
type ReloadOption interface {
	applyReload(*reloadSettings) error
}

// reloadSettings are the options of one Reload.
type reloadSettings struct {
	carry Carry // CarryConsumed unless WithCarry says otherwise
}

// reloadOption is a ReloadOption that runs f.
type reloadOption func(*reloadSettings) error

func (f reloadOption) applyReload(s *reloadSettings) error { return f(s) }

// WithCarry makes [Service.Reload] carry the state of each pair whose
// limits change into the new limits as c says: [CarryConsumed] (the
// default: what was consumed stays consumed, all of it, even past the new
// Limit), [CarryProportional] (the same fraction of the budget stays
// consumed) or [CarryNothing] (the pair starts afresh under the new
// limits, and Reload moves nothing).
//
// The promise, on a clock that does not move and across any sequence of
// Reloads: with CarryConsumed a pair is admitted at most the largest Limit
// of the limits it was under (a composite's smallest rule's), so limits of
// 10, 5 and 10 again admit 10, not 15; with CarryProportional at most the
// largest Limit of any rule it was under (the same for one-rule limits);
// CarryNothing keeps no such promise, each change starting the pair fresh.
// docs/algorithms.md ("A limit that changes") gives each strategy per
// algorithm and proves both bounds. Any other c makes Reload return an
// error wrapping [admit.ErrInvalidOption].
func WithCarry(c Carry) ReloadOption {
	return reloadOption(func(s *reloadSettings) error {
		if c < CarryConsumed || c > CarryNothing {
			return fmt.Errorf("%w: policy.WithCarry(%v); pass policy.CarryConsumed, policy.CarryProportional or policy.CarryNothing", admit.ErrInvalidOption, c)
		}
		s.carry = c
		return nil
	})
}

// protocol is what the limiters of some limits offer a Reload that moves
// their keys. All limiters of one Limits are built by one factory with the
// same options, so the first one built speaks for all.
type protocol struct {
	store bool   // keyed.Mover: Take and Put
	lists bool   // and Keys lists its keys (not hashed keys)
	typ   string // the limiter's type, for errors
}

// protocolOf returns what lim, a new and empty limiter, offers.
func protocolOf(lim admit.KeyedLimiter) protocol {
	p := protocol{typ: fmt.Sprintf("%T", lim)}
	if m, ok := lim.(keyed.Mover); ok {
		p.store = true
		p.lists = m.Keys(func(string) bool { return false })
	}
	return p
}

// newAPILimiter boxes lim, the limiter of g's limits for api, and gives it
// its hooks if it is a keyed.Mover: Keep and Redirect for its life, and
// Adopt too while a Reload's keys are moving (a limiter built during the
// window keeps its Adopt after it, which then finds no Reload and returns).
// A limiter of a LimiterFactory gets no hooks, whatever its type: the
// Service moves none of its keys.
func (s *Service) newAPILimiter(g *group, api string, lim admit.KeyedLimiter, which whicher) *apiLimiter {
	a := &apiLimiter{lim: lim, which: which, g: g, api: api, obs: s.obs}
	m, ok := lim.(keyed.Mover)
	if !ok || s.build.target != nil {
		return a // a LimiterFactory's limiter converts its keys itself (target.go)
	}
	a.mig = m
	if a.obs == nil {
		a.fast = m
	}
	keep := func(user string, adopted keyed.Epoch) bool { return s.keep(a, user, adopted) }
	// A call to the limiter's own methods that Keep refused (the Service
	// calls Decide, which reports it moved instead) is decided as a Check
	// of the pair now would decide it.
	redirect := func(user string, n int) (admit.Decision, int) {
		d, _, i := s.CheckNWhich(user, a.api, n)
		return d, i
	}
	a.hooks[0] = &keyed.Hooks{Keep: keep, Redirect: redirect}
	a.hooks[1] = &keyed.Hooks{Adopt: func(user string) keyed.Epoch { return s.adopt(a, user) }, Keep: keep, Redirect: redirect}
	a.setHooks(s.moving.Load() != nil)
	return a
}

// stored gives a, a limiter that a Check built and stored in its group, its
// Adopt hook if a Reload's window has opened since newAPILimiter looked:
// open's pass over the groups' limiters may have missed one stored while it
// ran, and a limiter without Adopt in a window that moves pairs into it
// would refuse those pairs (keep) until the window closed. The window is
// opened (s.moving) before that pass, so one of the two sees the other.
func (s *Service) stored(a *apiLimiter) {
	if s.moving.Load() != nil {
		a.setHooks(true)
	}
}

// setHooks gives the limiter its hooks, with Adopt or without.
func (a *apiLimiter) setHooks(adopt bool) {
	if a.mig == nil {
		return
	}
	h := a.hooks[0]
	if adopt {
		h = a.hooks[1]
	}
	a.mig.SetHooks(h)
}

// groupOf returns the group of the pair (user, api) in the snapshot.
func (s *snapshot) groupOf(user, api string) *group {
	if g := s.users[user]; g != nil {
		return g
	}
	if a := s.apis[api]; a != nil {
		return a.g
	}
	return s.def
}

// migration is one Reload's move of keys: the snapshots before and after,
// the strategy, and its Epoch. It is open, its keys moving, while s.moving
// holds it: from before new is published until every move is over (close).
type migration struct {
	old, new *snapshot
	carry    Carry
	epoch    keyed.Epoch
}

// carry publishes snap, which replaces old, and moves the keys of the pairs
// whose limits change (steps 2 to 5 above). It requires s.mu.
func (s *Service) carry(old, snap *snapshot, c Carry) {
	mv := s.open(old, snap, c)
	s.moveAll(mv)
	s.close(mv)
}

// open opens the migration window of a Reload from old to snap with the
// strategy c, gives the limiters of snap their Adopt hooks, and publishes
// snap (steps 2 and 3). It requires s.mu.
func (s *Service) open(old, snap *snapshot, c Carry) *migration {
	s.epoch++
	mv := &migration{old: old, new: snap, carry: c, epoch: s.epoch}
	snap.mig = mv
	s.moving.Store(mv)
	snap.eachLimiter(func(a *apiLimiter) { a.setHooks(true) })
	s.cur.Store(snap)
	for _, a := range snap.sealed {
		a.use.CompareAndSwap(sealed, unused) // Keep refuses the pairs that moved now
	}
	return mv
}

// moveAll moves every key of every limiter of mv.old whose pair resolves to
// other limits in mv.new (step 4), one key at a time under s.moveMu. It
// skips the limiters none of whose pairs change, and the keys whose pair
// resolved elsewhere already in mv.old (states kept from an earlier book by
// a Reload with CarryNothing, which are not the pair's). It requires s.mu.
func (s *Service) moveAll(mv *migration) {
	for _, og := range mv.old.groups {
		og.byAPI.Range(func(_, v any) bool {
			o := v.(*apiLimiter)
			if o.mig == nil || len(mv.old.moves(mv.new.book, og, o.api)) == 0 {
				return true
			}
			o.mig.Keys(func(user string) bool {
				if mv.old.groupOf(user, o.api) != og {
					return true
				}
				ng := mv.new.groupOf(user, o.api)
				if ng == og {
					return true
				}
				s.moveMu.Lock()
				defer s.moveMu.Unlock()
				if dst, err := ng.limiter(o.api); err == nil {
					s.move(o, dst, user, mv.carry)
				}
				return true
			})
			return true
		})
	}
}

// close closes the migration window and removes the Adopt hooks (step 5).
// It closes the window under s.moveMu, after every move in progress: a
// move that an Adopt began has taken the key out of the old limiter, where
// the eager pass no longer saw it, and has yet to put it into the new one;
// a call that found the window closed and stored the key afresh there
// before the put would lose the state carried. It requires s.mu.
func (s *Service) close(mv *migration) {
	s.moveMu.Lock()
	s.moving.Store(nil)
	s.moveMu.Unlock()
	mv.new.eachLimiter(func(a *apiLimiter) { a.setHooks(false) })
}

// keep is the Keep hook of a: may a store user's pair afresh, a call on it
// having found it missing, with adopted the Epoch of the call's Adopt (0 if
// it ran none)? Not if the pair resolves to other limits in the current
// snapshot (the call is decided again there), nor while the Reload that
// published that snapshot is still to move the pair's state here, unless
// the call's Adopt settled the pair under that very Reload.
//
// This is where the rule that a move never finds its key stored afresh
// holds (move): a Check that was sent to a by an older snapshot, found the
// pair missing and ran its Adopt (or none) before a Reload that brings the
// pair back to a opened, must not store a fresh state once that Reload has
// published; the Reload's move would then find the key held and drop the
// state it carries (the pair spends the old limit again). Refused, the
// call is decided again, and its Adopt, under the open Reload, moves the
// pair first. A call whose Adopt settled the pair (took it from its old
// limiter, or found it in none) may store it: no move of that Reload puts
// it here after, as the old limiter cannot be given it again (its Keep
// refuses it: the snapshot sends the pair here). The snapshot is read
// before s.moving, so a Reload seen open is the one that published it, and
// one seen closed has finished every move.
//
// A pair let in marks the limiter used (mark), unless a Reload has sealed
// it: then keep refuses every pair until that Reload publishes.
func (s *Service) keep(a *apiLimiter, user string, adopted keyed.Epoch) bool {
	snap := s.cur.Load()
	if snap.groupOf(user, a.api) != a.g {
		return false
	}
	if mv := snap.mig; mv != nil && mv.epoch != adopted && s.moving.Load() == mv && mv.old.groupOf(user, a.api) != a.g {
		return false // the open Reload is still to bring the pair's state here
	}
	return a.mark()
}

// The states of apiLimiter.use: whether the limiter may hold a pair, which
// a Reload needs to know of a limiter that cannot list its users (hashed
// keys): one that never held a pair has nothing to carry.
const (
	unused uint32 = iota // no Keep has let a pair in, no move has put one
	used                 // the limiter may hold a pair
	sealed               // unused, and a Reload that counted on it has yet to publish: Keep refuses every pair
)

// mark records that a may hold a pair from now on, and reports whether it
// may: not while it is sealed. keep calls it under the key's lock, before
// the store inserts the key, so that a Reload that seals a (seal) and a
// call that stores a pair in it are ordered by one CompareAndSwap: the
// Reload finds a used and is refused, or the call finds a sealed and is
// decided again, after the Reload has published and the pair resolves
// elsewhere. Once a is used, mark is one load.
func (a *apiLimiter) mark() bool {
	for {
		switch a.use.Load() {
		case used:
			return true
		case sealed:
			return false
		}
		if a.use.CompareAndSwap(unused, used) {
			return true
		}
	}
}

// seal reports whether a never held a pair and, if so, seals it: Keep
// refuses every pair until the Reload that sealed it publishes its
// snapshot and unseals it (open), or fails and unseals it (canCarry). A
// sealed limiter therefore holds no pair of the old book when the new one
// is published, and after, Keep refuses the pairs that moved.
func (a *apiLimiter) seal() bool { return a.use.CompareAndSwap(unused, sealed) }

// adopt is the Adopt hook of a: it moves user's key into a from the pair's
// limiter in the snapshot before the Reload, if the current snapshot's
// Reload is moving keys, sends the pair to a and sent it elsewhere before.
// It returns that Reload's Epoch once the pair is settled (moved, or found
// in no old limiter), and 0 if it settled nothing. It runs before a takes
// any mutex of its own. It acts only once the Reload has published its
// snapshot, after which the old limiter refuses to store the pair again.
func (s *Service) adopt(a *apiLimiter, user string) keyed.Epoch {
	mv := s.cur.Load().mig
	if mv == nil || s.moving.Load() != mv || mv.new.groupOf(user, a.api) != a.g {
		return 0
	}
	og := mv.old.groupOf(user, a.api)
	if og == a.g {
		return 0
	}
	s.moveMu.Lock()
	defer s.moveMu.Unlock()
	if s.moving.Load() != mv {
		return 0 // the eager pass is over: the key moved, if it was to
	}
	if v, ok := og.byAPI.Load(a.api); ok {
		s.move(v.(*apiLimiter), a, user, mv.carry)
	}
	return mv.epoch
}

// move takes user's key from the limiter from, converts its state to the
// limits of to at the clock's reading, and puts it into to. The Put finds
// the key held only when to keeps a state of the pair from before a Reload
// with CarryNothing, which resumes (see Reload), and the state taken is
// dropped: no Check stores the pair in to while a move is still to bring
// it there (keep), and a pair adopted is no longer in from. It requires
// s.moveMu.
func (s *Service) move(from, to *apiLimiter, user string, c Carry) {
	if from.mig == nil || to.mig == nil {
		return
	}
	var fs, ts [admit.MaxLimits]kernel.PartState
	fl, tl := from.g.limits.Len(), to.g.limits.Len()
	if !from.mig.Take(user, fs[:fl]) {
		return
	}
	to.use.Store(used) // no Reload seals it meanwhile: they are serialized, and this one has published
	kernel.Convert(from.g.kern, fs[:fl], to.g.kern, ts[:tl], s.clock.Now(), kernel.Conversion(c))
	to.mig.Put(user, ts[:tl])
}

// eachLimiter calls f with every limiter built in the snapshot's groups.
func (s *snapshot) eachLimiter(f func(*apiLimiter)) {
	for _, g := range s.groups {
		g.byAPI.Range(func(_, v any) bool {
			f(v.(*apiLimiter))
			return true
		})
	}
}

// moved is a set of pairs whose limits change in a Reload: the users of an
// API, one named user (or, with others, every user without an entry in
// either book), from the limits of one group to those of another.
type moved struct {
	user   string // "" with others
	others bool
	to     admit.Limits
}

// moves returns the sets of pairs that the limiter of og for api holds in
// the snapshot s and that resolve to other limits in book: those of every
// user without an entry in either book, then those of each user named in
// either book, by name.
func (s *snapshot) moves(book *Book, og *group, api string) []moved {
	var out []moved
	check := func(user string, others bool, from, to admit.Limits) {
		if from == og.limits && to != og.limits {
			out = append(out, moved{user: user, others: others, to: to})
		}
	}
	check("", true, s.book.othersLimits(api), book.othersLimits(api))
	users := slices.Sorted(maps.Keys(s.book.users))
	for u := range book.users {
		if _, ok := s.book.users[u]; !ok {
			users = append(users, u)
		}
	}
	slices.Sort(users)
	for _, u := range users {
		check(u, false, s.book.LimitsFor(u, api), book.LimitsFor(u, api))
	}
	return out
}

// othersLimits returns the limits of api's users that have no entry of
// their own.
func (b *Book) othersLimits(api string) admit.Limits {
	if l, ok := b.apis[api]; ok {
		return l
	}
	return b.def
}

// canCarry reports, as an error wrapping admit.ErrUnsupported, a pair
// whose limits change from s to snap (whose groups are built and proven,
// its API limiters perhaps not yet published) that cannot carry its state:
// its limiter in s may hold pairs and cannot hand over its keys (Take and
// Keys), or the limiters of its new limits cannot take a state (Put). A
// limiter not built holds no pair; nor does one of hashed keys that no
// pair ever reached (an API entry's, built with the book), which canCarry
// seals (apiLimiter.seal) and returns, for open to unseal once snap is
// published. It reports the first such pair in the order of s's book (its
// entries' limits, then APIs and users by name), and then seals nothing.
func (s *snapshot) canCarry(snap *snapshot, c Carry) (seals []*apiLimiter, err error) {
	defer func() {
		if err != nil {
			for _, a := range seals {
				a.use.CompareAndSwap(sealed, unused)
			}
			seals = nil
		}
	}()
	seen := map[*group]bool{}
	for _, e := range s.book.Rules() {
		og := s.groups[e.Limits]
		if seen[og] {
			continue
		}
		seen[og] = true
		var apis []string
		og.byAPI.Range(func(k, _ any) bool {
			apis = append(apis, k.(string))
			return true
		})
		slices.Sort(apis)
		for _, api := range apis {
			ms := s.moves(snap.book, og, api)
			if len(ms) > 0 && og.proto.store && !og.proto.lists {
				if v, _ := og.byAPI.Load(api); v.(*apiLimiter).seal() {
					seals = append(seals, v.(*apiLimiter))
					continue // it holds no pair: nothing to carry
				}
			}
			for _, m := range ms {
				ng := snap.groups[m.to]
				switch {
				case !og.proto.store:
					return seals, carryError(c, api, m, og.limits, "their limiter, a "+og.proto.typ+", cannot hand over its users' states")
				case !og.proto.lists:
					return seals, carryError(c, api, m, og.limits, "their limiter keeps hashed keys, which it cannot list")
				case !ng.proto.store:
					return seals, carryError(c, api, m, og.limits, "the limiter of the new limits, a "+ng.proto.typ+", cannot take a carried state")
				}
			}
		}
	}
	return seals, nil
}

// carryError is canCarry's error for the pairs m of api, whose limits were
// from.
func carryError(c Carry, api string, m moved, from admit.Limits, why string) error {
	who := fmt.Sprintf("user %q", m.user)
	if m.others {
		who = "the users without an entry of their own"
	}
	return fmt.Errorf("%w: policy: Reload: the limits of %s on API %q change from %v to %v, and %s, so their state cannot be carried (carry %v; docs/configuration.md, \"Changing limits\", lists the limiters that carry it); pass WithCarry(policy.CarryNothing) to start those pairs afresh under the new limits",
		admit.ErrUnsupported, who, api, from, m.to, why, c)
}
