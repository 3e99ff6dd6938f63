package mapstore

import (
	"hash/maphash"
	"strings"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
	"github.com/admit-go/admit/internal/plumb"
)

// A composite store (admit.Limits of two or more rules) is the store of
// build with kern a *kernel.Composite and S an array [N]kernel.PartState,
// N the number of rules: all the parts of a key live inline in one value
// behind the key's pointer, so a call on a stored key decides every rule
// under its shard's lock, all or nothing, in place, and allocates nothing.
//
// S is sized to the rules rather than always [admit.MaxLimits]: a
// kernel.PartState is 32 bytes, so a key of two rules keeps 64 bytes of
// state instead of 256, at the price of one instantiation of the store's
// code per size (seven at most). The array is reached through parts, a type
// switch, for the reason decide gives.
//
// Eviction, WithMaxKeys and Reset are the single rule's: a key is evicted
// only when kernel.Composite.Fresh (every part fresh), and a missing key
// decides at max(reading, floor). Its horizon is the longest of its rules'.
// A denial for want of room in a full store has the smallest Limit of the
// rules, and names the first rule with that Limit. Composites of token
// buckets also hand out reservations (composite_reserve.go).

// compFullKeys is a composite store that keeps each key as a string. It
// embeds store, not fullKeys, so that it has no Rule.
type compFullKeys[S any] struct{ store[string, S] }

// compHashedKeys is a composite store of hashed keys (see hashedKeys).
type compHashedKeys[S any] struct{ store[uint64, S] }

// NewLimits returns a keyed store enforcing limits, which must be valid and
// hold two rules or more, independently for every key, with the settings
// set as [New] reads them. It supports every mix of the four algorithms;
// when every rule is a token bucket (kernel.Composite.Reservable) it
// hands out reservations ahead (composite_reserve.go), and otherwise
// reserves nothing ahead (capabilities.go).
func NewLimits(limits admit.Limits, set plumb.Settings) admit.CompositeStore {
	k := kernel.NewComposite(limits)
	switch limits.Len() {
	case 2:
		return buildComposite[[2]kernel.PartState](k, set)
	case 3:
		return buildComposite[[3]kernel.PartState](k, set)
	case 4:
		return buildComposite[[4]kernel.PartState](k, set)
	case 5:
		return buildComposite[[5]kernel.PartState](k, set)
	case 6:
		return buildComposite[[6]kernel.PartState](k, set)
	case 7:
		return buildComposite[[7]kernel.PartState](k, set)
	default: // admit.MaxLimits; the caller's Validate and one-rule case leave nothing else
		return buildComposite[[8]kernel.PartState](k, set)
	}
}

func buildComposite[S any](k *kernel.Composite, set plumb.Settings) admit.CompositeStore {
	if set.HashedKeys {
		l := new(compHashedKeys[S])
		l.initComposite(k, set, nil)
		if k.Reservable() {
			return tbCompHashedKeys[S]{l, reserving[uint64, S]{&l.store}}
		}
		return l
	}
	l := new(compFullKeys[S])
	l.initComposite(k, set, strings.Clone)
	if k.Reservable() {
		return tbCompFullKeys[S]{l, reserving[string, S]{&l.store}}
	}
	return l
}

// initComposite is init for the composite kernel k: its Limit is the
// smallest of the rules', its horizon the longest.
func (l *store[KT, S]) initComposite(k *kernel.Composite, set plumb.Settings, clone func(KT) KT) {
	limits := k.Limits()
	l.init(k, admit.Rule{}, set, clone)
	l.limit = k.Limit()
	l.least = -1
	l.horizon = 0
	for i := range limits.Len() {
		r := limits.At(i)
		l.horizon = max(l.horizon, keyed.Horizon(r))
		if l.least < 0 && r.Limit == l.limit {
			l.least = i
		}
	}
}

// parts returns the composite state *s as the slice kernel.Composite takes.
// S is one of [2]kernel.PartState to [8]kernel.PartState (NewLimits).
func parts[S any](s *S) []kernel.PartState {
	switch p := any(s).(type) {
	case *[2]kernel.PartState:
		return p[:]
	case *[3]kernel.PartState:
		return p[:]
	case *[4]kernel.PartState:
		return p[:]
	case *[5]kernel.PartState:
		return p[:]
	case *[6]kernel.PartState:
		return p[:]
	case *[7]kernel.PartState:
		return p[:]
	default:
		return any(s).(*[8]kernel.PartState)[:]
	}
}

// composite returns the store's kernel. The store must be a composite's.
func (l *store[KT, S]) composite() *kernel.Composite { return l.kern.(*kernel.Composite) }

// Limits implements [admit.CompositeStore].
func (l *compFullKeys[S]) Limits() admit.Limits { return l.composite().Limits() }

func (l *compFullKeys[S]) Allow(key string) admit.Decision { return l.AllowN(key, 1) }

func (l *compFullKeys[S]) AllowN(key string, n int) admit.Decision {
	d, _ := l.allow(key, key, maphash.String(l.seed, key), n, nil)
	return d
}

// AllowNWhich implements [admit.CompositeStore].
func (l *compFullKeys[S]) AllowNWhich(key string, n int) (admit.Decision, int) {
	return l.allow(key, key, maphash.String(l.seed, key), n, nil)
}

// Decide implements [keyed.Mover].
func (l *compFullKeys[S]) Decide(key string, n int) (admit.Decision, int, bool) {
	var moved bool
	d, which := l.allow(key, key, maphash.String(l.seed, key), n, &moved)
	return d, which, moved
}

// Limits implements [admit.CompositeStore].
func (l *compHashedKeys[S]) Limits() admit.Limits { return l.composite().Limits() }

func (l *compHashedKeys[S]) Allow(key string) admit.Decision { return l.AllowN(key, 1) }

func (l *compHashedKeys[S]) AllowN(key string, n int) admit.Decision {
	h := maphash.String(l.seed, key)
	d, _ := l.allow(key, h, h, n, nil)
	return d
}

// AllowNWhich implements [admit.CompositeStore].
func (l *compHashedKeys[S]) AllowNWhich(key string, n int) (admit.Decision, int) {
	h := maphash.String(l.seed, key)
	return l.allow(key, h, h, n, nil)
}

// Decide implements [keyed.Mover].
func (l *compHashedKeys[S]) Decide(key string, n int) (admit.Decision, int, bool) {
	h := maphash.String(l.seed, key)
	var moved bool
	d, which := l.allow(key, h, h, n, &moved)
	return d, which, moved
}
