//go:build !race

package httplimit_test

// raceEnabled reports a -race build, whose runtime adds allocations of its
// own (sync.Pool drops a share of what is put back, for one).
const raceEnabled = false
