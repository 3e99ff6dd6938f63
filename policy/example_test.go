package policy_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/policy"
)

func ExampleParse() {
	book, err := policy.Parse(strings.NewReader(`
# the design notes' demo config
default    = token-bucket,5,10
api./login = fixed-window,2,10
user.vip-1 = token-bucket,8,10
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(book.RuleFor("alice", "/orders")) // the default
	fmt.Println(book.RuleFor("alice", "/login"))  // the API rule
	fmt.Println(book.RuleFor("vip-1", "/login"))  // the user rule wins

	_, err = policy.Parse(strings.NewReader("default = token-bucket,5,10\napi./login = fixed-window,0,10\n"))
	fmt.Println(err)
	// Output:
	// token-bucket,5,10s
	// fixed-window,2,10s
	// token-bucket,8,10s
	// line 2: api./login: admit: invalid rule: limit 0 must be at least 1 (a rule that admits nothing is not a rate limit)
}

func ExampleParseJSON() {
	book, err := policy.ParseJSON(strings.NewReader(`{
  "default": "token-bucket,5,10s",
  "apis": {
    "/login": {"algorithm": "SlidingWindowLog", "algoConfig": {"maxRequests": 5, "windowMs": 1000}}
  },
  "users": {
    "vip-1": {"algorithm": "TokenBucket", "algoConfig": {"capacity": 10, "refillRatePerSecond": 1}}
  }
}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(book)

	_, err = policy.ParseJSON(strings.NewReader(`{"default": "token-bucket,5,10s", "Users": {}}`))
	fmt.Println(err)
	// Output:
	// default = token-bucket,5,10s
	// api./login = sliding-log,5,1s
	// user.vip-1 = token-bucket,10,10s
	// line 1: unknown field "Users"; field names are case-sensitive: did you mean "users"?
}

func ExampleService() {
	book, err := policy.Parse(strings.NewReader("default = token-bucket,5,10\napi./login = fixed-window,2,10\n"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fake := clock.NewFake() // tests move time; production leaves WithClock out
	svc, err := policy.NewService(book, admit.WithClock(fake))
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 3 {
		d := svc.Check("alice", "/login")
		fmt.Println(d.Allowed, d.Remaining, d.RetryAfter)
	}
	fake.Advance(10 * time.Second)
	fmt.Println(svc.Check("alice", "/login").Allowed)
	// Output:
	// true 1 0s
	// true 0 0s
	// false 0 10s
	// true
}

func ExampleService_Reload() {
	svc, err := policy.NewService(mustParse("default = token-bucket,5,10\n"), admit.WithClock(clock.NewFake()))
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 5 {
		svc.Check("alice", "/orders")
	}
	// The default rule is unchanged, so alice's spent bucket stays spent; the
	// new /login rule starts fresh.
	if err := svc.Reload(mustParse("default = token-bucket,5,10\napi./login = fixed-window,2,10\n")); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(svc.Check("alice", "/orders").Allowed, svc.Check("alice", "/login").Allowed)
	// Output: false true
}

// A composite, 2 per second and 3 per minute, and the rule that bound each
// decision.
func ExampleService_CheckNWhich() {
	book := mustParse("default = token-bucket,2,1s + fixed-window,3,1m\n")
	fake := clock.NewFake()
	svc, err := policy.NewService(book, admit.WithClock(fake))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, at := range []time.Duration{0, 0, 0, time.Second, time.Second} {
		fake.Set(at)
		d, limits, which := svc.CheckNWhich("alice", "/orders", 1)
		fmt.Println(at, d.Allowed, d.Remaining, d.RetryAfter, limits.At(which))
	}
	// Output:
	// 0s true 1 0s token-bucket,2,1s
	// 0s true 0 0s token-bucket,2,1s
	// 0s false 0 500ms token-bucket,2,1s
	// 1s true 0 0s fixed-window,3,1m
	// 1s false 0 59s fixed-window,3,1m
}

func mustParse(text string) *policy.Book {
	b, err := policy.Parse(strings.NewReader(text))
	if err != nil {
		panic(err)
	}
	return b
}
