package mapstore

import (
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
	"github.com/admit-go/admit/internal/reservation"
)

// Every store of New and NewLimits is a keyed.Mover: a policy.Service
// Reload moves keys out of it one by one (Take), into it (Put), over its
// listed keys (Keys), and has its say over the keys it does not hold
// through the hooks (SetHooks).
//
// Take, Put and Keys work under the key's (each) shard's lock, which every
// call on the key holds for its whole work, so Take is linearized with the
// key's decisions exactly as Reset is: a decision ordered before it is in
// the state taken; one ordered after finds the key missing.
//
// The hooks are read only on the path of a key the shard does not hold
// (missing, and the same place in reserveHeld), never on the path of a
// stored key: a store without hooks pays one atomic load there. On that path Adopt is called with the shard's lock released (it
// may Put the key here, and the Service takes its migration mutex before
// any store's lock, so that two stores trading keys cannot deadlock), and
// the key is looked up again under the lock; if it is still missing, Keep
// is asked under the lock, right before the key would be inserted. A call
// Keep refuses stores nothing, releases the lock and is decided by
// Redirect. Every call on a missing key asks Keep, probes and denials
// included, which insert nothing: a key that moved has its state elsewhere,
// and a probe here would report a fresh one.

var (
	_ keyed.Mover = (*fullKeys[uint64])(nil)
	_ keyed.Mover = (*hashedKeys[kernel.Log])(nil)
	_ keyed.Mover = tbFullKeys[kernel.TokenBucketState]{}
	_ keyed.Mover = tbHashedKeys[uint64]{}
	_ keyed.Mover = (*compFullKeys[[2]kernel.PartState])(nil)
	_ keyed.Mover = (*compHashedKeys[[8]kernel.PartState])(nil)
	_ keyed.Mover = tbCompFullKeys[[3]kernel.PartState]{}
	_ keyed.Mover = tbCompHashedKeys[[2]kernel.PartState]{}
)

// Limits implements [keyed.Mover]: the store's rule, as one-rule Limits.
func (l *fullKeys[S]) Limits() admit.Limits { return oneRule(l.rule) }

// Limits implements [keyed.Mover]: the store's rule, as one-rule Limits.
func (l *hashedKeys[S]) Limits() admit.Limits { return oneRule(l.rule) }

// oneRule returns the Limits of the valid rule r.
func oneRule(r admit.Rule) admit.Limits {
	limits, _ := admit.NewLimits(r) // New's caller validated r
	return limits
}

// SetHooks implements [keyed.Mover].
func (l *store[KT, S]) SetHooks(h *keyed.Hooks) { l.hooks.SetHooks(h) }

// Take implements [keyed.Mover] (keyed.Take, layout.Export): under the
// key's shard's lock it deletes the key and its hold, uncounts it against
// WithMaxKeys, and writes its state to into. It does not raise the floor,
// as Reset does not: the key was not judged fresh.
func (l *store[KT, S]) Take(key string, into []kernel.PartState) bool {
	return keyed.Take(l.layout(), &l.keys, key, into)
}

// Put implements [keyed.Mover] (keyed.Put, layout.Import). from must hold
// states of the store's limits, as kernel.Convert writes them; Put keeps
// from's sliding logs rather than copying them, so the caller hands them
// over with a Put that stores the key. It stores the key under the store's
// own copy, after the room a new key makes (keyed.Add), and counts it
// against WithMaxKeys beyond the bound if none could be made: a carried
// state is never dropped for want of room.
func (l *store[KT, S]) Put(key string, from []kernel.PartState) bool {
	return keyed.Put(l.layout(), &l.keys, l.horizon, key, from)
}

// Keys implements [keyed.Mover] (keyed.Keys): each shard's keys, copied
// under its lock, yielded after releasing it, so that yield may call the
// store (Take the key, say). A store of hashed keys keeps no keys to give
// and returns false at once.
func (l *store[KT, S]) Keys(yield func(key string) bool) bool { return keyed.Keys(l.layout(), yield) }

// export writes the state *s to into as parts of the store's limits,
// dispatching on the kernel as decide does. A sliding log's part is s
// itself.
func (l *store[KT, S]) export(s *S, into []kernel.PartState) {
	switch l.kern.(type) {
	case *packedTB, *kernel.TokenBucket:
		into[0] = kernel.PartState{}
		into[0].SetTB(tbState(s))
	case *kernel.FixedWindow:
		into[0] = kernel.PartState{}
		into[0].SetFW(*any(s).(*kernel.FixedWindowState))
	case *kernel.SlidingLog:
		into[0] = kernel.PartState{Log: any(s).(*kernel.Log)}
	case *kernel.Composite:
		copy(into, parts(s))
	default:
		into[0] = kernel.PartState{}
		into[0].SetSC(*any(s).(*kernel.SlidingCounterState))
	}
}

