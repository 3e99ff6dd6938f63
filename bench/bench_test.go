package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	satomic "sync/atomic"
	"testing"
	"time"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/go-chi/httprate"

	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/httplimit"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/policy"
)

// Every benchmark here is data for benchstat: sub-benchmarks are named
// key=value, every one reports allocations, and the ones that measure an
// admitted path report admitted/op, which must read 1 (0 on a deny path): a
// limiter that denied would look fast for the wrong reason.
//
// -short leaves out the 1,000,000-key setups, which take seconds each; make
// test runs every benchmark once with it.

func TestMain(m *testing.M) {
	code := m.Run()
	StopCoarse()
	os.Exit(code)
}

var (
	sinkDecision admit.Decision
	sinkDur      time.Duration
	sinkTime     time.Time
	sinkBool     bool
)

// BenchmarkFloor measures the physical floors in the same run as the
// limiters: a read of the monotonic clock (time.Since, what clock.System
// does), of the wall and monotonic clocks (time.Now, what most peers call), of
// the coarse clock, one uncontended CAS, both together, an uncontended mutex,
// a sync.Map load, and a dynamic call (what every row pays to be called
// through the benchmark's interface).
func BenchmarkFloor(b *testing.B) {
	var w satomic.Uint64
	b.Run("op=time.Since", func(b *testing.B) {
		b.ReportAllocs()
		var s time.Duration
		for b.Loop() {
			s += time.Since(origin)
		}
		sinkDur = s
	})
	b.Run("op=time.Now", func(b *testing.B) {
		b.ReportAllocs()
		var t time.Time
		for b.Loop() {
			t = time.Now()
		}
		sinkTime = t
	})
	b.Run("op=coarse.Now", func(b *testing.B) {
		c := coarse()
		b.ReportAllocs()
		var s time.Duration
		for b.Loop() {
			s += c.Now()
		}
		sinkDur = s
	})
	b.Run("op=cas", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v := w.Load()
			w.CompareAndSwap(v, v+1)
		}
	})
	b.Run("op=since+cas", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v := w.Load()
			w.CompareAndSwap(v, v+uint64(time.Since(origin)))
		}
	})
	b.Run("op=mutex", func(b *testing.B) {
		var mu sync.Mutex
		n := 0
		b.ReportAllocs()
		for b.Loop() {
			mu.Lock()
			n++
			mu.Unlock()
		}
		sinkBool = n > 0
	})
	b.Run("op=sync.Map.Load", func(b *testing.B) {
		var m sync.Map
		keys := Keys(1000)
		for _, k := range keys {
			m.Store(k, new(int))
		}
		key := keys[500]
		b.ReportAllocs()
		for b.Loop() {
			_, ok := m.Load(key)
			sinkBool = ok
		}
	})
	b.Run("op=dynamic-call", func(b *testing.B) {
		var l Limiter = nopLimiter{}
		b.ReportAllocs()
		for b.Loop() {
			sinkDecision = l.Allow()
		}
	})
}

type nopLimiter struct{}

//go:noinline
func (nopLimiter) Allow() admit.Decision { return admit.Decision{Allowed: true} }

func paths() []struct {
	name string
	mode Mode
} {
	return []struct {
		name string
		mode Mode
	}{{"allow", Admit}, {"deny", Deny}}
}

// BenchmarkSerial measures one key from one goroutine: path=allow with a limit
// no run reaches, path=deny with a spent limit. The floor rows (a clock read
// and a CAS, a clock read and a mutex) go through the same interface.
func BenchmarkSerial(b *testing.B) {
	for _, p := range paths() {
		for _, row := range Singles() {
			if p.mode == Deny && row.AdmitOnly {
				continue
			}
			b.Run("path="+p.name+"/algo="+row.Algo+"/impl="+row.Impl, func(b *testing.B) {
				l, stop := newSingle(b, row, Env{Mode: p.mode, Keys: 1})
				defer stop()
				admitted := 0
				b.ReportAllocs()
				for b.Loop() {
					if l.Allow().Allowed {
						admitted++
					}
				}
				b.ReportMetric(float64(admitted)/float64(b.N), "admitted/op")
			})
		}
	}
}

