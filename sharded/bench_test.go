package sharded_test

import (
	"flag"
	"math/rand"
	randv2 "math/rand/v2"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/sharded"
)

// The keyed stores side by side. The cross-library comparison lives in
// bench/; these are the stores' own numbers, recorded in
// docs/keyed-stores.md. Names are key=value for benchstat; parallelism
// comes from -cpu.

type impl struct {
	name     string
	new      func(admit.Rule, ...admit.Option) (admit.Store, error)
	supports func(admit.Algorithm) bool
}

func all(admit.Algorithm) bool { return true }

// impls are the keyed stores: sharded's map store, atomic's table (the
// rules it takes: benchRule's sliding counter packs), each with full and
// with hashed keys, and locked's map under one mutex.
var impls = []impl{
	{"sharded", sharded.New, all},
	{"sharded-hashed", withHashedKeys(sharded.New), all},
	{"locked", locked.New, all},
	{"atomic", admitatomic.New, notLog},
	{"atomic-hashed", withHashedKeys(admitatomic.New), notLog},
}

func notLog(a admit.Algorithm) bool { return a != admit.SlidingLog }

// withHashedKeys returns newLim with admit.WithHashedKeys added to its
// options.
func withHashedKeys(newLim func(admit.Rule, ...admit.Option) (admit.Store, error)) func(admit.Rule, ...admit.Option) (admit.Store, error) {
	return func(r admit.Rule, opts ...admit.Option) (admit.Store, error) {
		return newLim(r, append(opts, admit.WithHashedKeys())...)
	}
}

// benchRule is the rule of the throughput benchmarks: a limit most calls
// stay within, and a small one for the sliding log, whose state is a ring of
// Limit timestamps per key.
func benchRule(alg admit.Algorithm) admit.Rule {
	if alg == admit.SlidingLog {
		return admit.Rule{Algorithm: alg, Limit: 16, Window: time.Hour}
	}
	return admit.Rule{Algorithm: alg, Limit: 1000, Window: time.Hour}
}

// keySequence returns 1<<20 key indices in [0, keys): uniform, or Zipf with
// s = 1.1 (the hottest key takes about 9% of the calls and the hottest 1% of
// the keys about 60%).
func keySequence(dist string, keys int) []int32 {
	seq := make([]int32, 1<<20)
	switch dist {
	case "uniform":
		r := randv2.New(randv2.NewPCG(1, 2))
		for i := range seq {
			seq[i] = int32(r.IntN(keys))
		}
	case "zipf":
		z := rand.NewZipf(rand.New(rand.NewSource(1)), 1.1, 1, uint64(keys-1))
		for i := range seq {
			seq[i] = int32(z.Uint64())
		}
	}
	return seq
}

// BenchmarkKeyed measures Allow on 100,000 existing keys, chosen uniformly or
// by a Zipf law, from every goroutine of RunParallel, on the system clock.
func BenchmarkKeyed(b *testing.B) {
	const nkeys = 100_000
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(1_000_000+i)
	}
	for _, dist := range []string{"uniform", "zipf"} {
		seq := keySequence(dist, nkeys)
		for _, alg := range conformance.Algorithms {
			for _, im := range impls {
				if !im.supports(alg) {
					continue
				}
				b.Run("impl="+im.name+"/algo="+alg.String()+"/dist="+dist+"/keys="+strconv.Itoa(nkeys), func(b *testing.B) {
					lim, err := im.new(benchRule(alg), admit.WithClock(clock.System()))
					if err != nil {
						b.Fatal(err)
					}
					for _, k := range keys {
						lim.Allow(k)
					}
					var start atomic.Uint64
					b.ReportAllocs()
					b.ResetTimer()
					b.RunParallel(func(pb *testing.PB) {
						i := int(start.Add(1) * 104729) // each goroutine from its own place
						for pb.Next() {
							lim.Allow(keys[seq[i&(len(seq)-1)]])
							i++
						}
					})
				})
			}
		}
	}
}

var bytesPerKeyKeys = flag.Int("bytes-per-key.keys", 1_000_000, "keys stored by BenchmarkBytesPerKey (at most 8,999,999)")

// BenchmarkBytesPerKey stores 1,000,000 keys of 12 bytes ("user-1000000" to
// "user-1999999") and reports the heap they take, in B/key: the key's copy,
// the state and the map's share, after a full collection. Run it with
// -benchtime=1x; more iterations repeat the measurement on a new store.
// -bytes-per-key.keys=N stores N keys instead: a Go map's share per key
// depends on where N falls in its cycle of growth (see docs/keyed-stores.md).
func BenchmarkBytesPerKey(b *testing.B) {
	nkeys := *bytesPerKeyKeys
	for _, alg := range conformance.Algorithms {
		for _, im := range impls {
			if !im.supports(alg) {
				continue
			}
			b.Run("impl="+im.name+"/algo="+alg.String()+"/keys="+strconv.Itoa(nkeys), func(b *testing.B) {
				rule := admit.Rule{Algorithm: alg, Limit: 10, Window: time.Minute}
				b.ReportAllocs()
				var perKey float64
				for range b.N {
					perKey = bytesPerKey(b, im.new, rule, nkeys)
				}
				b.ReportMetric(perKey, "B/key")
			})
		}
	}
}

func bytesPerKey(b *testing.B, newLim func(admit.Rule, ...admit.Option) (admit.Store, error), rule admit.Rule, nkeys int) float64 {
	fake := clock.NewFake()
	fake.Set(time.Hour)
	buf := make([]byte, 0, 16)
	before := heapInUse()
	lim, err := newLim(rule, admit.WithClock(fake))
	if err != nil {
		b.Fatal(err)
	}
	for i := range nkeys {
		buf = strconv.AppendInt(append(buf[:0], "user-"...), int64(1_000_000+i), 10)
		if !lim.Allow(unsafe.String(&buf[0], len(buf))).Allowed { // the store keeps its own copy
			b.Fatalf("key %d denied", i)
		}
	}
	after := heapInUse()
	runtime.KeepAlive(lim)
	return float64(after-before) / float64(nkeys)
}

func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
