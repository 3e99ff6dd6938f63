package locked_test

import (
	"fmt"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/locked"
)

// A sliding log on one key: at most 2 in any minute, exactly. An admission
// counts until exactly one window after it.
func ExampleNewLimiter() {
	fake := clock.NewFake() // tests own time; production code leaves WithClock out
	rule, _ := admit.ParseRule("sliding-log,2,1m")
	lim, err := locked.NewLimiter(rule, admit.WithClock(fake))
	if err != nil {
		panic(err)
	}
	fmt.Println(lim.Allow().Allowed) // at 0s
	fake.Advance(30 * time.Second)
	fmt.Println(lim.Allow().Allowed) // at 30s
	d := lim.Allow()
	fmt.Println(d.Allowed, d.RetryAfter) // the first expires at 60s
	fake.Advance(d.RetryAfter)
	fmt.Println(lim.Allow().Allowed)
	// Output:
	// true
	// true
	// false 30s
	// true
}
