package redisstore_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/httplimit"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/policy"
	"github.com/admit-go/admit/redisstore"
)

// Every process that uses the same server, prefix and rule shares the budget.
func ExampleNew() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	rule, err := admit.ParseRule("token-bucket,100,1m")
	if err != nil {
		log.Fatal(err)
	}
	lim, err := redisstore.New(client, rule, redisstore.WithPrefix("api:orders:"))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	d, err := lim.Allow(ctx, "user-42")
	switch {
	case err != nil:
		fmt.Println("Redis did not answer:", err) // the caller decides
	case !d.Allowed:
		fmt.Println("retry after", d.RetryAfter)
	}
}

// Keyed makes a Redis limiter an admit.KeyedLimiter, for middleware, with an
// explicit policy for when Redis is down: here, each process falls back to
// its share of the rule.
func ExampleNewKeyed() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 100, Window: time.Minute}
	lim, err := redisstore.New(client, rule)
	if err != nil {
		log.Fatal(err)
	}
	const processes = 4
	local, err := locked.New(admit.Rule{Algorithm: rule.Algorithm, Limit: rule.Limit / processes, Window: rule.Window})
	if err != nil {
		log.Fatal(err)
	}
	keyed, err := redisstore.NewKeyed(lim, redisstore.Policy{
		Mode:    redisstore.FailLocal,
		Local:   local,
		Timeout: 5 * time.Millisecond,
		OnError: func(key string, err error) { log.Printf("rate limit of %s decided locally: %v", key, err) },
	})
	if err != nil {
		log.Fatal(err)
	}
	mw, err := httplimit.New(keyed)
	if err != nil {
		log.Fatal(err)
	}
	http.Handle("/orders", mw.Handler(http.NotFoundHandler()))
}

// One request that must pass a per-user and a per-API limit asks Redis once.
func ExampleAllowBatch() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	perUser, err := redisstore.New(client, admit.Rule{Algorithm: admit.SlidingCounter, Limit: 10, Window: time.Second}, redisstore.WithPrefix("user:"))
	if err != nil {
		log.Fatal(err)
	}
	perAPI, err := redisstore.New(client, admit.Rule{Algorithm: admit.FixedWindow, Limit: 1000, Window: time.Second}, redisstore.WithPrefix("api:"))
	if err != nil {
		log.Fatal(err)
	}
	calls := []redisstore.Call{
		{Limiter: perUser, Key: "user-42", N: 1},
		{Limiter: perAPI, Key: "/orders", N: 1},
	}
	if err := redisstore.AllowBatch(context.Background(), calls); err != nil {
		log.Fatal(err)
	}
	for _, c := range calls {
		if c.Err != nil || !c.Decision.Allowed {
			fmt.Println("refused by", c.Limiter.Rule())
		}
	}
}

// A policy.Service whose budgets live in Redis: every process built with the
// same book, server and prefix shares each (user, API) budget, and each API
// has keys of its own.
func ExampleNewService() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	book, err := policy.Parse(strings.NewReader(`
default    = token-bucket,100,1m
api./login = fixed-window,5,1m
api./pay   = fixed-window,5,1m
user.vip-1 = token-bucket,1000,1m + fixed-window,20000,24h
`))
	if err != nil {
		log.Fatal(err)
	}
	svc, err := redisstore.NewService(client, book,
		redisstore.Policy{Mode: redisstore.FailClosed, Timeout: 5 * time.Millisecond},
		redisstore.WithPrefix("rl:"))
	if err != nil {
		log.Fatal(err)
	}
	// The pair (user-42, /login) is the Redis key rl:/login:{user-42}; /pay,
	// with equal rules, keeps its own budget at rl:/pay:{user-42}.
	if d := svc.Check("user-42", "/login"); !d.Allowed {
		fmt.Println("retry after", d.RetryAfter)
	}
	// A changed book: each pair converts what it spent on its next Check.
	raised, err := policy.Parse(strings.NewReader("default = token-bucket,200,1m\n"))
	if err != nil {
		log.Fatal(err)
	}
	if err := svc.Reload(raised); err != nil {
		log.Fatal(err)
	}
}
