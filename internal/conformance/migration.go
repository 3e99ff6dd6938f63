package conformance

import (
	"sync"
	"sync/atomic"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/keyed"
)

// Movable is a keyed store whose keys a Migration moves.
type Movable interface {
	admit.KeyedLimiter
	keyed.Mover
}

// Migration moves keys from one store to another as a policy.Service's
// Reload does (docs/design.md, "How a key moves"), with a snapshot index
// standing for the Service's: the store a call made now goes to. The
// migration checks' hammer (RunMigration) runs it while goroutines admit on
// a moved key.
type Migration struct {
	// Lose makes a broken move: the state is lost and the key put fresh,
	// which a hammer across the move must catch.
	Lose bool

	stores     [2]Movable
	cur        atomic.Int32
	mu         sync.Mutex         // the Service's migration mutex, taken before any store's lock
	buf        []kernel.PartState // guarded by mu
	redirected atomic.Int64       // calls Redirect decided
}

// NewMigration returns the migration of keys from from to to, with from in
// force: each store's hooks keep a key while the snapshot names it and
// redirect a refused call to the store it names.
func NewMigration(from, to Movable) *Migration {
	m := &Migration{stores: [2]Movable{from, to}, buf: make([]kernel.PartState, from.Limits().Len())}
	for i := range m.stores {
		m.stores[i].SetHooks(m.hooks(i, false))
	}
	return m
}

// Current returns the store the snapshot names: the one a call made now
// goes to.
func (m *Migration) Current() Movable { return m.stores[m.cur.Load()] }

// Redirected returns the number of calls Redirect has decided.
func (m *Migration) Redirected() int64 { return m.redirected.Load() }

// hooks are store i's: Keep while the snapshot names it, Redirect to the
// store the snapshot names, and with adopt, Adopt by carrying.
func (m *Migration) hooks(i int, adopt bool) *keyed.Hooks {
	h := &keyed.Hooks{
		Keep: func(string, keyed.Epoch) bool { return m.cur.Load() == int32(i) },
		Redirect: func(key string, n int) (admit.Decision, int) {
			m.redirected.Add(1)
			return AllowWhich(m.stores[m.cur.Load()], key, n)
		},
	}
	if adopt {
		h.Adopt = func(key string) keyed.Epoch {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.carry(key)
			return 0 // the model's Keep needs no Epoch: its snapshot index changes once
		}
	}
	return h
}

// carry moves key from the first store to the second if the first holds
// it. It requires that m.mu is held.
func (m *Migration) carry(key string) {
	if !m.stores[0].Take(key, m.buf) {
		return
	}
	if m.Lose {
		clear(m.buf)
	}
	m.stores[1].Put(key, m.buf)
}

// Move is the Reload: Adopt on the receiving store, the snapshot
// published, every key of keys carried, Adopt removed. A lazy move carries
// no key and leaves Adopt in place: keys move only when a call finds them
// missing in the receiving store.
func (m *Migration) Move(lazy bool, keys ...string) {
	m.stores[1].SetHooks(m.hooks(1, true))
	m.cur.Store(1)
	if lazy {
		return
	}
	m.mu.Lock()
	for _, k := range keys {
		m.carry(k)
	}
	m.mu.Unlock()
	m.stores[1].SetHooks(m.hooks(1, false))
}

// AllowWhich is AllowNWhich for a composite, AllowN and index 0 for one
// rule.
func AllowWhich(lim admit.KeyedLimiter, key string, n int) (admit.Decision, int) {
	if c, ok := lim.(interface {
		AllowNWhich(key string, n int) (admit.Decision, int)
	}); ok {
		return c.AllowNWhich(key, n)
	}
	return lim.AllowN(key, n), 0
}
