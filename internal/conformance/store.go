package conformance

import (
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
)

// StoreHooks is the test-only side of a keyed store, which each variant's
// tests wire to unexported methods. The checks that use it hold every keyed
// store to the same eviction contract (docs/keyed-stores.md): a key is
// evicted only when its state is equivalent to a fresh key's, and eviction
// changes no decision, even for a call in flight.
type StoreHooks struct {
	// EvictAt evicts every key of lim whose state is fresh (kernel.Fresh)
	// at reading at, as the store's own sweeps do but without their slack,
	// raises the store's floor to at if it evicted anything, and returns
	// how many keys it evicted. When it returns, the keys are gone.
	EvictAt func(lim admit.KeyedLimiter, at time.Duration) int

	// Pause makes the next call of lim, on any key, run f at the variant's
	// pause point, once: where a call holds what an eviction could pull from
	// under it. For a mutex store that is after the call has read the clock
	// and before it takes its lock; for a lock-free store, after it has
	// loaded the key's cell and the cell's state and before it publishes.
	Pause func(lim admit.KeyedLimiter, f func())

	// Locked reports whether a lock of lim's own (a shard's mutex) is held
	// now, trying each: the migration checks (RunMigration) see by it that
	// Keep runs under the key's lock and Adopt and Redirect under none.
	Locked func(lim admit.KeyedLimiter) bool

	// Holds returns how many hold records lim keeps (reservations that may
	// still be cancelled, and whatever else the store keeps beside its
	// states with them), for the check that Take drops a key's hold.
	Holds func(lim admit.KeyedLimiter) int

	// CountIs reports whether lim, a store bounded by WithMaxKeys, counts
	// exactly n keys against the bound. It must not race other calls of
	// lim.
	CountIs func(lim admit.KeyedLimiter, n int) bool

	// Every hook may be nil in a build that lacks it (the lock-free
	// table's exist only in builds with the tag admittest, which make test
	// passes): the checks that need EvictAt or Pause then skip, and say
	// so, and the migration checks leave out the assertions that need the
	// others.
}

// needHooks skips t when v's store hooks lack EvictAt, or Pause if pause is
// set: the hooks of a build that has not compiled them in.
func needHooks(t *testing.T, v Variant, pause bool) {
	t.Helper()
	if v.Store.EvictAt == nil || pause && v.Store.Pause == nil {
		t.Skipf("%s: the store's test hooks are not in this build; the variant's tests set them in builds with -tags admittest (make test)", v.Name)
	}
}

// storeLimiter is what a keyed limiter with a store offers besides AllowN.
type storeLimiter interface {
	admit.KeyedLimiter
	Len() int
	Sweep() int
}

// runStore runs the keyed-store checks: the eviction checks (eviction.go),
// the full-store policy (fullstore.go), the memory a store holds and
// gives back (memory.go), and its statistics (stats.go).
func runStore(t *testing.T, v Variant, alg admit.Algorithm) {
	runChecks(t, v, alg, testEvictionEquivalence, testIncrementalEvictionEquivalence,
		testEvictionRace, testStaleReadingAfterEviction, testEvictionHammer,
		testFullStore, testFullStoreSeeds, testChurn, testFlood,
		testMemoryReturns, testHeldMemoryReturns, testStats)
}

// horizon is the longest a key's state takes to become fresh after its last
// admission: one window, two for the sliding counter.
func horizon(rule admit.Rule) time.Duration {
	if rule.Algorithm == admit.SlidingCounter {
		return 2 * rule.Window
	}
	return rule.Window
}

// testStoreOptions checks the keyed-store options: bad values are
// ErrInvalidOption, options a constructor cannot honour are ErrUnsupported,
// and WithClock and WithFactory (which a policy.Service passes to every
// limiter it builds) are harmless everywhere.
func testStoreOptions(t *testing.T, v Variant) {
	good := admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 10 * time.Second}
	// storeless checks that build, the constructor called ctor, refuses each
	// store option with ErrUnsupported, naming it.
	storeless := func(ctor, why string, build func(admit.Rule, ...admit.Option) error) {
		for name, opt := range map[string]admit.Option{
			"WithShards":     admit.WithShards(4),
			"WithMaxKeys":    admit.WithMaxKeys(10),
			"WithHashedKeys": admit.WithHashedKeys(),
		} {
			err := build(good, opt)
			assert.ErrorIs(t, err, admit.ErrUnsupported, "%s(%s): %s", ctor, name, why)
			assert.ErrorContains(t, err, name)
		}
	}
	if v.Remote {
		storeless("New", "a remote variant has no local store", func(r admit.Rule, opts ...admit.Option) error {
			_, err := v.New(r, opts...)
			return err
		})
		lim, err := v.New(good, admit.WithClock(clock.NewFake()))
		require.NoError(t, err, "New(WithClock)")
		assert.True(t, lim.Allow("a").Allowed)
		_, err = v.New(good, withFactory(v.New))
		assert.ErrorIs(t, err, admit.ErrUnsupported, "New(policy.WithFactory): only policy.NewService takes a factory")
		return
	}
	for _, bad := range []admit.Option{admit.WithShards(0), admit.WithShards(3), admit.WithShards(admit.MaxShards * 2), admit.WithMaxKeys(0), admit.WithMaxKeys(-1)} {
		_, err := v.New(good, bad)
		assert.ErrorIs(t, err, admit.ErrInvalidOption)
	}
	lim, err := v.New(good, admit.WithShards(1), admit.WithMaxKeys(1), admit.WithClock(clock.NewFake()))
	require.NoError(t, err, "New with every store option but WithHashedKeys")
	assert.True(t, lim.Allow("a").Allowed)
	_, err = v.New(good, withFactory(v.New))
	assert.ErrorIs(t, err, admit.ErrUnsupported, "New(policy.WithFactory): only policy.NewService takes a factory")
	assert.ErrorContains(t, err, "WithFactory")

	_, err = v.New(good, admit.WithHashedKeys())
	if v.HashedKeys {
		assert.NoError(t, err, "New(WithHashedKeys())")
	} else {
		assert.ErrorIs(t, err, admit.ErrUnsupported, "New(WithHashedKeys())")
		assert.ErrorContains(t, err, "WithHashedKeys")
	}
	if v.NewLimiter == nil {
		return
	}
	_, err = v.NewLimiter(good, admit.WithClock(clock.NewFake()))
	assert.NoError(t, err, "NewLimiter(WithClock)")
	_, err = v.NewLimiter(good, withFactory(v.New))
	assert.ErrorIs(t, err, admit.ErrUnsupported, "NewLimiter(policy.WithFactory)")
	storeless("NewLimiter", "a single-key limiter has no store", func(r admit.Rule, opts ...admit.Option) error {
		_, err := v.NewLimiter(r, opts...)
		return err
	})
}

// keyBuf builds numbered keys in a reused buffer, without garbage. The
// strings alias the buffer, as pooled-buffer callers' keys do; the stores
// keep copies.
type keyBuf struct{ b []byte }

func (k *keyBuf) key(prefix string, i int) string {
	k.b = strconv.AppendInt(append(k.b[:0], prefix...), int64(i), 10)
	return unsafe.String(&k.b[0], len(k.b))
}
