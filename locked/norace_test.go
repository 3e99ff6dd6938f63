//go:build !race

package locked_test

const raceEnabled = false
