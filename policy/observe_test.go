package policy_test

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/observe"
	"github.com/admit-go/admit/policy"
	"github.com/admit-go/admit/sharded"
)

// recorder is an observe.Observer that keeps one counter per label set and
// outcome, and records how often each label set was resolved.
type recorder struct {
	timed    bool
	mu       sync.Mutex
	series   map[string]*recSeries
	resolved map[string]int
}

type recSeries struct {
	labels observe.Labels
	n      [observe.NumOutcomes]atomic.Int64
	lat    atomic.Int64 // observations with a latency above 0
	timed  bool
}

func newRecorder(timed bool) *recorder {
	return &recorder{timed: timed, series: map[string]*recSeries{}, resolved: map[string]int{}}
}

func labelKey(l observe.Labels) string {
	return l.Source + " " + l.Scope + " " + l.Name + " " + l.Limits.String()
}

func (r *recorder) Instrument(l observe.Labels) observe.Instrument {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := labelKey(l)
	r.resolved[k]++
	s := r.series[k]
	if s == nil {
		s = &recSeries{labels: l, timed: r.timed}
		r.series[k] = s
	}
	return s
}

func (s *recSeries) Observe(o observe.Outcome, n int, latency time.Duration) {
	s.n[o].Add(1)
	if latency > 0 {
		s.lat.Add(1)
	}
	if !s.timed && latency != 0 {
		panic("an untimed instrument got a latency")
	}
}

func (s *recSeries) Timed() bool { return s.timed }

// counts returns "scope name limits: admitted/denied" per series, sorted.
func (r *recorder) counts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for k, s := range r.series {
		out = append(out, fmt.Sprintf("%s: %d/%d", k, s.n[observe.Admitted].Load(), s.n[observe.Denied].Load()))
	}
	sort.Strings(out)
	return out
}

const observeBook = `
default    = token-bucket,2,1m
api./login = fixed-window,1,1m
user.vip   = fixed-window,1,1m
`

// TestObserverScopes: every Check is counted once, under the scope of the
// entry that decided it, even where one limiter serves two scopes (vip's
// rule and /login's are equal, so vip on /login shares /login's limiter).
func TestObserverScopes(t *testing.T) {
	rec := newRecorder(false)
	s := service(t, parse(t, observeBook), policy.WithObserver(rec), admit.WithClock(clock.NewFake()))
	assert.Equal(t, []string{"policy api /login fixed-window,1,1m: 0/0"}, rec.counts(),
		"an API entry's instrument is resolved when the Service is built")
	for range 3 {
		s.Check("alice", "/orders")
		s.Check("alice", "/login")
		s.Check("vip", "/login")
		s.Check("vip", "/orders")
	}
	assert.Equal(t, []string{
		"policy api /login fixed-window,1,1m: 1/2",
		"policy default /orders token-bucket,2,1m: 2/1",
		"policy user /login fixed-window,1,1m: 1/2",
		"policy user /orders fixed-window,1,1m: 1/2",
	}, rec.counts())
	for k, n := range rec.resolved {
		assert.Equal(t, 1, n, "%s resolved %d times", k, n)
	}
	// CheckNWhich is counted as CheckN is.
	s.CheckNWhich("bob", "/orders", 1)
	s.CheckNWhich("bob", "/login", 1)
	assert.Contains(t, rec.counts(), "policy default /orders token-bucket,2,1m: 3/1")
	assert.Contains(t, rec.counts(), "policy api /login fixed-window,1,1m: 2/2")
}

// TestObserverNoKeys: no label ever holds a user name.
func TestObserverNoKeys(t *testing.T) {
	rec := newRecorder(false)
	s := service(t, parse(t, observeBook), policy.WithObserver(rec), admit.WithClock(clock.NewFake()))
	for i := range 50 {
		s.Check(fmt.Sprintf("user-%d", i), "/orders")
	}
	for k := range rec.resolved {
		assert.NotContains(t, k, "user-", k)
	}
	assert.Len(t, rec.resolved, 2)
}

// TestObserverStore: the default limiter, sharded's, reports its
// statistics through the labels.
func TestObserverStore(t *testing.T) {
	rec := newRecorder(false)
	s := service(t, parse(t, observeBook), policy.WithObserver(rec), admit.WithClock(clock.NewFake()))
	s.Check("alice", "/orders")
	s.Check("bob", "/orders")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	st := rec.series["policy default /orders token-bucket,2,1m"].labels.Store
	if st == nil {
		t.Skip("the default store does not report statistics yet")
	}
	assert.Equal(t, 2, st.Stats().Keys)
}