// imported returns a new stored state holding from, export's inverse. A
// sliding log's part is from's log itself (a new empty log for a part that
// has none), and a packed token bucket keeps the TAT alone (its Frac is
// always 0: kernel.TokenBucket.Packable).
func (l *store[KT, S]) imported(from []kernel.PartState) *S {
	switch l.kern.(type) {
	case *packedTB, *kernel.TokenBucket:
		s := new(S)
		setTBState(s, from[0].TB())
		return s
	case *kernel.FixedWindow:
		s := new(kernel.FixedWindowState)
		*s = from[0].FW()
		return any(s).(*S)
	case *kernel.SlidingLog:
		if from[0].Log != nil {
			return any(from[0].Log).(*S)
		}
		return new(S)
	case *kernel.Composite:
		s := new(S)
		copy(parts(s), from)
		return s
	default:
		s := new(kernel.SlidingCounterState)
		*s = from[0].SC()
		return any(s).(*S)
	}
}

// missing decides a request for n on key, whose map key mk sh does not
// hold: through the hooks if the store has any, else as a new key
// (insert). It requires that sh.mu is held, and releases it. It holds
// the whole path of a missing key, so that allow's path for a stored key
// reads no hook. A call the hooks' Keep refused is redirected (redirect)
// when moved is nil, or reported in *moved, with nothing decided (see
// allow); h is the key's hash.
func (l *store[KT, S]) missing(sh *shard[KT, S], key string, mk KT, h uint64, now time.Duration, n int, moved *bool) (admit.Decision, int) {
	if hk := l.hooks.Load(); hk != nil {
		s, redirect := l.consult(sh, hk, key, mk)
		if redirect { // sh.mu released
			if moved != nil {
				*moved = true
				return admit.Decision{}, 0
			}
			return l.redirect(key, mk, h, n)
		}
		if s != nil { // Adopt put the key here
			d, which := l.decideWhich(s, now, n)
			if len(sh.holds.M) != 0 {
				l.showHold(sh, s, now)
			}
			if len(sh.cheld.M) != 0 {
				l.showCompositeHold(sh, s, now)
			}
			sh.mu.Unlock()
			return d, which
		}
	}
	d, which := l.insert(sh, mk, now, n)
	sh.mu.Unlock()
	return d, which
}

// redirect decides n requests for key, whose map key is mk and whose hash
// is h, which the hooks' Keep refused (keyed.HookPoint.Redirect).
func (l *store[KT, S]) redirect(key string, mk KT, h uint64, n int) (admit.Decision, int) {
	return l.hooks.Redirect(key, n, func() (admit.Decision, int, bool) {
		var moved bool
		d, which := l.allow(key, mk, h, n, &moved)
		return d, which, moved
	})
}

// consult runs the hooks hk for a call on key, whose map key mk sh does not
// hold. If hk has an Adopt, it releases sh.mu, calls Adopt, takes sh.mu
// again and returns the key's state if Adopt put it here. Then, for a key
// still missing, if the hooks do not keep it (keyed.Hooks.Keeps, asked
// with the Epoch that this Adopt returned), consult releases sh.mu and
// returns redirect true: the caller reports the call moved or decides it
// with hk.Redirect.
// Otherwise it returns nil and false, sh.mu held: the caller inserts the
// key as usual. The call's reading, taken before, stays its reading: it is
// stale by the time Adopt took, as any reading is by the time its call
// waited for the lock (see shard.floor).
//
// It requires that sh.mu is held, and returns with it held unless redirect.
func (l *store[KT, S]) consult(sh *shard[KT, S], hk *keyed.Hooks, key string, mk KT) (s *S, redirect bool) {
	var adopted keyed.Epoch
	if hk.Adopt != nil {
		sh.mu.Unlock()
		adopted = hk.Adopt(key)
		sh.mu.Lock()
		if s = sh.m[mk]; s != nil {
			return s, false
		}
	}
	if !hk.Keeps(key, adopted) {
		sh.mu.Unlock()
		return nil, true
	}
	return nil, false
}

// reserveElsewhere is a reservation of n on key that the hooks hk refused
// to keep: Redirect decides it, as an AllowN, which reserves nothing ahead.
// An admission is a reservation due now that cannot be cancelled (the store
// that admitted it keeps no record of it); a denial refuses the
// reservation, taking nothing, with the denial's RetryAfter as its Delay,
// so that admit.WaitKeyN sleeps that long and asks again, as it polls a
// window (or gives up at once if that is beyond its deadline). Waiters on a
// moved key are therefore polled rather than paced until their caller
// reaches the key's new store.
func reserveElsewhere(hk *keyed.Hooks, key string, n int) (admit.Reservation, bool) {
	d, _ := hk.Redirect(key, n)
	return reservation.Now(d.Allowed, d.RetryAfter, n)
}
