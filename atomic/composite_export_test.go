package atomic

import (
	"fmt"
	"reflect"
	"time"
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

// PairAvailable reports whether this processor has the pair form's
// two-word compare-and-swap.
func PairAvailable() bool { return cas128OK }

// compositeCell returns the kernel of lim, a composite of NewLimits (then
// key's cell, or nil if key is not stored) or NewLimitsLimiter (then its
// cell; key is ignored), and the cell's form.
func compositeCell(lim any, key string) (k *compKernel, cell any, form string) {
	switch l := lim.(type) {
	case keyedLimits[snapCell, *snapCell]:
		return keyedCell(l, key)
	case keyedLimitsReserver[snapCell, *snapCell]:
		return keyedCell(l.keyedLimits, key)
	case keyedLimits[pairCell, *pairCell]:
		return keyedCell(l, key)
	case keyedLimitsReserver[pairCell, *pairCell]:
		return keyedCell(l.keyedLimits, key)
	case *limitsLimiter[snapCell, *snapCell]:
		return l.k, &l.c, "snapshot"
	case *limitsReserver[snapCell, *snapCell]:
		return l.k, &l.c, "snapshot"
	case *pairLimiter:
		return l.k, &l.c, "pair"
	case *pairReserver:
		return l.k, &l.c, "pair"
	}
	panic(fmt.Sprintf("%T is no composite of NewLimits or NewLimitsLimiter", lim))
}

func keyedCell[C any, PC interface {
	*C
	compKCell
}](l keyedLimits[C, PC], key string) (*compKernel, any, string) {
	form := "snapshot"
	if _, ok := any(PC(&l.st.zero)).(*pairCell); ok {
		form = "pair"
	}
	c, ok := l.st.m.Load(key)
	if !ok {
		return l.st.k, nil, form
	}
	return l.st.k, PC(c), form
}

// LimitsForm reports the form of a composite of NewLimits or
// NewLimitsLimiter: "pair" or "snapshot".
func LimitsForm(lim any) string {
	_, _, form := compositeCell(lim, "")
	return form
}

// LimitsState returns the parts' states of key's cell in lim (see
// compositeCell), from the record if the cell is held, and whether the
// cell is held; ok is false if key is not stored (or is a tombstone).
func LimitsState(lim any, key string) (s []kernel.PartState, held, ok bool) {
	k, cell, _ := compositeCell(lim, key)
	c, isCell := cell.(compCell)
	if !isCell {
		return nil, false, false
	}
	ptr := unsafe.Pointer(reflect.ValueOf(c).Pointer())
	st := k.holds.lock(ptr)
	defer st.mu.Unlock()
	s = make([]kernel.PartState, k.n)
	switch v := c.load(); v {
	case k.tombVal:
		return nil, false, false
	case k.heldVal:
		copy(s, st.m.M[ptr].parts[:k.n])
		return s, true, true
	default:
		k.decode(v, s)
		return s, false, true
	}
}

// LimitsHeld reports whether key's cell in lim is held: a reservation that
// can be cancelled, or a state spilled past a word's horizon.
func LimitsHeld(lim any, key string) bool {
	_, held, _ := LimitsState(lim, key)
	return held
}

// PairAddr returns the address of the pair of words of key's cell in lim,
// a composite in the pair form, or 0 if key is not stored.
func PairAddr(lim any, key string) uintptr {
	_, cell, _ := compositeCell(lim, key)
	if c, ok := cell.(*pairCell); ok {
		return uintptr(unsafe.Pointer(&c.w[c.pairAt()]))
	}
	return 0
}

// PairCellsAligned makes n pair cells side by side, as an array lays them
// out (at alternating offsets modulo 16, for a cell of 40 bytes), and
// reports the offset modulo 16 of each cell's first word and of its pair.
func PairCellsAligned(n int) (cellOffsets, pairOffsets []uintptr) {
	cells := make([]pairCell, n)
	for i := range cells {
		c := &cells[i]
		cellOffsets = append(cellOffsets, uintptr(unsafe.Pointer(&c.w[0]))%16)
		pairOffsets = append(pairOffsets, uintptr(unsafe.Pointer(&c.w[c.pairAt()]))%16)
	}
	return cellOffsets, pairOffsets
}

// PairCellSize is the size of a pair cell.
const PairCellSize = unsafe.Sizeof(pairCell{})

// evictAt and setPause give the store hooks (Hooks) their view of a
// composite store.
func (l keyedLimits[C, PC]) evictAt(at time.Duration) int { return l.st.evictAt(at) }
func (l keyedLimits[C, PC]) setPause(f func())            { l.st.setPause(f) }
