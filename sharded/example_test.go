package sharded_test

import (
	"fmt"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/sharded"
)

// A store bounded to two keys: a third key is denied while the first two are
// busy, and takes the place of one of them once it is idle.
func ExampleNew() {
	fake := clock.NewFake() // tests own time; production code leaves WithClock out
	rule, _ := admit.ParseRule("token-bucket,2,10s")
	lim, err := sharded.New(rule, admit.WithMaxKeys(2), admit.WithShards(4), admit.WithClock(fake))
	if err != nil {
		panic(err)
	}

	fmt.Println(lim.Allow("alice").Allowed, lim.Allow("bob").Allowed)
	d := lim.Allow("carol")
	fmt.Println(d.Allowed, d.RetryAfter, lim.Len())

	fake.Advance(d.RetryAfter) // a token back: alice's and bob's buckets are full, idle
	fmt.Println(lim.Allow("carol").Allowed, lim.Len() <= 2)
	// Output:
	// true true
	// false 5.1s 2
	// true true
}
