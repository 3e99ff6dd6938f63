//go:build !admittest

package policy_test

import (
	"testing"

	"github.com/admit-go/admit"
)

// pauseTable skips t: a normal build's table has no pause point.
func pauseTable(t *testing.T, _ admit.KeyedLimiter, _ func()) {
	t.Skip("needs the table's pause point, which exists only in builds with -tags admittest (make test passes it)")
}