// BenchmarkHotKey measures one key shared by every goroutine, admitted path;
// parallelism comes from -cpu (make bench runs -cpu 1,2,4,8).
func BenchmarkHotKey(b *testing.B) {
	for _, row := range Singles() {
		if row.Impl == FloorMutex || (strings.HasSuffix(row.Impl, "-coarse") && row.Algo != admit.TokenBucket.String()) {
			continue // measured serially; here they would only add minutes
		}
		b.Run("algo="+row.Algo+"/impl="+row.Impl, func(b *testing.B) {
			l, stop := newSingle(b, row, Env{Mode: Admit, Keys: 1})
			defer stop()
			var admitted satomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				n := int64(0)
				for pb.Next() {
					if l.Allow().Allowed {
						n++
					}
				}
				admitted.Add(n)
			})
			b.ReportMetric(float64(admitted.Load())/float64(b.N), "admitted/op")
		})
	}
}

// keyCounts are the key-set sizes of the keyed workloads. Every row runs at
// fullKeys; at the other sizes, the token buckets and the peers.
var keyCounts = []int{1000, 100_000, 1_000_000}

const fullKeys = 100_000

// keyedRows returns the keyed rows a workload of use over nkeys runs.
func keyedRows(nkeys int, use Use) []KeyedRow {
	var rows []KeyedRow
	for _, r := range Keyeds() {
		if !r.Runs(use) {
			continue
		}
		if nkeys == fullKeys || r.Family != FamilyAdmit || r.Algo == admit.TokenBucket.String() {
			rows = append(rows, r)
		}
	}
	return rows
}

// skipLarge reports whether -short leaves out a workload over nkeys keys.
func skipLarge(nkeys int) bool { return nkeys >= 1_000_000 && testing.Short() }

// BenchmarkKeyed measures keyed limiters on existing keys (each primed before
// the measurement, see Use), picked from a pre-generated sequence, uniform
// or Zipf(1.1), from every goroutine of -cpu at once.
func BenchmarkKeyed(b *testing.B) {
	dists := []Distribution{Uniform, Zipf}
	for _, nkeys := range keyCounts {
		if skipLarge(nkeys) {
			continue
		}
		ws := KeyedWorkloads(nkeys, dists...)
		for _, row := range keyedRows(nkeys, Steady) {
			// One setup serves both distributions: they share the key set.
			l, stop := newKeyed(b, row, Env{Mode: Admit, Keys: nkeys, Use: Steady})
			for _, k := range ws[0].Keys {
				row.PrimeKey(l, k)
			}
			for i, d := range dists {
				name := "keys=" + strconv.Itoa(nkeys) + "/dist=" + string(d) + "/algo=" + row.Algo + "/impl=" + row.Impl
				b.Run(name, func(b *testing.B) { runKeyed(b, ws[i], func(k string, _ int) admit.Decision { return l.Allow(k) }) })
			}
			stop()
		}
	}
}

// runKeyed runs RunParallel over w's sequence, each goroutine from its own
// offset, and reports admitted/op.
func runKeyed(b *testing.B, w *Workload, allow func(key string, i int) admit.Decision) {
	var admitted satomic.Int64
	var goroutines satomic.Int32
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := int(goroutines.Add(1)) * 104729 // a prime stride apart
		n := int64(0)
		for pb.Next() {
			i = (i + 1) & (SeqLen - 1)
			if allow(w.Keys[w.Seq[i]], i).Allowed {
				n++
			}
		}
		admitted.Add(n)
	})
	b.ReportMetric(float64(admitted.Load())/float64(b.N), "admitted/op")
}

// churnPool is how many fresh keys BenchmarkChurn has; when a run needs more,
// it starts over on a new limiter, off the clock.
const churnPool = 1 << 18

// BenchmarkChurn measures new keys: every call is a key the limiter has never
// seen, from one goroutine, so it pays the insertion (and, as the store
// grows, its resizing).
func BenchmarkChurn(b *testing.B) {
	keys := Keys(churnPool) // not cached: a large live heap would slow every later benchmark's GCs
	for _, row := range keyedRows(fullKeys, Churn) {
		b.Run("algo="+row.Algo+"/impl="+row.Impl, func(b *testing.B) {
			l, stop := newKeyed(b, row, Env{Mode: Admit, Keys: churnPool, Use: Churn})
			defer func() { stop() }()
			admitted, i := 0, 0
			b.ReportAllocs()
			for b.Loop() {
				if i == len(keys) {
					b.StopTimer()
					stop()
					l, stop = newKeyed(b, row, Env{Mode: Admit, Keys: churnPool, Use: Churn})
					i = 0
					b.StartTimer()
				}
				if l.Allow(keys[i]).Allowed {
					admitted++
				}
				i++
			}
			b.ReportMetric(float64(admitted)/float64(b.N), "admitted/op")
		})
	}
}

