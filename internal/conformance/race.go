//go:build race

package conformance

// raceEnabled reports whether the race detector is on; the heaviest checks
// shrink under it.
const raceEnabled = true
