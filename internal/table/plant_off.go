//go:build !admitstress

package table

// unfrozen reports whether rebuilds copy words without freezing them: the
// planted bug of the stress harness's self-test, never in a normal build.
func unfrozen() bool { return false }
