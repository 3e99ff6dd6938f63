package clock_test

import (
	"fmt"
	"time"

	"github.com/admit-go/admit/clock"
)

// A test moves a Fake between calls instead of sleeping: time passes only
// when the test says so.
func ExampleFake() {
	fake := clock.NewFake()
	fmt.Println(fake.Now())
	fake.Advance(1500 * time.Millisecond)
	fmt.Println(fake.Now())
	fake.Set(time.Hour)
	fmt.Println(fake.Now())
	// Output:
	// 0s
	// 1.5s
	// 1h0m0s
}
