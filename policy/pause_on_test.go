//go:build admittest

package policy_test

import (
	"testing"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/table"
)

// pauseTable makes the next call of lim, a table, run f at its pause point
// (table.Pause), which exists in builds with the tag admittest only.
func pauseTable(_ *testing.T, lim admit.KeyedLimiter, f func()) { table.Pause(lim, f) }
