package bench

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/httprate"
	"github.com/juju/ratelimit"
	golimiter "github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	ulmemory "github.com/ulule/limiter/v3/drivers/store/memory"
	uber "go.uber.org/ratelimit"
	"golang.org/x/time/rate"

	"github.com/admit-go/admit"
)

// The peers, each configured as its documentation suggests, with the two
// configurations every row has: Admit (a limit no run reaches: 10^9 per
// second with a burst of 10^6 for the token buckets, or a count that cannot
// be reached within the run's window) and Deny (one per hour, spent).
//
// Peer impl labels, and what each is:
//
//	xtime-rate             golang.org/x/time/rate Limiter.Allow (a float token bucket under a mutex); keyed: a sync.Map of *rate.Limiter
//	uber-ratelimit-nowait  go.uber.org/ratelimit Take, blocking only: measured at 10^9 per second so it never waits; no deny path
//	juju-ratelimit         github.com/juju/ratelimit Bucket.TakeAvailable(1) (a token bucket under a mutex); keyed: a sync.Map of *Bucket
//	go-limiter             github.com/sethvargo/go-limiter memorystore.Take (an RWMutex-guarded map of mutex-guarded buckets)
//	throttled              github.com/throttled/throttled/v2 GCRA over memstore (an RWMutex-guarded map, CAS emulated under the lock)
//	ulule-limiter          github.com/ulule/limiter/v3 memory store Get (a fixed window: sync.Map of counters; it builds the prefixed key per call)
//	httprate               github.com/go-chi/httprate RateLimiter.OnLimit with response headers off (a sliding counter over xxh3 hashes of keys, one mutex for all keys)
//	redis_rate             github.com/go-redis/redis_rate/v10 Limiter.Allow (GCRA in a Lua script on Redis; BenchmarkRedis only)

// Peer impl labels.
const (
	XTime     = "xtime-rate"
	Uber      = "uber-ratelimit-nowait" // blocking only: labelled so, it never waits here
	Juju      = "juju-ratelimit"
	GoLimiter = "go-limiter"
	Throttled = "throttled"
	Ulule     = "ulule-limiter"
	HTTPRate  = "httprate"
	RedisRate = "redis_rate"
)

// Admit-mode parameters of the peers' token buckets: a token every
// nanosecond, a burst of 10^6, as admit's tbRule.
const (
	peerRate  = 1e9
	peerBurst = 1_000_000
	// hugeCount is a count limit no run reaches, for the window algorithms.
	hugeCount = 1 << 40
)

func peerSingles() []SingleRow {
	return []SingleRow{
		{Impl: XTime, Algo: "token-bucket", Family: FamilyPeer, New: func(env Env) (Limiter, func(), error) {
			if env.Mode == Deny {
				l := rate.NewLimiter(rate.Every(time.Hour), 1)
				l.Allow()
				return xtime{l}, nop, nil
			}
			return xtime{rate.NewLimiter(peerRate, peerBurst)}, nop, nil
		}},
		{Impl: Uber, Algo: "token-bucket", Family: FamilyPeer, AdmitOnly: true, New: func(Env) (Limiter, func(), error) {
			// Take blocks rather than denies. 10^6 per millisecond is one permission
			// per nanosecond, so Take never waits: this measures its bookkeeping.
			return uberTake{uber.New(1_000_000, uber.Per(time.Millisecond))}, nop, nil
		}},
		{Impl: Juju, Algo: "token-bucket", Family: FamilyPeer, New: func(env Env) (Limiter, func(), error) {
			if env.Mode == Deny {
				b := ratelimit.NewBucket(time.Hour, 1)
				b.TakeAvailable(1)
				return juju{b}, nop, nil
			}
			return juju{ratelimit.NewBucketWithRate(peerRate, peerBurst)}, nop, nil
		}},
	}
}

