//go:build !race

package mapstore

const raceEnabled = false
