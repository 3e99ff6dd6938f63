package redisstore

import (
	"embed"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/admit-go/admit"
)

// The decision scripts: one per algorithm, each the shared prelude (time,
// exact integer helpers, state loading) followed by the algorithm's body.
// Each is a Lua translation of its kernel in internal/kernel, and the
// conformance suite holds the two to the same Decisions.
//
//go:embed lua/*.lua
var luaFiles embed.FS

var scripts = map[admit.Algorithm]*redis.Script{
	admit.TokenBucket:    mustScript("tokenbucket.lua"),
	admit.FixedWindow:    mustScript("fixedwindow.lua"),
	admit.SlidingLog:     mustScript("slidinglog.lua"),
	admit.SlidingCounter: mustScript("slidingcounter.lua"),
}

func mustScript(body string) *redis.Script {
	prelude, err := luaFiles.ReadFile("lua/prelude.lua")
	if err != nil {
		panic(fmt.Sprintf("redisstore: embedded prelude: %v", err)) // a build defect, caught by every test
	}
	src, err := luaFiles.ReadFile("lua/" + body)
	if err != nil {
		panic(fmt.Sprintf("redisstore: embedded script %s: %v", body, err))
	}
	return redis.NewScript(string(prelude) + string(src))
}
