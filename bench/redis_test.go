package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	satomic "sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/redistest"
	"github.com/admit-go/admit/redisstore"
)

// BenchmarkRedis measures one decision kept in Redis, against a redis-server
// started for the run on loopback (persistence off), over 1,000 keys, with
// limits high enough that every call is admitted (admitted/op reads 1):
//
//   - impl=admit: redisstore.Limiter.AllowN, server time.
//   - impl=admit-keyed: the same behind redisstore.Keyed (fail-closed, a
//     per-call timeout of one second), the admit.KeyedLimiter a middleware
//     uses: it adds a context with a deadline per call.
//   - impl=admit-batch10: the same decisions ten at a time, with
//     redisstore.AllowBatch (one pipeline of ten scripts); ns/op is still
//     per decision.
//   - impl=redis_rate: github.com/go-redis/redis_rate/v10, GCRA, on the same
//     server and client (token bucket only: it has no other algorithm).
//
// roundtrips/op counts the commands the client sent (a hook on the client)
// per decision, and rediscmds/op the commands the server ran for it, those
// inside scripts included, and redis-ns/op the time the server spent in
// scripts (both from INFO commandstats, the server's own accounts): the work
// a decision costs Redis. conc=parallel runs the calls from GOMAXPROCS×4
// goroutines over the client's pool. Without a redis-server
// binary the benchmark is skipped (failed if ADMIT_REQUIRE_REDIS is set).
func BenchmarkRedis(b *testing.B) {
	srv := redistest.Start(b)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer client.Close()
	sent := new(commandCounter)
	client.AddHook(sent)
	ctx := context.Background()
	const keys = 1000
	names := make([]string, keys)
	for i := range names {
		names[i] = "user:" + strconv.Itoa(i)
	}
	// 1,000,000 per hour: every call is admitted, and with server time in
	// microseconds Limit × Window (3.6e15) is within the scripts' 2^52.
	const limit = 1_000_000
	window := time.Hour

	type impl struct {
		name  string
		algo  admit.Algorithm
		allow func(key string) bool
		// batch, if not nil, decides keys in one AllowBatch instead, and
		// returns how many were admitted.
		batch func(keys []string) int
	}
	var impls []impl
	for _, alg := range []admit.Algorithm{admit.TokenBucket, admit.FixedWindow, admit.SlidingLog, admit.SlidingCounter} {
		rule := admit.Rule{Algorithm: alg, Limit: limit, Window: window}
		if alg == admit.SlidingLog {
			rule.Limit = admit.MaxSlidingLogLimit // per key: far above any b.N / 1,000 keys
		}
		l, err := redisstore.New(client, rule, redisstore.WithPrefix("bench-"+alg.String()+":"))
		if err != nil {
			b.Fatal(err)
		}
		impls = append(impls, impl{"admit", alg, func(key string) bool {
			d, err := l.AllowN(ctx, key, 1)
			if err != nil {
				b.Fatal(err)
			}
			return d.Allowed
		}, nil})
		if alg == admit.TokenBucket {
			k, err := redisstore.NewKeyed(l, redisstore.Policy{Mode: redisstore.FailClosed, Timeout: time.Second,
				OnError: func(key string, err error) { b.Error(err) }})
			if err != nil {
				b.Fatal(err)
			}
			impls = append(impls, impl{"admit-keyed", alg, func(key string) bool { return k.Allow(key).Allowed }, nil})
			impls = append(impls, impl{"admit-batch10", alg, nil, func(keys []string) int {
				calls := make([]redisstore.Call, len(keys))
				for i, key := range keys {
					calls[i] = redisstore.Call{Limiter: l, Key: key, N: 1}
				}
				if err := redisstore.AllowBatch(ctx, calls); err != nil {
					b.Fatal(err)
				}
				admitted := 0
				for _, c := range calls {
					if c.Err != nil {
						b.Fatal(c.Err)
					}
					if c.Decision.Allowed {
						admitted++
					}
				}
				return admitted
			}})
			rr := redis_rate.NewLimiter(client)
			rrLimit := redis_rate.Limit{Rate: limit, Burst: limit, Period: window}
			impls = append(impls, impl{RedisRate, alg, func(key string) bool {
				res, err := rr.Allow(ctx, "bench-redis_rate:"+key, rrLimit)
				if err != nil {
					b.Fatal(err)
				}
				return res.Allowed == 1
			}, nil})
		}
	}

	for _, conc := range []string{"serial", "parallel"} {
		for _, im := range impls {
			b.Run(fmt.Sprintf("algo=%s/keys=%d/conc=%s/impl=%s", im.algo, keys, conc, im.name), func(b *testing.B) {
				allow := im.allow
				if im.batch != nil {
					allow = func(key string) bool { return im.batch([]string{key}) == 1 }
				}
				for _, k := range names[:10] { // load the script before the clock starts
					allow(k)
				}
				if err := client.ConfigResetStat(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				sent.n.Store(0)
				b.ReportAllocs()
				b.ResetTimer()
				var admitted int64
				switch {
				case im.batch != nil:
					// b.N decisions, ten to a batch, from one goroutine or many.
					run := func(next func() bool, start int) int64 {
						var n int64
						batch := make([]string, 0, 10)
						for i := start; next(); i++ {
							batch = append(batch, names[i%keys])
							if len(batch) == cap(batch) {
								n += int64(im.batch(batch))
								batch = batch[:0]
							}
						}
						if len(batch) > 0 {
							n += int64(im.batch(batch))
						}
						return n
					}
					if conc == "serial" {
						left := b.N
						admitted = run(func() bool { left--; return left >= 0 }, 0)
					} else {
						b.SetParallelism(4)
						var total satomic.Int64
						var seq satomic.Int64
						b.RunParallel(func(pb *testing.PB) {
							total.Add(run(pb.Next, int(seq.Add(100))))
						})
						admitted = total.Load()
					}
				case conc == "serial":
					i := 0
					for range b.N {
						if im.allow(names[i%keys]) {
							admitted++
						}
						i++
					}
				default:
					b.SetParallelism(4)
					var total satomic.Int64
					b.RunParallel(func(pb *testing.PB) {
						i, n := 0, int64(0)
						for pb.Next() {
							if im.allow(names[i%keys]) {
								n++
							}
							i += 7
						}
						total.Add(n)
					})
					admitted = total.Load()
				}
				b.StopTimer()
				b.ReportMetric(float64(admitted)/float64(b.N), "admitted/op")
				b.ReportMetric(float64(sent.n.Load())/float64(b.N), "roundtrips/op")
				cmds, usec := serverCommands(b, client)
				b.ReportMetric(float64(cmds)/float64(b.N), "rediscmds/op")
				b.ReportMetric(usec*1000/float64(b.N), "redis-ns/op")
			})
		}
	}
}

// serverCommands returns the commands the server has run since the last
// CONFIG RESETSTAT, leaving out the INFO and CONFIG calls that count them
// (the counters' own), and the microseconds it spent running scripts.
func serverCommands(b *testing.B, c *redis.Client) (cmds int, scriptUsec float64) {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok || name == "info" || strings.HasPrefix(name, "config") {
			continue
		}
		fields := strings.Split(strings.TrimSpace(rest), ",")
		n, err := strconv.Atoi(fields[0])
		if err != nil {
			b.Fatalf("commandstats line %q: %v", line, err)
		}
		cmds += n
		if name == "evalsha" || name == "eval" {
			for _, f := range fields[1:] {
				if v, ok := strings.CutPrefix(f, "usec="); ok {
					u, err := strconv.ParseFloat(v, 64)
					if err != nil {
						b.Fatalf("commandstats line %q: %v", line, err)
					}
					scriptUsec += u
				}
			}
		}
	}
	return cmds, scriptUsec
}

// commandCounter is a client hook counting round trips: one per command, one
// per pipeline.
type commandCounter struct{ n satomic.Int64 }

func (h *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}
