package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/locked"
)

// demo replays the walkthrough of the design notes with the locked variant and
// a fake clock.
func demo(w io.Writer) error {
	fake := clock.NewFake()
	newKeyed := func(text string) (admit.KeyedLimiter, error) {
		rule, err := admit.ParseRule(text)
		if err != nil {
			return nil, err
		}
		return locked.New(rule, admit.WithClock(fake))
	}
	// The rules of the notes' configuration: a default, a stricter rule for
	// /login, a larger one for the user vip-1. Each limiter keeps one budget per
	// key, and the key is the (user, API) pair.
	def, err := newKeyed("token-bucket,5,10")
	if err != nil {
		return err
	}
	login, err := newKeyed("fixed-window,2,10")
	if err != nil {
		return err
	}
	vip, err := newKeyed("token-bucket,8,10")
	if err != nil {
		return err
	}
	check := func(lim admit.KeyedLimiter, user, api, label string) {
		d := lim.Allow(user + "|" + api)
		line := fmt.Sprintf("t=%5dms  %-24s", fake.Now().Milliseconds(), user+" "+api+" "+label)
		if d.Allowed {
			fmt.Fprintf(w, "%s ALLOWED  remaining=%d\n", line, d.Remaining)
		} else {
			fmt.Fprintf(w, "%s REJECTED retryAfter=%dms\n", line, d.RetryAfter.Milliseconds())
		}
	}

	fmt.Fprintln(w, "Part one: alice calls /orders under the default rule (token-bucket,5,10s).")
	for i := 1; i <= 6; i++ {
		check(def, "alice", "/orders", fmt.Sprintf("#%d", i))
	}
	fake.Advance(2 * time.Second)
	check(def, "alice", "/orders", "after 2s")

	fmt.Fprintln(w, "\nPart two: /login has its own rule (fixed-window,2,10s) and its own counter.")
	for i := 1; i <= 3; i++ {
		check(login, "alice", "/login", fmt.Sprintf("#%d", i))
	}

	fmt.Fprintln(w, "\nPart three: bob has his own budget; vip-1 has a user rule (token-bucket,8,10s).")
	check(def, "bob", "/orders", "")
	for i := 1; i <= 6; i++ {
		check(vip, "vip-1", "/orders", fmt.Sprintf("#%d", i))
	}

	fmt.Fprintln(w, "\nPart four: 3 per 10s for every algorithm; 3 requests at 9.0s, then 3 at 10.0s.")
	for _, alg := range []admit.Algorithm{admit.TokenBucket, admit.FixedWindow, admit.SlidingLog, admit.SlidingCounter} {
		c := clock.NewFake()
		lim, err := locked.NewLimiter(admit.Rule{Algorithm: alg, Limit: 3, Window: 10 * time.Second}, admit.WithClock(c))
		if err != nil {
			return err
		}
		var got [2]int
		for i, at := range []time.Duration{9 * time.Second, 10 * time.Second} {
			c.Set(at)
			for range 3 {
				if lim.Allow().Allowed {
					got[i]++
				}
			}
		}
		fmt.Fprintf(w, "%-16s allowed %d at 9.0s, %d at 10.0s\n", alg, got[0], got[1])
	}

	fmt.Fprintln(w, "\nPart five: 8 goroutines make 50 calls each against a limit of 100, clock frozen.")
	lim, err := locked.NewLimiter(admit.Rule{Algorithm: admit.TokenBucket, Limit: 100, Window: 10 * time.Second}, admit.WithClock(clock.NewFake()))
	if err != nil {
		return err
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		allowed int
		start   = make(chan struct{})
	)
	for range 8 {
		wg.Go(func() {
			<-start
			n := 0
			for range 50 {
				if lim.Allow().Allowed {
					n++
				}
			}
			mu.Lock()
			allowed += n
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	fmt.Fprintf(w, "400 calls made, allowed = %d\n", allowed)
	return nil
}
