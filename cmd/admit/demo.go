package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/policy"
	"github.com/admit-go/admit/sharded"
)

// seedRules is the configuration of the design notes' walkthrough.
const seedRules = `default    = token-bucket,5,10
api./login = fixed-window,2,10
user.vip-1 = token-bucket,8,10
`

func runDemo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: admit demo\n\nReplay the design notes' walkthrough with a fake clock.\n")
	}
	if status, stop := parseFlags(fs, args); stop {
		return status
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "admit demo: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if err := demo(stdout); err != nil {
		fmt.Fprintln(stderr, "admit demo:", err)
		return 1
	}
	return 0
}

// demo replays the walkthrough of the design notes ("Walk Through One Full
// Example", parts one to five) through policy.Service, with fake clocks, so
// that it prints the same thing on every run.
func demo(w io.Writer) error {
	book, err := policy.Parse(strings.NewReader(seedRules))
	if err != nil {
		return err
	}
	fake := clock.NewFake()
	svc, err := policy.NewService(book, admit.WithClock(fake))
	if err != nil {
		return err
	}
	check := func(user, api, label string) {
		d := svc.Check(user, api)
		line := fmt.Sprintf("t=%5dms  %-24s", fake.Now().Milliseconds(), user+" "+api+" "+label)
		if d.Allowed {
			fmt.Fprintf(w, "%s ALLOWED  remaining=%d\n", line, d.Remaining)
		} else {
			fmt.Fprintf(w, "%s REJECTED retryAfter=%dms\n", line, d.RetryAfter.Milliseconds())
		}
	}

	fmt.Fprintln(w, "Rules (policy.Parse of the design notes' config):")
	for _, l := range strings.Split(strings.TrimSpace(seedRules), "\n") {
		fmt.Fprintln(w, "  "+l)
	}

	fmt.Fprintf(w, "\nPart one: alice calls /orders under the default rule (%v).\n", book.RuleFor("alice", "/orders"))
	for i := 1; i <= 6; i++ {
		check("alice", "/orders", fmt.Sprintf("#%d", i))
	}
	fake.Advance(2 * time.Second)
	check("alice", "/orders", "after 2s")

	fmt.Fprintf(w, "\nPart two: /login has its own rule (%v) and its own counter.\n", book.RuleFor("alice", "/login"))
	for i := 1; i <= 3; i++ {
		check("alice", "/login", fmt.Sprintf("#%d", i))
	}

	fmt.Fprintf(w, "\nPart three: bob has his own budget; vip-1 has a user rule (%v).\n", book.RuleFor("vip-1", "/orders"))
	check("bob", "/orders", "")
	for i := 1; i <= 6; i++ {
		check("vip-1", "/orders", fmt.Sprintf("#%d", i))
	}

	fmt.Fprintln(w, "\nPart four: 3 per 10s for every algorithm; 3 requests at 9.0s, then 3 at 10.0s.")
	for _, alg := range []struct {
		name string // as the design notes print it
		alg  admit.Algorithm
	}{
		{"TOKEN_BUCKET", admit.TokenBucket},
		{"FIXED_WINDOW", admit.FixedWindow},
		{"SLIDING_WINDOW", admit.SlidingLog},
		{"SLIDING_COUNTER", admit.SlidingCounter},
	} {
		c := clock.NewFake()
		svc, err := serviceFor(admit.Rule{Algorithm: alg.alg, Limit: 3, Window: 10 * time.Second}, c)
		if err != nil {
			return err
		}
		var got [2]int
		for i, at := range []time.Duration{9 * time.Second, 10 * time.Second} {
			c.Set(at)
			for range 3 {
				if svc.Check("alice", "/orders").Allowed {
					got[i]++
				}
			}
		}
		fmt.Fprintf(w, "%-15s allowed %d at 9.0s, %d at 10.0s\n", alg.name, got[0], got[1])
	}

	fmt.Fprintln(w, "\nPart five: 8 goroutines make 50 calls each against a limit of 100, clock frozen.")
	svc, err = serviceFor(admit.Rule{Algorithm: admit.TokenBucket, Limit: 100, Window: 10 * time.Second}, clock.NewFake())
	if err != nil {
		return err
	}
	var (
		wg      sync.WaitGroup
		allowed atomic.Int64
		start   = make(chan struct{})
	)
	for range 8 {
		wg.Go(func() {
			<-start
			for range 50 {
				if svc.Check("alice", "/orders").Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	fmt.Fprintf(w, "400 calls made, allowed = %d\n", allowed.Load())
	return composite(w)
}

// composite is part six: several limits on one key, decided at once.
func composite(w io.Writer) error {
	limits, err := admit.ParseLimits("token-bucket,10,1s + fixed-window,30,1m")
	if err != nil {
		return err
	}
	c := clock.NewFake()
	store, err := sharded.NewLimits(limits, admit.WithClock(c))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nPart six: 10 per second and 30 per minute on one key (%v).\n", limits)
	fmt.Fprintln(w, "12 calls at the start of each second; a denial names the limit that bound it.")
	for sec := range 4 {
		c.Set(time.Duration(sec) * time.Second)
		allowed := 0
		var denied admit.Decision
		which := -1
		for range 12 {
			d, i := store.AllowNWhich("alice", 1)
			if d.Allowed {
				allowed++
			} else if which < 0 {
				denied, which = d, i
			}
		}
		line := fmt.Sprintf("t=%ds  allowed %2d", sec, allowed)
		if which >= 0 {
			line += fmt.Sprintf(", then REJECTED by %v, retryAfter=%v", limits.At(which), denied.RetryAfter)
		}
		fmt.Fprintln(w, line)
	}
	return raise(w)
}

// raise is part seven: a limit raised by a Reload, without a fresh burst.
func raise(w io.Writer) error {
	fmt.Fprintln(w, "\nPart seven: alice spends 7 of fixed-window,10,1m; then the limit is raised to 20.")
	for _, carry := range []struct {
		c    policy.Carry
		name string
	}{
		{policy.CarryConsumed, "policy.CarryConsumed, the default"},
		{policy.CarryProportional, "policy.CarryProportional"},
		{policy.CarryNothing, "policy.CarryNothing"},
	} {
		c := clock.NewFake()
		svc, err := serviceFor(admit.Rule{Algorithm: admit.FixedWindow, Limit: 10, Window: time.Minute}, c)
		if err != nil {
			return err
		}
		for range 7 {
			svc.Check("alice", "/orders")
		}
		raised, err := policy.Parse(strings.NewReader("default = fixed-window,20,1m"))
		if err != nil {
			return err
		}
		if err := svc.Reload(raised, policy.WithCarry(carry.c)); err != nil {
			return err
		}
		d := svc.CheckN("alice", "/orders", 0) // a probe: how many are left
		fmt.Fprintf(w, "%-34s remaining=%2d of %d\n", carry.name+":", d.Remaining, d.Limit)
	}
	return nil
}

// serviceFor returns a Service whose only rule is the default rule r.
func serviceFor(r admit.Rule, c clock.Clock) (*policy.Service, error) {
	book, err := policy.Parse(strings.NewReader("default = " + r.String()))
	if err != nil {
		return nil, err
	}
	return policy.NewService(book, admit.WithClock(c))
}
