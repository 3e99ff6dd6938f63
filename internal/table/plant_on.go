//go:build admitstress

package table

import "sync/atomic"

// plantUnfrozen, when set, makes rebuilds copy each word without the
// CompareAndSwap that freezes it: the tempting wrong version of the
// rebuild, kept for the stress harness's self-test (PlantUnfrozenRebuild).
var plantUnfrozen atomic.Bool

// unfrozen reports whether rebuilds copy words without freezing them.
func unfrozen() bool { return plantUnfrozen.Load() }

// PlantUnfrozenRebuild turns the planted bug on or off, for every table of
// the process, in builds with the tag admitstress only: a rebuild then
// loads each word and copies it, leaving the old slot live, so a call that
// loaded the old table publishes into it after the copy and its admission
// is lost with the old table (the key's next calls see the copied, older
// state: admissions beyond the rule). The stress harness must catch it.
func PlantUnfrozenRebuild(on bool) { plantUnfrozen.Store(on) }