// allowNMix is the mix of n in BenchmarkAllowN: mostly single requests, some
// batches.
var allowNMix = []int{1, 1, 1, 1, 2, 3, 5, 8}

// BenchmarkAllowN measures AllowN with n from a mix (1, 2, 3, 5, 8; half of
// them 1) on 1,000 existing keys, uniform, from every goroutine of -cpu. Rows
// without an all-or-nothing AllowN (go-limiter) are left out.
func BenchmarkAllowN(b *testing.B) {
	const nkeys = 1000
	w := KeyedWorkload(nkeys, Uniform)
	ns := make([]int, SeqLen)
	for i := range ns {
		ns[i] = allowNMix[int(uint(i)*2654435761>>7)%len(allowNMix)]
	}
	for _, row := range keyedRows(fullKeys, Steady) {
		l, stop := newKeyed(b, row, Env{Mode: Admit, Keys: nkeys, Use: Steady})
		kn, ok := l.(KeyedN)
		if !ok {
			stop()
			continue
		}
		for _, k := range w.Keys {
			row.PrimeKey(l, k)
		}
		b.Run("keys="+strconv.Itoa(nkeys)+"/algo="+row.Algo+"/impl="+row.Impl, func(b *testing.B) {
			runKeyed(b, w, func(k string, i int) admit.Decision { return kn.AllowN(k, ns[i]) })
		})
		stop()
	}
}

// policyBook gives every pair a limit no run reaches, so Check measures the
// admitted path.
const policyBook = `
default    = token-bucket,1000000,1ms
api./login = fixed-window,1000000000,1s
`

// BenchmarkPolicy measures policy.Service.Check: pairs=1 is one (user, API)
// pair shared by every goroutine, pairs=1000 spreads the calls over 1,000
// users of one API, uniform. impl is the variant building the Service's
// limiters: policy-default (the Service's own choice: atomic's table for
// this token bucket), policy-locked and policy-atomic (policy.WithFactory).
func BenchmarkPolicy(b *testing.B) {
	book, err := policy.Parse(strings.NewReader(policyBook))
	if err != nil {
		b.Fatal(err)
	}
	factories := []struct {
		impl string
		opts []admit.Option
	}{
		{"policy-default", nil},
		{"policy-locked", []admit.Option{policy.WithFactory(locked.New)}},
		{"policy-atomic", []admit.Option{policy.WithFactory(admitatomic.New)}},
	}
	for _, nkeys := range []int{1, 1000} {
		w := KeyedWorkload(nkeys, Uniform)
		for _, f := range factories {
			s, err := policy.NewService(book, append(f.opts, admit.WithClock(clock.System()))...)
			if err != nil {
				b.Fatal(err)
			}
			for _, u := range w.Keys {
				s.Check(u, "/orders")
			}
			b.Run("pairs="+strconv.Itoa(nkeys)+"/algo=token-bucket/impl="+f.impl, func(b *testing.B) {
				runKeyed(b, w, func(u string, _ int) admit.Decision { return s.Check(u, "/orders") })
			})
		}
	}
}

