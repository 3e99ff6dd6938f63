package policy_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
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