func peerKeyeds() []KeyedRow {
	return []KeyedRow{
		{Impl: XTime, Algo: "token-bucket", Family: FamilyPeer, New: func(env Env) (Keyed, func(), error) {
			k := &xtimeKeyed{r: peerRate, b: peerBurst}
			if env.Mode == Deny {
				k.r, k.b = rate.Every(time.Hour), 1
			}
			return k, nop, nil
		}},
		{Impl: Juju, Algo: "token-bucket", Family: FamilyPeer, New: func(env Env) (Keyed, func(), error) {
			k := &jujuKeyed{deny: env.Mode == Deny}
			return k, nop, nil
		}},
		{Impl: GoLimiter, Algo: "token-bucket", Family: FamilyPeer, Evicts: true, New: newGoLimiter},
		{Impl: Throttled, Algo: "token-bucket", Family: FamilyPeer, Evicts: true, New: newThrottled},
		{Impl: Ulule, Algo: "fixed-window", Family: FamilyPeer, Evicts: true, New: newUlule},
		{Impl: HTTPRate, Algo: "sliding-counter", Family: FamilyPeer, New: newHTTPRate},
	}
}

func decision(ok bool) admit.Decision { return admit.Decision{Allowed: ok} }

// ---- golang.org/x/time/rate ----

type xtime struct{ l *rate.Limiter }

func (x xtime) Allow() admit.Decision { return decision(x.l.Allow()) }

func (x xtime) AllowN(n int) admit.Decision { return decision(x.l.AllowN(time.Now(), n)) }

// xtimeKeyed is the usual way to key x/time/rate: a sync.Map of limiters,
// created on first use.
type xtimeKeyed struct {
	m sync.Map
	r rate.Limit
	b int
}

func (k *xtimeKeyed) get(key string) *rate.Limiter {
	if v, ok := k.m.Load(key); ok {
		return v.(*rate.Limiter)
	}
	v, _ := k.m.LoadOrStore(strings.Clone(key), rate.NewLimiter(k.r, k.b))
	return v.(*rate.Limiter)
}

func (k *xtimeKeyed) Allow(key string) admit.Decision { return decision(k.get(key).Allow()) }

func (k *xtimeKeyed) AllowN(key string, n int) admit.Decision {
	return decision(k.get(key).AllowN(time.Now(), n))
}

// ---- go.uber.org/ratelimit ----

type uberTake struct{ l uber.Limiter }

func (u uberTake) Allow() admit.Decision {
	u.l.Take()
	return decision(true)
}

// ---- github.com/juju/ratelimit ----

type juju struct{ b *ratelimit.Bucket }

func (j juju) Allow() admit.Decision { return decision(j.b.TakeAvailable(1) == 1) }

// AllowN is all or nothing: TakeMaxDuration with no wait takes n or none.
func (j juju) AllowN(n int) admit.Decision {
	_, ok := j.b.TakeMaxDuration(int64(n), 0)
	return decision(ok)
}

type jujuKeyed struct {
	m    sync.Map
	deny bool
}

func (k *jujuKeyed) get(key string) *ratelimit.Bucket {
	if v, ok := k.m.Load(key); ok {
		return v.(*ratelimit.Bucket)
	}
	var b *ratelimit.Bucket
	if k.deny {
		b = ratelimit.NewBucket(time.Hour, 1)
	} else {
		b = ratelimit.NewBucketWithRate(peerRate, peerBurst)
	}
	v, _ := k.m.LoadOrStore(strings.Clone(key), b)
	return v.(*ratelimit.Bucket)
}

func (k *jujuKeyed) Allow(key string) admit.Decision {
	return decision(k.get(key).TakeAvailable(1) == 1)
}

func (k *jujuKeyed) AllowN(key string, n int) admit.Decision {
	_, ok := k.get(key).TakeMaxDuration(int64(n), 0)
	return decision(ok)
}

// ---- github.com/sethvargo/go-limiter ----

type goLimiter struct{ s golimiter.Store }

func (g goLimiter) Allow(key string) admit.Decision {
	_, _, _, ok, err := g.s.Take(context.Background(), key)
	return decision(ok && err == nil)
}

// newGoLimiter: eviction on is a sweep every 100ms with the minimum TTL its
// documentation asks for (at least the interval), so no key in use is purged;
// off is a sweep interval longer than any run.
func newGoLimiter(env Env) (Keyed, func(), error) {
	c := &memorystore.Config{Tokens: 1 << 62, Interval: time.Hour, SweepInterval: 24 * time.Hour, SweepMinTTL: 48 * time.Hour}
	if env.Mode == Deny {
		c.Tokens = 1
	}
	if env.Evict {
		c.SweepInterval, c.SweepMinTTL = 100*time.Millisecond, 2*time.Hour
	}
	if env.Keys > 0 {
		c.InitialAlloc = min(env.Keys, 4096) // its default; larger would pre-size the map for it alone
	}
	s, err := memorystore.New(c)
	if err != nil {
		return nil, nil, err
	}
	return goLimiter{s}, func() { s.Close(context.Background()) }, nil
}

