package admit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/sharded"
)

// Many keys: sharded.New, one budget per key. A fake clock, moved between
// calls, is how tests own time; production code leaves WithClock out.
func Example() {
	fake := clock.NewFake()
	rule, err := admit.ParseRule("token-bucket,2,10s") // 2 per 10 seconds, bursts of 2
	if err != nil {
		panic(err)
	}
	lim, err := sharded.New(rule, admit.WithClock(fake))
	if err != nil {
		panic(err)
	}
	for range 3 {
		d := lim.Allow("alice")
		fmt.Println("alice", d.Allowed, d.Remaining, d.RetryAfter)
	}
	fmt.Println("bob", lim.Allow("bob").Allowed) // a budget of his own
	fake.Advance(5 * time.Second)                // one token back
	fmt.Println("alice after 5s", lim.Allow("alice").Allowed)
	// Output:
	// alice true 1 0s
	// alice true 0 0s
	// alice false 0 5s
	// bob true
	// alice after 5s true
}

// One key: atomic.NewLimiter; Wait blocks until the limiter admits (here at
// once: the bucket starts full) or the context ends.
func ExampleWait() {
	rule, _ := admit.ParseRule("token-bucket,10,1s")
	lim, err := admitatomic.NewLimiter(rule)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for i := range 3 {
		if err := admit.Wait(ctx, lim); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("request", i+1, "may go")
	}
	// A request that can never pass is refused at once, consuming nothing.
	fmt.Println(admit.WaitN(ctx, lim, 11))
	// Output:
	// request 1 may go
	// request 2 may go
	// request 3 may go
	// admit: the request can never be admitted: n=11 is negative or above the rule's limit
}

// ParseRule reads the text form of a rule, strictly: an error says what is
// wrong and what would be right.
func ExampleParseRule() {
	rule, err := admit.ParseRule("sliding-log,5,1m")
	fmt.Println(rule, err)
	_, err = admit.ParseRule("token-bucket,5")
	fmt.Println(err)
	// Output:
	// sliding-log,5,1m <nil>
	// admit: invalid rule: "token-bucket,5" has 2 comma-separated fields; want 3: algorithm,limit,window (for example token-bucket,5,10s)
}