// TestObserverTimed: a timed instrument gets latencies, an untimed one
// none (recSeries panics on a latency it did not ask for).
func TestObserverTimed(t *testing.T) {
	rec := newRecorder(true)
	s := service(t, parse(t, observeBook), policy.WithObserver(rec))
	for range 100 {
		s.Check("alice", "/orders")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	got := rec.series["policy default /orders token-bucket,2,1m"]
	assert.Equal(t, int64(100), got.n[observe.Admitted].Load()+got.n[observe.Denied].Load())
	assert.Positive(t, got.lat.Load(), "no latency measured in 100 timed decisions")

	untimed := newRecorder(false)
	s = service(t, parse(t, observeBook), policy.WithObserver(untimed))
	s.Check("alice", "/orders")
}

// TestObserverReload: counts carry on across a Reload that keeps the
// limits, and an API entry a Reload adds is resolved then.
func TestObserverReload(t *testing.T) {
	rec := newRecorder(false)
	fake := clock.NewFake()
	s := service(t, parse(t, observeBook), policy.WithObserver(rec), admit.WithClock(fake))
	s.Check("alice", "/orders")
	require.NoError(t, s.Reload(parse(t, observeBook+"api./search = fixed-window,5,1m\n")))
	assert.Contains(t, rec.counts(), "policy api /search fixed-window,5,1m: 0/0")
	s.Check("alice", "/orders")
	s.Check("alice", "/orders")
	assert.Contains(t, rec.counts(), "policy default /orders token-bucket,2,1m: 2/1")
	assert.Equal(t, 1, rec.resolved["policy default /orders token-bucket,2,1m"], "a kept limiter keeps its instrument")
}

// TestObserverReloadRace: Checks racing Reloads that move every pair
// between limits are each counted exactly once (a call refused by a moved
// key, and decided again under the newer book, is counted once, by the
// decision that counts). Every goroutine checks until the last Reload has
// returned, so Checks run before, during and after each of them.
func TestObserverReloadRace(t *testing.T) {
	rec := newRecorder(false)
	books := []*policy.Book{parse(t, "default = token-bucket,1000000,1h\n"), parse(t, "default = token-bucket,500000,1h\n")}
	s := service(t, books[0], policy.WithObserver(rec))
	const goroutines, each, reloads = 4, 2000, 20
	var wg sync.WaitGroup
	var calls, reloaded atomic.Int64
	for g := range goroutines {
		wg.Go(func() {
			for i := 0; i < each || reloaded.Load() < reloads; i++ {
				s.Check(fmt.Sprintf("u%d", (g*each+i)%64), "/a")
				calls.Add(1)
			}
		})
	}
	for i := range reloads {
		require.NoError(t, s.Reload(books[(i+1)%2]))
		reloaded.Add(1)
	}
	wg.Wait()
	var total int64
	rec.mu.Lock()
	for _, se := range rec.series {
		total += se.n[observe.Admitted].Load() + se.n[observe.Denied].Load()
	}
	rec.mu.Unlock()
	assert.Equal(t, calls.Load(), total)
}

// releasing is a recorder that is also an observe.Releaser, recording the
// labels released.
type releasing struct {
	*recorder
	released []observe.Labels
}

func (r *releasing) Release(l observe.Labels) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.released = append(r.released, l)
}

// TestObserverReleasesDroppedLimiters: a Reload that takes limits out of
// the book releases the stores of their limiters, once per scope resolved,
// each with the store it was resolved with; one that keeps them releases
// nothing.
func TestObserverReleasesDroppedLimiters(t *testing.T) {
	rec := &releasing{recorder: newRecorder(false)}
	fake := clock.NewFake()
	s := service(t, parse(t, observeBook), policy.WithObserver(rec), admit.WithClock(fake))
	s.Check("alice", "/orders") // default
	s.Check("vip", "/orders")   // user: vip's rule, fixed-window,1,1m, the limiter /login's API entry also uses
	rec.mu.Lock()
	store := rec.series["policy default /orders token-bucket,2,1m"].labels.Store
	rec.mu.Unlock()
	require.NotNil(t, store, "the default limiter reports statistics")

	require.NoError(t, s.Reload(parse(t, observeBook+"api./search = fixed-window,5,1m\n")))
	assert.Empty(t, rec.released, "a Reload that keeps every limits releases nothing")

	require.NoError(t, s.Reload(parse(t, "default = token-bucket,3,1m\napi./login = fixed-window,1,1m\n")))
	rec.mu.Lock()
	released := slices.Clone(rec.released)
	rec.mu.Unlock()
	var got []string
	for _, l := range released {
		got = append(got, labelKey(l))
		if l.Limits.String() == "token-bucket,2,1m" {
			assert.True(t, store == l.Store, "released with the store it was resolved with")
		}
	}
	sort.Strings(got)
	assert.Equal(t, []string{"policy api /search fixed-window,5,1m", "policy default /orders token-bucket,2,1m"}, got,
		"the limiters of the limits the book dropped, for each scope resolved on them (an API entry's at the Reload that added it); vip's fixed-window,1,1m stays in the book, /login's entry has it, and with it the group of its limiters")

	// The new limits' limiter is a store of its own.
	s.Check("alice", "/orders")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.NotNil(t, rec.series["policy default /orders token-bucket,3,1m"], "the new limits' series")
	fresh := rec.series["policy default /orders token-bucket,3,1m"].labels.Store
	assert.NotNil(t, fresh)
	assert.False(t, store == fresh)
}

func TestWithObserverErrors(t *testing.T) {
	_, err := policy.NewService(parse(t, observeBook), policy.WithObserver(nil))
	assert.True(t, errors.Is(err, admit.ErrInvalidOption), "%v", err)
	rec := newRecorder(false)
	_, err = sharded.New(admit.Rule{Algorithm: admit.TokenBucket, Limit: 1, Window: time.Second}, policy.WithObserver(rec))
	assert.True(t, errors.Is(err, admit.ErrUnsupported), "%v", err)
	assert.Contains(t, err.Error(), "policy.NewService")
	// The factories' limiters are built without it.
	_, err = policy.NewService(parse(t, observeBook), policy.WithObserver(rec), policy.WithFactory(locked.New))
	require.NoError(t, err)
}

// TestCheckObservedAllocs: with an observer, a Check of a known pair still
// allocates nothing.
func TestCheckObservedAllocs(t *testing.T) {
	rec := newRecorder(true)
	s := service(t, parse(t, observeBook), policy.WithObserver(rec), admit.WithClock(clock.NewFake()))
	user, api := strings.Clone("alice"), strings.Clone("/orders")
	s.Check(user, api)
	s.CheckNWhich(user, "/login", 1)
	if n := testing.AllocsPerRun(1000, func() {
		s.Check(user, api)
		s.CheckNWhich(user, "/login", 1)
	}); n != 0 {
		t.Errorf("%v allocations per observed Check, want 0", n)
	}
}
