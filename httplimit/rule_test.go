package httplimit_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/httplimit"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/sharded"
)

// TestPolicyFromRule: New over a store of atomic, locked or sharded needs no
// WithPolicy for its RateLimit-Policy field: the store says its rule. A
// limiter without a Rule method gets none, and WithPolicy overrides it.
func TestPolicyFromRule(t *testing.T) {
	rule, err := admit.ParseRule("token-bucket,2,10s")
	require.NoError(t, err)
	for name, build := range map[string]func(admit.Rule, ...admit.Option) (admit.Store, error){
		"atomic": admitatomic.New, "locked": locked.New, "sharded": sharded.New,
	} {
		lim, err := build(rule, admit.WithClock(clock.NewFake()))
		require.NoError(t, err)
		mw, err := httplimit.New(lim)
		require.NoError(t, err)
		res := serve(mw.Handler(ok), request("192.0.2.1:1234", "/"))
		assert.Equal(t, []string{`"default";q=2;w=10`}, res.Header()["Ratelimit-Policy"], name)

		mw, err = httplimit.New(lim, httplimit.WithPolicy("per-ten-seconds", rule))
		require.NoError(t, err)
		res = serve(mw.Handler(ok), request("192.0.2.1:1234", "/"))
		assert.Equal(t, []string{`"per-ten-seconds";q=2;w=10`}, res.Header()["Ratelimit-Policy"], name)
	}
	mw, err := httplimit.New(&recorder{})
	require.NoError(t, err)
	res := serve(mw.Handler(ok), request("192.0.2.1:1234", "/"))
	assert.Empty(t, res.Header()["Ratelimit-Policy"], "a limiter that does not say its rule")
}