// BenchmarkEviction measures 100,000 existing keys, uniform, from every
// goroutine, with the store's idle-key eviction on and off. Rows that have no
// eviction run off only, as the reference.
func BenchmarkEviction(b *testing.B) {
	const nkeys = fullKeys
	w := KeyedWorkload(nkeys, Uniform)
	for _, row := range keyedRows(nkeys, Steady) {
		reference := row.Family == FamilyAdmit && row.Algo == admit.TokenBucket.String() && (row.Impl == "atomic-packed" || row.Impl == "locked")
		if !row.Evicts && !reference {
			continue
		}
		for _, evict := range []bool{false, true} {
			if evict && !row.Evicts {
				continue
			}
			l, stop := newKeyed(b, row, Env{Mode: Admit, Keys: nkeys, Evict: evict, Use: Steady})
			for _, k := range w.Keys {
				row.PrimeKey(l, k)
			}
			b.Run("keys="+strconv.Itoa(nkeys)+"/evict="+onOff(evict)+"/algo="+row.Algo+"/impl="+row.Impl, func(b *testing.B) {
				runKeyed(b, w, func(k string, _ int) admit.Decision { return l.Allow(k) })
			})
			stop()
		}
	}
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// BenchmarkMemory measures what a keyed limiter holds per key: it inserts
// nkeys keys into a new limiter and reports bytes/key, the live heap's growth
// (after a GC) divided by nkeys. Here ns/op is the time to insert one key, and
// allocs/op and B/op are per key too. Run it with -benchtime=1x.
func BenchmarkMemory(b *testing.B) {
	for _, nkeys := range []int{fullKeys, 1_000_000} {
		if skipLarge(nkeys) {
			continue
		}
		keys := KeyedWorkload(nkeys, Uniform).Keys
		for _, row := range keyedRows(nkeys, Memory) {
			b.Run("keys="+strconv.Itoa(nkeys)+"/algo="+row.Algo+"/impl="+row.Impl, func(b *testing.B) {
				var perKey, elapsed float64
				var allocs, bytes uint64
				for b.Loop() {
					b.StopTimer()
					before := liveHeap()
					l, stop := newKeyed(b, row, Env{Mode: Admit, Keys: nkeys, Use: Memory})
					var ms0, ms1 runtime.MemStats
					runtime.ReadMemStats(&ms0)
					t0 := time.Now()
					b.StartTimer()
					for _, k := range keys {
						row.PrimeKey(l, k)
					}
					b.StopTimer()
					elapsed += float64(time.Since(t0))
					runtime.ReadMemStats(&ms1)
					allocs += ms1.Mallocs - ms0.Mallocs
					bytes += ms1.TotalAlloc - ms0.TotalAlloc
					perKey += float64(liveHeap()-before) / float64(nkeys)
					runtime.KeepAlive(l)
					stop()
					b.StartTimer()
				}
				runs := float64(b.N)
				b.ReportMetric(perKey/runs, "bytes/key")
				b.ReportMetric(elapsed/runs/float64(nkeys), "ns/op")
				b.ReportMetric(float64(allocs)/runs/float64(nkeys), "allocs/key")
				b.ReportMetric(float64(bytes)/runs/float64(nkeys), "B/key")
			})
		}
	}
}

// liveHeap returns the bytes of live heap objects after a full collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

func newSingle(b *testing.B, row SingleRow, env Env) (Limiter, func()) {
	b.Helper()
	l, stop, err := row.New(env)
	if err != nil {
		b.Fatalf("%s: %v", row.Impl, err)
	}
	return l, stop
}

func newKeyed(b *testing.B, row KeyedRow, env Env) (Keyed, func()) {
	b.Helper()
	l, stop, err := row.New(env)
	if err != nil {
		b.Fatalf("%s: %v", row.Impl, err)
	}
	return l, stop
}

// BenchmarkMiddleware measures a net/http middleware on an admitted request,
// keyed by client IP over 1,000 addresses, serially: admit's httplimit over
// atomic's keyed store, the table (RateLimit and RateLimit-Policy headers on), against
// go-chi/httprate's LimitByIP (its X-RateLimit headers on). The handler does
// nothing and the writer discards, so the figures are the middleware's own,
// allocations included.
func BenchmarkMiddleware(b *testing.B) {
	const clients = 1000
	reqs := make([]*http.Request, clients)
	for i := range reqs {
		reqs[i] = httptest.NewRequest(http.MethodGet, "/orders", nil)
		reqs[i].RemoteAddr = fmt.Sprintf("198.51.%d.%d:4242", i/256, i%256)
	}
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 2_000_000, Window: 30 * time.Minute}
	lim, err := admitatomic.New(rule)
	if err != nil {
		b.Fatal(err)
	}
	mw, err := httplimit.New(lim, httplimit.WithPolicy("default", rule))
	if err != nil {
		b.Fatal(err)
	}
	handlers := []struct {
		impl string
		h    http.Handler
	}{
		{"httplimit", mw.Handler(next)},
		{HTTPRate, httprate.LimitByIP(rule.Limit, rule.Window)(next)},
		{"none", next},
	}
	for _, h := range handlers {
		b.Run("algo=token-bucket/clients=1000/impl="+h.impl, func(b *testing.B) {
			w := discardWriter{h: http.Header{}}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				clear(w.h)
				h.h.ServeHTTP(w, reqs[i%clients])
				i++
			}
		})
	}
}
