//go:build race

package grpclimit_test

// raceEnabled reports a -race build, whose runtime adds allocations of its
// own.
const raceEnabled = true
