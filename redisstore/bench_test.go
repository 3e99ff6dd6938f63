package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/redistest"
	"github.com/admit-go/admit/policy"
	"github.com/admit-go/admit/redisstore"
)

// BenchmarkAllowN measures one serial decision on a redis-server started for
// the run on loopback, server time, over 1,000 keys, with limits high enough
// that every call is admitted: rules=1 is New's script on a token bucket,
// rules=2 the composite script on that token bucket and a fixed window.
// redis-ns/op is the time the server spent in scripts per decision (INFO
// commandstats), the work a decision costs Redis. bench/'s BenchmarkRedis
// compares the single rules with redis_rate; this one is short, for the
// cost of a composite:
//
//	cd redisstore && go test -run '^$' -bench BenchmarkAllowN -benchtime 10000x -count 3 .
func BenchmarkAllowN(b *testing.B) {
	srv := redistest.Start(b)
	client := newClient(b, srv)
	ctx := context.Background()
	const keys = 1000
	names := make([]string, keys)
	for i := range names {
		names[i] = "user:" + strconv.Itoa(i)
	}
	for _, bc := range []struct{ name, limits string }{
		{"rules=1", "token-bucket,1000000,1h"},
		{"rules=2", "token-bucket,1000000,1h + fixed-window,50000,24h"},
	} {
		limits, err := admit.ParseLimits(bc.limits)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			l, err := redisstore.NewLimits(client, limits, freshPrefix("bench"))
			if err != nil {
				b.Fatal(err)
			}
			for _, k := range names[:10] { // load the script before the clock starts
				if _, err := l.Allow(ctx, k); err != nil {
					b.Fatal(err)
				}
			}
			if err := client.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			admitted := 0
			for i := range b.N {
				d, err := l.AllowN(ctx, names[i%keys], 1)
				if err != nil {
					b.Fatal(err)
				}
				if d.Allowed {
					admitted++
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(admitted)/float64(b.N), "admitted/op")
			reportRedisTime(b, client)
		})
	}
}

// reportRedisTime reports the time the server spent in EVALSHA since its
// statistics were reset, per operation, as redis-ns/op.
func reportRedisTime(b *testing.B, client *redis.Client) {
	info, err := client.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:"); ok {
			_, usec, _ := strings.Cut(rest, ",usec=")
			usec, _, _ = strings.Cut(usec, ",")
			v, err := strconv.ParseFloat(usec, 64)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(v*1000/float64(b.N), "redis-ns/op")
		}
	}
}

// BenchmarkCarry measures what converting a key costs against a plain
// decision: serial, server time, 1,000 keys, every call admitted, both
// limiters WithCarry(policy.CarryConsumed). convert=no is one limiter on
// the keys it wrote itself; convert=yes two limiters of different limits
// that take turns over the keys, a pass each, so that every call converts
// a key the other wrote last (rules=1: a token bucket's string to a token
// bucket's; rules=2: a composite's hash of a token bucket and a fixed
// window to another's). redis-ns/op is as in BenchmarkAllowN.
//
//	cd redisstore && go test -run '^$' -bench BenchmarkCarry -benchtime 3000x -count 3 .
func BenchmarkCarry(b *testing.B) {
	srv := redistest.Start(b)
	client := newClient(b, srv)
	ctx := context.Background()
	const keys = 1000
	names := make([]string, keys)
	for i := range names {
		names[i] = "user:" + strconv.Itoa(i)
	}
	for _, bc := range []struct{ name, limits, other string }{
		{"rules=1", "token-bucket,1000000,1h", "token-bucket,900000,1h"},
		{"rules=2", "token-bucket,1000000,1h + fixed-window,50000,24h", "token-bucket,900000,1h + fixed-window,50000,24h"},
	} {
		for _, convert := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/convert=%s", bc.name, map[bool]string{false: "no", true: "yes"}[convert]), func(b *testing.B) {
				prefix := freshPrefix("bench-carry")
				var lims []*redisstore.Limiter
				for _, text := range []string{bc.limits, bc.other} {
					limits, err := admit.ParseLimits(text)
					if err != nil {
						b.Fatal(err)
					}
					l, err := redisstore.NewLimits(client, limits, prefix, redisstore.WithCarry(policy.CarryConsumed))
					if err != nil {
						b.Fatal(err)
					}
					lims = append(lims, l)
				}
				if !convert {
					lims = lims[:1]
				}
				// Every key written by the limiter that does not take the
				// first pass, the scripts loaded, before the clock starts.
				first := lims[len(lims)-1]
				for _, k := range names {
					if _, err := first.Allow(ctx, k); err != nil {
						b.Fatal(err)
					}
				}
				if err := client.ConfigResetStat(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				admitted := 0
				for i := range b.N {
					d, err := lims[i/keys%len(lims)].AllowN(ctx, names[i%keys], 1)
					if err != nil {
						b.Fatal(err)
					}
					if d.Allowed {
						admitted++
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(admitted)/float64(b.N), "admitted/op")
				reportRedisTime(b, client)
			})
		}
	}
}
