//go:build race

package prom_test

// raceEnabled: the race detector's runtime allocates on its own, so the
// allocation tests skip under it.
const raceEnabled = true
