//go:build race

package otel_test

// raceEnabled reports a -race build, whose runtime allocates on its own:
// allocation counts are skipped under it.
const raceEnabled = true
