//go:build admitstress

package kernel

import "sync/atomic"

// plantClamp, when set, makes Convert clamp what it carries to the new
// Limit: the old, wrong rule, kept for the stress harness's self-test
// (PlantClampedCarry).
var plantClamp atomic.Bool

// clampCarried reports whether Convert clamps what it carries.
func clampCarried() bool { return plantClamp.Load() }

// PlantClampedCarry turns the planted bug on or off, for every Convert of
// the process, in builds with the tag admitstress only: KeepConsumed and
// KeepProportional then carry at most the new Limit, so a limit lowered
// and raised back hands the difference out again (10 -> 5 -> 10 per hour
// admits 15 on a frozen clock). The stress harness must catch it.
func PlantClampedCarry(on bool) { plantClamp.Store(on) }
