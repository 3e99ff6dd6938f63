//go:build !admitstress

package stress

// plantUnfrozenRebuild is never called without the tag admitstress: the
// table's planted bug is compiled only with it, and the self-test that
// plants it skips when hook.Enabled is false.
func plantUnfrozenRebuild(bool) { panic("stress: the planted rebuild bug needs -tags admitstress") }

// plantLockFreeReset is never called without the tag admitstress.
func plantLockFreeReset(bool) { panic("stress: the planted reset bug needs -tags admitstress") }

// plantClampedCarry is never called without the tag admitstress.
func plantClampedCarry(bool) { panic("stress: the planted carry clamp needs -tags admitstress") }
