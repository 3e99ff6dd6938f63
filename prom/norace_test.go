//go:build !race

package prom_test

const raceEnabled = false
