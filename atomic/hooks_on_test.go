//go:build admittest

package atomic_test

import (
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/internal/table"
)

// hooks gives the conformance suite its view of New's store, the table
// (internal/table).
var hooks = &conformance.StoreHooks{
	EvictAt: table.EvictAt, Pause: table.Pause,
	Locked: table.Locked, Holds: table.Holds, CountIs: table.CountIs,
}
