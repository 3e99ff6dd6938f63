package admit_test

import (
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/plumb"
)

func TestStoreOptionDefaults(t *testing.T) {
	s, err := resolve()
	require.NoError(t, err)
	assert.Zero(t, s.Shards, "no WithShards: 0, the variant's default")
	assert.Zero(t, s.MaxKeys, "no WithMaxKeys: no bound")
	assert.False(t, s.HashedKeys)
	assert.Empty(t, s.StoreOptions(), "no store option is set by default")
	assert.Equal(t, admit.DefaultShards(), s.ShardCount())
}

func TestDefaultShards(t *testing.T) {
	for _, procs := range []int{1, 2, 3, 4, 5, 16, 100} {
		prev := runtime.GOMAXPROCS(procs)
		n := admit.DefaultShards()
		runtime.GOMAXPROCS(prev)
		assert.GreaterOrEqual(t, n, 16, "GOMAXPROCS=%d", procs)
		assert.GreaterOrEqual(t, n, 4*procs, "GOMAXPROCS=%d: four shards per processor", procs)
		assert.Less(t, n, max(32, 8*procs), "GOMAXPROCS=%d: rounded up to the next power of two only", procs)
		assert.Zero(t, n&(n-1), "GOMAXPROCS=%d: %d is a power of two", procs, n)
		assert.LessOrEqual(t, n, admit.MaxShards)
	}
}

func TestStoreOptionsAreApplied(t *testing.T) {
	s, err := resolve(admit.WithShards(8), admit.WithMaxKeys(1000), admit.WithHashedKeys())
	require.NoError(t, err)
	assert.Equal(t, 8, s.Shards)
	assert.Equal(t, 8, s.ShardCount())
	assert.Equal(t, 1000, s.MaxKeys)
	assert.True(t, s.HashedKeys)
	assert.Equal(t, "WithShards, WithMaxKeys, WithHashedKeys", s.StoreOptions())

	for _, n := range []int{1, 2, 1024, admit.MaxShards} {
		s, err := resolve(admit.WithShards(n))
		require.NoError(t, err, "WithShards(%d)", n)
		assert.Equal(t, n, s.ShardCount())
	}
	s, err = resolve(admit.WithMaxKeys(1))
	require.NoError(t, err)
	assert.Equal(t, "WithMaxKeys", s.StoreOptions())
}

func TestStoreOptionsRejectBadValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  admit.Option
		want string
	}{
		{"WithShards(0)", admit.WithShards(0), "power of two from 1 to 65536"},
		{"WithShards(-4)", admit.WithShards(-4), "WithShards(-4)"},
		{"WithShards(3)", admit.WithShards(3), "power of two"},
		{"WithShards(96)", admit.WithShards(96), "power of two"},
		{"WithShards(2×MaxShards)", admit.WithShards(2 * admit.MaxShards), "131072"},
		{"WithMaxKeys(0)", admit.WithMaxKeys(0), "at least 1"},
		{"WithMaxKeys(-1)", admit.WithMaxKeys(-1), "leave the option out"},
	} {
		s, err := resolve(tc.opt)
		if !assert.Error(t, err, tc.name) {
			continue
		}
		assert.True(t, errors.Is(err, admit.ErrInvalidOption), "%s: %q wraps ErrInvalidOption", tc.name, err)
		assert.Contains(t, err.Error(), tc.want, tc.name)
		assert.Equal(t, plumb.Settings{}, s, tc.name)
	}
}
