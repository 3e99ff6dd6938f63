package mapstore

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/internal/migrate"
	"github.com/admit-go/admit/internal/plumb"
)

// The migration checks are the conformance suite's (RunMigration, run from
// the tests of sharded and locked). This one is not there because the two
// containers differ on it: migrate.Hooks does not say what a Keep without a
// Redirect means, the map store ignores such a Keep (migrate.go, keep),
// and the table asks it and, refused, decides the call again, without end
// (a stack overflow). The policy.Service always sets both; until the
// contract says which is right, this pins the map store's choice.

// TestKeepWithoutRedirect: a Keep without a Redirect keeps the key, for
// one rule and a composite.
func TestKeepWithoutRedirect(t *testing.T) {
	for _, text := range []string{"token-bucket,4,1s", "fixed-window,3,1s + sliding-log,4,2s"} {
		limits := mustLimits(t, text)
		set := plumb.Settings{Clock: clock.NewFake()}
		var lim admit.CompositeStore
		if limits.Len() == 1 {
			lim = New(limits.At(0), set)
		} else {
			lim = NewLimits(limits, set)
		}
		lim.(migrate.Store).SetHooks(&migrate.Hooks{Keep: func(string, migrate.Epoch) bool { return false }})
		d, _ := conformance.AllowWhich(lim, "k", 1)
		assert.Equal(t, limits.Limit()-1, d.Remaining, "%s: a Keep without a Redirect keeps the key", text)
		assert.Equal(t, 1, lim.Len(), text)
	}
}
