package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/redistest"
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
			info, err := client.Info(ctx, "commandstats").Result()
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
		})
	}
}
