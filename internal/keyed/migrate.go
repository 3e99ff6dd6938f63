package keyed

import (
	"sync/atomic"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
)

// This file is the protocol by which a keyed store hands keys to
// another when the limits of some of its keys change: a policy.Service
// Reload moves each pair whose limits changed from its old limiter to its
// new one, carrying its state (kernel.Convert), while Checks go on.
//
// A Service's limiters are shared (one per limits and API, keyed by user),
// so a store is never sealed whole: keys move one by one. The store
// primitives are Take (remove a key and return its state, linearizable with
// decisions on it), Put (store a key with a given state unless held) and
// Keys (list the keys, for the Reload's pass over them); the Service's say
// over a store's new keys is Hooks, which the store consults only on the
// insertion path of a key it does not hold. docs/design.md ("How a key
// moves") has the protocol and why no admission is lost or counted twice.

// Mover is a keyed store whose keys can move to another store.
type Mover interface {
	// Limits returns the limits the store enforces: a one-rule Limits
	// for a single rule's store.
	Limits() admit.Limits

	// Decide is AllowNWhich for the owner of the hooks: it decides n
	// requests for key and returns the decision and the index of the rule
	// that bound, or moved true, with nothing decided, when the key is
	// missing and the hooks' Keep refused it (the call belongs to another
	// store now, and the owner decides it there). The store's own methods
	// (AllowN, AllowNWhich, ReserveN) decide such a call with the hooks'
	// Redirect instead, so that none returns anything but a decision.
	Decide(key string, n int) (d admit.Decision, which int, moved bool)

	// Take removes key from the store and writes its state, as parts of
	// Limits (len(into) == Limits().Len()), to into; it reports whether the
	// store held the key. It works under the key's shard mutex: a decision
	// on key concurrent with Take is ordered before it (its effect is in
	// the state taken) or after it (it finds the key missing and goes to
	// the insertion path, where Hooks.Keep refuses it). A lock-free store
	// freezes the key's word or cell first, so that a call holding a stale
	// pointer cannot decide on it after Take. A hold (a reservation that may
	// still be cancelled) is dropped, as Reset drops it.
	Take(key string, into []kernel.PartState) bool

	// Put stores key with the state from (parts of Limits) if the store
	// does not hold it, and reports whether it stored it. It makes room as
	// a new key does, and exceeds the store's key bound if none can be
	// made rather than drop a carried state.
	Put(key string, from []kernel.PartState) bool

	// Keys calls yield with every key the store holds (a snapshot of each
	// shard, taken under its mutex) until yield returns false, and
	// reports whether it could: a store of hashed keys has no keys to give,
	// and reports false without calling yield. yield runs with none of the
	// store's locks held, so that it may Take the key.
	Keys(yield func(key string) bool) bool

	// SetHooks installs h (nil removes them). The store reads them only on
	// the insertion path of a key it does not hold.
	SetHooks(h *Hooks)
}

// Epoch names one Reload's move of keys, from the opening of its window to
// its close: a Service numbers its Reloads that move keys from 1 on, and 0
// names none. It is how a call's Keep knows which move its Adopt saw.
type Epoch uint64

// Hooks are a Service's say over a store's new keys.
//
// A store asks them on the path of a call on a key it does not hold: Adopt
// first, if set, before any lock of the store's own, then Keep, under the
// key's lock, with what that Adopt returned (0 when the hooks have no Adopt,
// or the store did not call it, having seen the key held then). Keep may
// refuse a key that a move is still to bring here and that the call's
// Adopt did not settle: so a store must pass Keep the Adopt's own answer,
// from the same call, never one it kept from another.
type Hooks struct {
	// Adopt is called with a call's key that the store does not hold,
	// before the store takes any lock of its own; it may Put the key,
	// moving it from another store. It returns the Epoch of the move under
	// which it settled the key (took it from the store the key moves from,
	// or found it held by none), or 0 if it settled nothing. Nil: nothing
	// to adopt.
	Adopt func(key string) Epoch

	// Keep is called under the key's shard mutex before the store inserts
	// key, with the Epoch the call's Adopt returned (0 if none ran). False
	// means the key does not belong in this store now: its pair resolves
	// to other limits, or a move in progress is still to bring its state
	// here and adopted is not that move's Epoch. The store must not insert
	// key then: Decide reports the call moved, and the store's other
	// methods decide it with Redirect, after releasing the mutex. Nil:
	// keep every key.
	Keep func(key string, adopted Epoch) bool

	// Redirect decides a call to one of the store's own methods (AllowN,
	// AllowNWhich, ReserveN) that the store refused to keep: n requests for
	// key, returning the decision and the index of the rule that bound,
	// which the store returns as the call's, unchanged (a policy.Service's
	// Redirect decides the call under its current book, as a Check would).
	// A reservation the store refused to keep is Redirect's decision too:
	// an admission due at once that cannot be cancelled, or a refusal whose
	// Delay is the denial's RetryAfter. A store whose hooks have Keep but
	// no Redirect keeps every key, as it has nowhere to send a call.
	Redirect func(key string, n int) (admit.Decision, int)
}

// HookPoint is where a store keeps its owner's Hooks, with the store's side
// of their rules, written once for every container: SetHooks, whether a
// missing key may be inserted ([Hooks.Keeps]) and how a refused call to
// the store's own methods is decided (Redirect). The zero HookPoint has
// no hooks. A store reads it only on the path of a key it does not hold.
type HookPoint struct{ p atomic.Pointer[Hooks] }

// SetHooks is [Mover]'s: it installs h (nil removes them).
func (hp *HookPoint) SetHooks(h *Hooks) { hp.p.Store(h) }

// Load returns the hooks, nil if none.
func (hp *HookPoint) Load() *Hooks { return hp.p.Load() }

// Keeps reports whether the hooks h (nil: none) let a store insert key,
// which it does not hold, for a call whose Adopt returned adopted: true
// without hooks, without a Keep, or without a Redirect to send a refused
// call to; Keep's answer otherwise. A store asks it under the key's lock,
// right before it would insert the key, for every call on a missing key,
// probes and denials included (a key that moved has its state elsewhere,
// and a probe here would report a fresh one).
func (h *Hooks) Keeps(key string, adopted Epoch) bool {
	return h == nil || h.Keep == nil || h.Redirect == nil || h.Keep(key, adopted)
}

// Redirect decides n requests for key, a call to a store's own methods
// (AllowN, AllowNWhich, ReserveN) that Keep refused, with the hooks'
// Redirect. Should the hooks have been removed since, the store decides
// the call itself (decide, its Decide), as any call without hooks; should
// they have come back meanwhile and refused it again (moved), it asks them
// again.
func (hp *HookPoint) Redirect(key string, n int, decide func() (d admit.Decision, which int, moved bool)) (admit.Decision, int) {
	for {
		if h := hp.p.Load(); h != nil && h.Redirect != nil {
			return h.Redirect(key, n)
		}
		if d, which, moved := decide(); !moved {
			return d, which
		}
	}
}
