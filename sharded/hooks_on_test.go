//go:build admittest

package sharded_test

import (
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/internal/mapstore"
	"github.com/admit-go/admit/internal/table"
)

// hooks gives the conformance suite its view of a sharded store.
// The table (internal/table) keeps the rules that pack, the map store the
// others.
var hooks = &conformance.StoreHooks{
	EvictAt: func(lim admit.KeyedLimiter, at time.Duration) int {
		if table.Is(lim) {
			return table.EvictAt(lim, at)
		}
		return mapstore.EvictAt(lim, at)
	},
	Pause: func(lim admit.KeyedLimiter, f func()) {
		if table.Is(lim) {
			table.Pause(lim, f)
			return
		}
		mapstore.Pause(lim, f)
	},
}