// ---- github.com/throttled/throttled/v2 ----

type throttledGCRA struct{ l *throttled.GCRARateLimiterCtx }

func (t throttledGCRA) Allow(key string) admit.Decision { return t.AllowN(key, 1) }

// AllowN counts an error (its CAS gave up after 10 attempts under contention)
// as a denial, as a server would.
func (t throttledGCRA) AllowN(key string, n int) admit.Decision {
	limited, _, err := t.l.RateLimitCtx(context.Background(), key, n)
	return decision(!limited && err == nil)
}

// newThrottled: eviction on is memstore's LRU bound, sized to the workload's
// keys so that no key in use is evicted; off is an unbounded map.
func newThrottled(env Env) (Keyed, func(), error) {
	maxKeys := 0
	if env.Evict {
		maxKeys = max(env.Keys, 1)
	}
	st, err := memstore.NewCtx(maxKeys)
	if err != nil {
		return nil, nil, err
	}
	q := throttled.RateQuota{MaxRate: throttled.PerDuration(1_000_000, time.Millisecond), MaxBurst: peerBurst - 1}
	if env.Mode == Deny {
		q = throttled.RateQuota{MaxRate: throttled.PerHour(1), MaxBurst: 0}
	}
	l, err := throttled.NewGCRARateLimiterCtx(st, q)
	if err != nil {
		return nil, nil, err
	}
	return throttledGCRA{l}, nop, nil
}

// ---- github.com/ulule/limiter/v3 ----

type ululeKeyed struct{ l *ulule.Limiter }

func (u ululeKeyed) Allow(key string) admit.Decision {
	c, err := u.l.Get(context.Background(), key)
	return decision(err == nil && !c.Reached)
}

func (u ululeKeyed) AllowN(key string, n int) admit.Decision {
	c, err := u.l.Increment(context.Background(), key, int64(n))
	return decision(err == nil && !c.Reached)
}

// newUlule: eviction on is its memory store's cleaner every 100ms (counters
// expire with their one-hour window, so none in use goes); off is no cleaner.
func newUlule(env Env) (Keyed, func(), error) {
	opts := ulule.StoreOptions{Prefix: "bench"}
	if env.Evict {
		opts.CleanUpInterval = 100 * time.Millisecond
	}
	r := ulule.Rate{Period: time.Hour, Limit: hugeCount}
	if env.Mode == Deny {
		r.Limit = 1
	}
	return ululeKeyed{ulule.New(ulmemory.NewStoreWithOptions(opts), r)}, nop, nil
}

// ---- github.com/go-chi/httprate ----

// httprateKeyed calls RateLimiter.OnLimit, the entry point httprate offers for
// use outside its middleware, with response headers turned off (so no header
// is formatted) on a request built once.
type httprateKeyed struct {
	l    *httprate.RateLimiter
	w    http.ResponseWriter
	reqs []*http.Request // reqs[n] carries increment n
}

// maxHTTPRateN is the largest n AllowN has a request for.
const maxHTTPRateN = 64

func newHTTPRate(env Env) (Keyed, func(), error) {
	limit := hugeCount
	if env.Mode == Deny {
		limit = 1
	}
	l := httprate.NewRateLimiter(limit, time.Hour, httprate.WithResponseHeaders(httprate.ResponseHeaders{}))
	k := &httprateKeyed{l: l, w: discardWriter{h: http.Header{}}, reqs: make([]*http.Request, maxHTTPRateN+1)}
	base, err := http.NewRequest(http.MethodGet, "http://localhost/", nil)
	if err != nil {
		return nil, nil, err
	}
	for n := range k.reqs {
		k.reqs[n] = base
		if n != 1 {
			k.reqs[n] = base.WithContext(httprate.WithIncrement(base.Context(), n))
		}
	}
	return k, nop, nil
}

func (h *httprateKeyed) Allow(key string) admit.Decision {
	return decision(!h.l.OnLimit(h.w, h.reqs[1], key))
}

func (h *httprateKeyed) AllowN(key string, n int) admit.Decision {
	return decision(!h.l.OnLimit(h.w, h.reqs[n], key))
}

// discardWriter is a ResponseWriter that keeps nothing.
type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header         { return d.h }
func (d discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d discardWriter) WriteHeader(int)             {}
