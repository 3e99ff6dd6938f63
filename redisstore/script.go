package redisstore

import (
	"embed"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/admit-go/admit"
)

// The decision scripts are put together from the files of lua/: the shared
// prelude (time, exact integer helpers, the tag's error), the conversion of
// a key written under other rules (carry.lua, kernel.Convert's
// translation, which WithCarry enables), the algorithms, each a Lua function
// that translates its kernel in internal/kernel and decides on a state it
// is given, and last the part that reads the key, calls them and writes. A single rule's script holds its one algorithm, and reads and
// writes a string (single.lua) or, for a sliding log, a list (list.lua);
// the composite script holds all four and decides every rule of a Limits on
// one hash (composite.lua), so that each algorithm is written once. The
// conformance suite holds the scripts to the kernels' Decisions.
//
//go:embed lua/*.lua
var luaFiles embed.FS

var (
	scripts = map[admit.Algorithm]*redis.Script{
		admit.TokenBucket:    mustScript("tokenbucket.lua", "local decide = tokenbucket\n", "single.lua"),
		admit.FixedWindow:    mustScript("fixedwindow.lua", "local decide = fixedwindow\n", "single.lua"),
		admit.SlidingLog:     mustScript("slidinglog.lua", "list.lua"),
		admit.SlidingCounter: mustScript("slidingcounter.lua", "local decide = slidingcounter\n", "single.lua"),
	}
	compositeScript = mustScript("tokenbucket.lua", "fixedwindow.lua", "slidinglog.lua", "slidingcounter.lua", "composite.lua")
)

// mustScript returns the script of the prelude and the conversion followed
// by parts, each a file of lua/ or, if it ends in a newline, a line of Lua.
func mustScript(parts ...string) *redis.Script {
	var b strings.Builder
	for _, p := range append([]string{"prelude.lua", "carry.lua"}, parts...) {
		if strings.HasSuffix(p, "\n") {
			b.WriteString(p)
			continue
		}
		src, err := luaFiles.ReadFile("lua/" + p)
		if err != nil {
			panic(fmt.Sprintf("redisstore: embedded script %s: %v", p, err)) // a build defect, caught by every test
		}
		b.Write(src)
	}
	return redis.NewScript(b.String())
}
