package atomic

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"

	"github.com/admit-go/admit"
)

// plantedCell is a snapshot cell with the tempting wrong version of its
// CAS planted: it checks that the value is still old, yields, and then
// Stores the new value, so that two calls that loaded the same snapshot
// can both publish, each with one admission counted.
type plantedCell struct{ snapCell }

func (c *plantedCell) cas(old, v compVal) bool {
	if c.p.Load() != old.p {
		return false
	}
	runtime.Gosched() // widen the window, as the stress harness's hooks do
	c.p.Store(v.p)
	return true
}

// hammerCell runs the frozen-clock hammer of TestLimitsHammerFrozen on the
// cell c, at address ptr, alone and returns how many of its calls were
// admitted.
func hammerCell(k *compKernel, c compCell, ptr unsafe.Pointer) int64 {
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if v, _ := compDecide(k, c, ptr, time.Hour, 1); v.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return admitted.Load()
}

// TestLimitsHammerCatchesStoreForCAS shows that the hammer's exact count
// can fail: on a cell that publishes by a checked Store instead of a CAS,
// goroutines racing on a frozen clock admit more than the smallest burst,
// in one of a few trials at most, while the real cell admits exactly it.
func TestLimitsHammerCatchesStoreForCAS(t *testing.T) {
	limits, err := admit.ParseLimits("token-bucket,50,1s + fixed-window,70,1m")
	if err != nil {
		t.Fatal(err)
	}
	k := newCompKernel(limits, 1, false)
	cell := new(snapCell)
	assert.Equal(t, int64(50), hammerCell(k, cell, unsafe.Pointer(cell)), "the snapshot cell")
	for trial := 1; trial <= 20; trial++ {
		planted := new(plantedCell)
		if n := hammerCell(k, planted, unsafe.Pointer(planted)); n != 50 {
			t.Logf("the planted Store caught in trial %d: %d admitted", trial, n)
			return
		}
	}
	t.Fatal("the hammer never caught the planted Store in 20 trials")
}
