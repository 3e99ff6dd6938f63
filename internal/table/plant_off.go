//go:build !admitstress

package table

// unfrozen reports whether rebuilds copy words without freezing them: the
// planted bug of the stress harness's self-test, never in a normal build.
func unfrozen() bool { return false }

// lockFreeReset reports whether Reset takes the planted lock-free path:
// never in a normal build.
func lockFreeReset() bool { return false }

// resetLockFree is the planted Reset of admitstress builds only.
func (t *Table) resetLockFree(string) {}
