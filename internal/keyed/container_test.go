package keyed_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
	"github.com/admit-go/admit/internal/mapstore"
	"github.com/admit-go/admit/internal/plumb"
	"github.com/admit-go/admit/internal/table"
)

// TestPutMakesRoom: a Reload's Put of a key into a full store makes room as
// a new key would (keyed.Put, keyed.Add) before it counts the key beyond
// the bound: an idle key is evicted, the store stays within WithMaxKeys,
// and the eviction is counted. Both containers run the one sequence; the
// map store used to skip the room and always store beyond the bound.
func TestPutMakesRoom(t *testing.T) {
	rule := admit.Rule{Algorithm: admit.FixedWindow, Limit: 1, Window: time.Hour}
	for name, build := range map[string]func(admit.Rule, plumb.Settings) admit.Store{
		"table": table.New, "mapstore": mapstore.New,
	} {
		t.Run(name, func(t *testing.T) {
			fake := clock.NewFake()
			set := plumb.Settings{Clock: fake, Shards: 1, MaxKeys: 1}
			a, b := build(rule, set), build(rule, set)
			require.True(t, b.Allow("b").Allowed)
			fake.Set(2 * time.Hour) // b is idle
			require.True(t, a.Allow("a").Allowed)
			into := make([]kernel.PartState, 1)
			require.True(t, a.(keyed.Mover).Take("a", into))

			require.True(t, b.(keyed.Mover).Put("a", into))
			assert.Equal(t, 1, b.Len(), "the idle key evicted to make room")
			assert.Equal(t, admit.StoreStats{Keys: 1, MaxKeys: 1, Evictions: 1}, b.Stats())
			assert.False(t, b.Allow("a").Allowed, "the carried state: a spent window")
			assert.False(t, b.(keyed.Mover).Put("a", into), "a key the store holds")
		})
	}
}
