package atomic

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
)

// NewLimitsLimiterForm is NewLimitsLimiter for limits of two or more
// rules, in the pair form only if pair is true and the limits take it: so
// that tests run the snapshot form on every composite.
func NewLimitsLimiterForm(limits admit.Limits, pair bool, opts ...admit.Option) (admit.Limiter, error) {
	return newLimitsLimiter(limits, opts, pair)
}

// PairAvailable reports whether this processor has the pair form's
// two-word compare-and-swap.
func PairAvailable() bool { return cas128OK }

// compositeCell returns the kernel of lim, a composite of
// NewLimitsLimiter, its cell and the cell's form.
func compositeCell(lim any) (k *compKernel, cell any, form string) {
	switch l := lim.(type) {
	case *limitsLimiter[snapCell, *snapCell]:
		return l.k, &l.c, "snapshot"
	case *limitsReserver[snapCell, *snapCell]:
		return l.k, &l.c, "snapshot"
	case *pairLimiter:
		return l.k, &l.c, "pair"
	case *pairReserver:
		return l.k, &l.c, "pair"
	}
	panic(fmt.Sprintf("%T is no composite of NewLimitsLimiter", lim))
}

// LimitsForm reports the form of a composite of NewLimitsLimiter: "pair"
// or "snapshot".
func LimitsForm(lim any) string {
	_, _, form := compositeCell(lim)
	return form
}

// LimitsState returns the parts' states of lim's cell (see
// compositeCell), from the record if the cell is held, and whether the
// cell is held.
func LimitsState(lim any) (s []kernel.PartState, held bool) {
	k, cell, _ := compositeCell(lim)
	c := cell.(compCell)
	ptr := unsafe.Pointer(reflect.ValueOf(c).Pointer())
	st := k.holds.lock(ptr)
	defer st.mu.Unlock()
	s = make([]kernel.PartState, k.n)
	if v := c.load(); v != k.heldVal {
		k.decode(v, s)
		return s, false
	}
	copy(s, st.m.M[ptr].parts[:k.n])
	return s, true
}

// LimitsHeld reports whether lim's cell is held: a reservation that can be
// cancelled, or a state spilled past a word's horizon.
func LimitsHeld(lim any) bool {
	_, held := LimitsState(lim)
	return held
}

// PairAddr returns the address of the pair of words of lim's cell, a
// composite in the pair form, or 0 for the snapshot form.
func PairAddr(lim any) uintptr {
	_, cell, _ := compositeCell(lim)
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
