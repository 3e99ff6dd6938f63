package policy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/admit-go/admit"
)

// TestEntryStringRuleOnly: an Entry built by hand with only its Rule (as
// before entries had Limits) still writes its rule.
func TestEntryStringRuleOnly(t *testing.T) {
	e := Entry{Scope: API, Name: "/login", Rule: admit.Rule{Algorithm: admit.FixedWindow, Limit: 2, Window: 10 * time.Second}}
	assert.Equal(t, "api./login = fixed-window,2,10s", e.String())
}
