package atomic_test

import (
	"fmt"
	"time"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/clock"
)

// One key: NewLimiter, lock-free. Here 3 per second, a rule whose token is
// not whole nanoseconds (333,333,333.3ns), exact all the same.
func ExampleNewLimiter() {
	fake := clock.NewFake() // tests own time; production code leaves WithClock out
	rule, _ := admit.ParseRule("token-bucket,3,1s")
	lim, err := admitatomic.NewLimiter(rule, admit.WithClock(fake))
	if err != nil {
		panic(err)
	}
	d := lim.AllowN(3)
	fmt.Println(d.Allowed, d.Remaining)
	d = lim.Allow()
	fmt.Println(d.Allowed, d.RetryAfter)
	fake.Advance(d.RetryAfter)
	fmt.Println(lim.Allow().Allowed)
	fake.Advance(time.Second)
	fmt.Println(lim.AllowN(0).Remaining) // a free probe
	// Output:
	// true 0
	// false 333.333334ms
	// true
	// 3
}

// The sliding log fits no single compare-and-swap, so New refuses it; the
// error says where to go.
func ExampleNew_slidingLog() {
	rule, _ := admit.ParseRule("sliding-log,5,1m")
	_, err := admitatomic.New(rule)
	fmt.Println(err)
	// Output:
	// admit: unsupported: atomic.New has no sliding log: its ring of 5 timestamps per key is more than one compare-and-swap can update; use sharded.New for many keys (or locked.NewLimiter for one) for sliding-log,5,1m
}
