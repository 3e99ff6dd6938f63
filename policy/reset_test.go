package policy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/policy"
)

// spend checks (user, api) until the pair is denied, and returns how many
// Checks were admitted.
func spend(t *testing.T, s *policy.Service, user, api string) int {
	t.Helper()
	for n := 0; ; n++ {
		if !s.Check(user, api).Allowed {
			return n
		}
		if n > 100 {
			t.Fatalf("Check(%q, %q) never denied on a frozen clock", user, api)
		}
	}
}

// TestServiceReset: on a frozen clock, Reset gives one pair its budget back,
// whichever scope its rule comes from, and touches no other pair: not
// another user's on the same API, not the same user's on another API.
func TestServiceReset(t *testing.T) {
	for _, f := range []struct {
		name string
		opts []admit.Option
	}{
		{"default", nil},
		{"atomic", []admit.Option{policy.WithFactory(admitatomic.New)}},
		{"locked", []admit.Option{policy.WithFactory(locked.New)}},
	} {
		t.Run(f.name, func(t *testing.T) {
			testServiceReset(t, append(f.opts, admit.WithClock(clock.NewFake()))...)
		})
	}
}

func testServiceReset(t *testing.T, opts ...admit.Option) {
	s := service(t, parse(t, seedConfig), opts...)
	pairs := []struct {
		user, api string
		limit     int
	}{
		{"alice", "/orders", 5}, // default rule
		{"alice", "/login", 2},  // API rule
		{"bob", "/orders", 5},
		{"vip-1", "/orders", 8}, // user rule
		{"vip-1", "/login", 8},
	}
	for _, p := range pairs {
		require.Equal(t, p.limit, spend(t, s, p.user, p.api), "spending (%s, %s)", p.user, p.api)
	}
	for i, p := range pairs {
		require.NoError(t, s.Reset(p.user, p.api), "Reset(%q, %q)", p.user, p.api)
		for j, q := range pairs {
			want := 0
			if j <= i {
				want = q.limit // reset by now, and not yet checked again
			}
			assert.Equal(t, want, s.CheckN(q.user, q.api, 0).Remaining,
				"after Reset(%q, %q): CheckN(%q, %q, 0).Remaining", p.user, p.api, q.user, q.api)
		}
	}
	assert.Equal(t, 5, spend(t, s, "alice", "/orders"), "Checks admitted after Reset(alice, /orders)")
}

// TestServiceResetUnseen: a pair never checked has nothing to reset, whether
// its (rule, API) limiter exists or not, and Reset builds none.
func TestServiceResetUnseen(t *testing.T) {
	var f factory
	s := service(t, parse(t, seedConfig), policy.WithFactory(f.New))
	built := len(f.rules())
	assert.NoError(t, s.Reset("carol", "/never-seen"))
	assert.NoError(t, s.Reset("vip-1", "/never-seen"))
	assert.NoError(t, s.Reset("carol", "/login"), "an API rule's limiter, built up front, without carol")
	assert.Len(t, f.rules(), built, "Reset built a limiter")
}

// opaque hides every method of a keyed limiter but the KeyedLimiter's: a
// factory of one's own whose limiters cannot reset.
type opaque struct{ admit.KeyedLimiter }

// TestServiceResetUnsupported: a pair whose limiter, from a custom factory,
// has no Reset is an error wrapping ErrUnsupported that names the type.
func TestServiceResetUnsupported(t *testing.T) {
	s := service(t, parse(t, seedConfig), policy.WithFactory(func(r admit.Rule, opts ...admit.Option) (admit.KeyedLimiter, error) {
		lim, err := admitatomic.New(r, opts...)
		return opaque{lim}, err
	}))
	s.Check("alice", "/orders")
	err := s.Reset("alice", "/orders")
	require.Error(t, err)
	assert.True(t, errors.Is(err, admit.ErrUnsupported), "Reset's error %v does not wrap ErrUnsupported", err)
	assert.True(t, strings.Contains(err.Error(), "policy_test.opaque"), "Reset's error %q does not name the limiter's type", err)
	assert.Equal(t, 4, s.CheckN("alice", "/orders", 0).Remaining, "a failed Reset reset something")
}
