package httplimit

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/locked"
)

// remoteComposite is a composite limiter with Limits and AllowNWhich but not
// the local stores' Len and Sweep, as redisstore's Keyed is.
type remoteComposite struct {
	store admit.CompositeStore
}

func (r remoteComposite) Allow(key string) admit.Decision { return r.store.Allow(key) }
func (r remoteComposite) AllowN(key string, n int) admit.Decision {
	return r.store.AllowN(key, n)
}
func (r remoteComposite) Limits() admit.Limits { return r.store.Limits() }
func (r remoteComposite) AllowNWhich(key string, n int) (admit.Decision, int) {
	return r.store.AllowNWhich(key, n)
}

// TestCompositeWithoutStore: a composite limiter that is no
// admit.CompositeStore (no Len, no Sweep) still gets one policy per rule.
func TestCompositeWithoutStore(t *testing.T) {
	limits, err := admit.ParseLimits("token-bucket,10,1s + fixed-window,30,1m")
	require.NoError(t, err)
	lim, err := locked.NewLimits(limits, admit.WithClock(clock.NewFake()))
	require.NoError(t, err)
	var remote admit.KeyedLimiter = remoteComposite{lim}
	_, isStore := remote.(admit.CompositeStore)
	require.False(t, isStore)
	mw, err := New(remote, WithKey(func(*http.Request) (string, bool) { return "k", true }))
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	require.Equal(t, `"default:token-bucket,10,1s";q=10;w=1, "default:fixed-window,30,1m";q=30;w=60`, rec.Header().Get("RateLimit-Policy"))
}
