package atomic

import (
	"fmt"
	"unsafe"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
)

// NewLimitsForm is NewLimits for limits of two or more rules, in the pair
// form only if pair is true and the limits take it: so that tests run the
// snapshot form on every composite.
func NewLimitsForm(limits admit.Limits, pair bool, opts ...admit.Option) (admit.KeyedLimiter, error) {
	return newLimits(limits, opts, pair)
}

// NewLimitsLimiterForm is NewLimitsLimiter as NewLimitsForm is NewLimits.
func NewLimitsLimiterForm(limits admit.Limits, pair bool, opts ...admit.Option) (admit.Limiter, error) {
	return newLimitsLimiter(limits, opts, pair)
}

// LimitsForm reports the form of a composite limiter from NewLimits or
// NewLimitsLimiter: "pair" or "snapshot".
func LimitsForm(lim any) string {
	switch lim.(type) {
	case keyedLimits[snapCell, *snapCell], keyedLimitsReserver[snapCell, *snapCell],
		*limitsLimiter[snapCell, *snapCell], *limitsReserver[snapCell, *snapCell]:
		return "snapshot"
	}
	return "pair"
}

// LimitsHeld reports whether key's cell in lim, a composite store, is held
// (a live reservation, or a state spilled past a word's horizon).
func LimitsHeld(lim admit.KeyedLimiter, key string) bool {
	switch l := lim.(type) {
	case keyedLimits[snapCell, *snapCell]:
		return keyedHeld(l, key)
	case keyedLimitsReserver[snapCell, *snapCell]:
		return keyedHeld(l.keyedLimits, key)
	}
	panic(fmt.Sprintf("LimitsHeld: %T is no composite store", lim))
}

func keyedHeld[C any, PC interface {
	*C
	compKCell
}](l keyedLimits[C, PC], key string) bool {
	c, ok := l.st.m.Load(key)
	if !ok {
		return false
	}
	switch cell := any(PC(c)).(type) {
	case *snapCell:
		held, _ := cell.kind(l.st.k, cell.load())
		return held
	}
	panic("keyedHeld: an unknown cell")
}

// LimitsState returns the parts' states of key's cell in lim, a composite
// store or (key ignored) a single-key composite, from the held cell's
// record if it is held, and whether the cell exists and is no tombstone.
func LimitsState(lim any, key string) ([]kernel.PartState, bool) {
	switch l := lim.(type) {
	case keyedLimits[snapCell, *snapCell]:
		return keyedState(l, key)
	case keyedLimitsReserver[snapCell, *snapCell]:
		return keyedState(l.keyedLimits, key)
	case *limitsLimiter[snapCell, *snapCell]:
		return cellState(l.k, &l.c, unsafe.Pointer(&l.c))
	case *limitsReserver[snapCell, *snapCell]:
		return cellState(l.k, &l.c, unsafe.Pointer(&l.c))
	}
	panic(fmt.Sprintf("LimitsState: %T is no composite", lim))
}

func keyedState[C any, PC interface {
	*C
	compKCell
}](l keyedLimits[C, PC], key string) ([]kernel.PartState, bool) {
	c, ok := l.st.m.Load(key)
	if !ok {
		return nil, false
	}
	switch cell := any(PC(c)).(type) {
	case *snapCell:
		return cellState(l.st.k, cell, unsafe.Pointer(c))
	}
	panic("keyedState: an unknown cell")
}

// cellState is LimitsState on the cell c.
func cellState[V comparable, C compCell[V]](k *compKernel, c C, ptr unsafe.Pointer) ([]kernel.PartState, bool) {
	st := k.holds.lock(ptr)
	defer st.mu.Unlock()
	s := make([]kernel.PartState, k.n)
	v := c.load()
	switch held, tomb := c.kind(k, v); {
	case tomb:
		return nil, false
	case held:
		copy(s, st.m[ptr].parts[:k.n])
	default:
		c.decode(k, v, s)
	}
	return s, true
}
