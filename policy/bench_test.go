package policy_test

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/policy"
	"github.com/admit-go/admit/tally"
)

// benchBook gives every source of rule a limit so large that the benchmark
// measures the path of an admitted request for the whole run.
const benchBook = `
default    = token-bucket,1000000,1h
api./login = token-bucket,1000000,1h
user.vip-1 = token-bucket,1000000,1h
`

// benchPairs maps a source of rule to a pair it governs.
var benchPairs = []struct{ source, user, api string }{
	{"default", "alice", "/orders"},
	{"api", "alice", "/login"},
	{"user", "vip-1", "/orders"},
}

// BenchmarkCheck measures Service.Check on an existing pair, serially, for
// each source of rule (source=default|api|user), with the system clock.
// Names are key=value for benchstat.
func BenchmarkCheck(b *testing.B) {
	for _, p := range benchPairs {
		b.Run("source="+p.source, func(b *testing.B) {
			s := service(b, parse(b, benchBook), admit.WithClock(clock.System()))
			user, api := strings.Clone(p.user), strings.Clone(p.api)
			s.Check(user, api)
			b.ReportAllocs()
			for b.Loop() {
				s.Check(user, api)
			}
		})
	}
}

// BenchmarkCheckParallel measures Service.Check from every goroutine of -cpu
// at once: pairs=1 is one hot pair shared by all, pairs=N spreads the calls
// over N existing users of the pair's API.
func BenchmarkCheckParallel(b *testing.B) {
	for _, p := range benchPairs {
		for _, n := range []int{1, 1000} {
			b.Run("source="+p.source+"/pairs="+strconv.Itoa(n), func(b *testing.B) {
				s := service(b, parse(b, benchBook), admit.WithClock(clock.System()))
				users := make([]string, n)
				for i := range users {
					users[i] = p.user
					if n > 1 && p.source != "user" {
						users[i] = p.user + "-" + strconv.Itoa(i)
					}
					s.Check(users[i], p.api)
				}
				apis := make([]string, n)
				for i := range apis {
					apis[i] = p.api
					if n > 1 && p.source == "user" {
						apis[i] = p.api + "/" + strconv.Itoa(i) // a user rule's pairs differ by API
						s.Check(users[i], apis[i])
					}
				}
				b.ReportAllocs()
				b.ResetTimer() // the setup built up to 1000 limiters
				b.RunParallel(func(pb *testing.PB) {
					i := 0
					for pb.Next() {
						s.Check(users[i%n], apis[i%n])
						i++
					}
				})
			})
		}
	}
}

// BenchmarkCheckAPIs measures the Service's registry of limiters per API,
// which Check consults on every call: apis=N spreads the calls of every
// goroutine of -cpu over N existing APIs of the default rule (one group,
// N limiters), 16 users each.
func BenchmarkCheckAPIs(b *testing.B) {
	for _, n := range []int{1, 64} {
		b.Run("apis="+strconv.Itoa(n), func(b *testing.B) {
			s := service(b, parse(b, benchBook), admit.WithClock(clock.System()))
			const users = 16
			pairs := make([][2]string, 0, n*users)
			for a := range n {
				for u := range users {
					p := [2]string{"user-" + strconv.Itoa(u), "/api/" + strconv.Itoa(a)}
					s.Check(p[0], p[1])
					pairs = append(pairs, p)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					p := &pairs[i%len(pairs)]
					s.Check(p[0], p[1])
					i += 17 // a stride coprime with 16 users: every API in turn
				}
			})
		})
	}
}

// BenchmarkPairBytes measures what a Service holds per (user, API) pair with
// its default factory: it checks pairs=N new users of one API, with 12-byte
// names, under a default rule of limit per minute (each pair admitted once on
// a frozen clock, so none is idle and dropped), and reports B/pair, the live
// heap's growth after a full collection divided by N: the user name's copy,
// the state and the keyed limiter's share. The API's own limiter is built
// before the measurement. Run it with -benchtime=1x; a Go map's share per key
// depends on where N falls in its cycle of growth. The composite row,
// algo=token-bucket+fixed-window, is a token bucket of limit per minute and
// a fixed window of 100 per hour on each pair.
func BenchmarkPairBytes(b *testing.B) {
	const pairs = 100_000
	for _, r := range []struct {
		alg   string
		limit int
	}{{"token-bucket", 10}, {"fixed-window", 10}, {"sliding-counter", 10}, {"sliding-log", 10}, {"sliding-log", 100}, {"token-bucket+fixed-window", 10}} {
		b.Run("algo="+r.alg+"/limit="+strconv.Itoa(r.limit)+"/pairs="+strconv.Itoa(pairs), func(b *testing.B) {
			text := r.alg + "," + strconv.Itoa(r.limit) + ",1m"
			if r.alg == "token-bucket+fixed-window" {
				text = "token-bucket," + strconv.Itoa(r.limit) + ",1m + fixed-window,100,1h"
			}
			var perPair float64
			for range b.N {
				fake := clock.NewFake()
				s := service(b, parse(b, "default = "+text), admit.WithClock(fake))
				s.Check("first", "/orders") // the API's limiter
				users := make([]string, pairs)
				for i := range users {
					users[i] = "user-" + strconv.Itoa(1_000_000+i)
				}
				before := liveHeap()
				for _, u := range users {
					if !s.Check(u, "/orders").Allowed {
						b.Fatalf("Check(%q, /orders) denied", u)
					}
				}
				after := liveHeap()
				runtime.KeepAlive(users)
				runtime.KeepAlive(s)
				perPair = float64(after-before) / pairs
			}
			b.ReportMetric(perPair, "B/pair")
		})
	}
}

// liveHeap returns the bytes of live heap objects after a full collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// BenchmarkCheckObserved measures Service.Check from every goroutine of
// -cpu at once over 1,000 existing users of one API, with no observer, with
// a tally (observer=tally) and with a timed tally (observer=tally-timed).
func BenchmarkCheckObserved(b *testing.B) {
	for _, name := range []string{"none", "tally", "tally-timed"} {
		b.Run("observer="+name, func(b *testing.B) {
			opts := []admit.Option{admit.WithClock(clock.System())}
			switch name {
			case "tally":
				opts = append(opts, policy.WithObserver(newTallyB(b)))
			case "tally-timed":
				opts = append(opts, policy.WithObserver(newTallyB(b, tally.WithLatency())))
			}
			s := service(b, parse(b, benchBook), opts...)
			users := make([]string, 1000)
			for i := range users {
				users[i] = "alice-" + strconv.Itoa(i)
				s.Check(users[i], "/orders")
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					s.Check(users[i%len(users)], "/orders")
					i++
				}
			})
		})
	}
}

func newTallyB(b *testing.B, opts ...tally.Option) *tally.Tally {
	t, err := tally.New(opts...)
	if err != nil {
		b.Fatal(err)
	}
	return t
}
