//go:build admitstress

package stress

import (
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/table"
)

// plantUnfrozenRebuild turns on or off the planted bug of atomic's table
// (table.PlantUnfrozenRebuild: rebuilds that copy each state word without
// the CompareAndSwap that freezes it), which exists only in builds with the
// tag admitstress.
func plantUnfrozenRebuild(on bool) { table.PlantUnfrozenRebuild(on) }

// plantLockFreeReset turns on or off the planted lost reset of atomic's
// table (table.PlantLockFreeReset: a Reset without the shard's mutex that
// gives up on a tombstone), which exists only with the tag admitstress.
func plantLockFreeReset(on bool) { table.PlantLockFreeReset(on) }

// plantClampedCarry turns on or off the planted clamp of kernel.Convert
// (kernel.PlantClampedCarry: what a Reload carries clamped to the new
// Limit), which exists only with the tag admitstress.
func plantClampedCarry(on bool) { kernel.PlantClampedCarry(on) }
