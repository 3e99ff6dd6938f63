//go:build !race

package tally_test

const raceEnabled = false
