package redisstore

import (
	"embed"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/admit-go/admit"
)

// The decision scripts are put together from the files of lua/: a header
// that defines the limiter's constants, the shared prelude (time, exact
// integer helpers, the tag's error), the conversion of a key written under
// other rules (carry.lua, kernel.Convert's translation, which WithCarry
// enables), the algorithms, each a Lua function that translates its kernel
// in internal/kernel and decides on a state it is given, and last the part
// that reads the key, calls them and writes. A single rule's script holds
// its one algorithm, and reads and writes a string (single.lua) or, for a
// sliding log, a list (list.lua); the composite script holds all four and
// decides every rule of a Limits on one hash (composite.lua), so that each
// algorithm is written once. A token bucket's rule script is the exception
// to calling the function: it runs the function's decision block in place
// ([tokenbucketInPlace]), with no closure and no tables per decision, and
// replies with the bucket's debt alone, from which the client derives the
// Decision with the kernel (see [Limiter.fromDebt]). The conformance suite
// holds the scripts to the kernels' Decisions.
//
// Two kinds of header. A rule whose state is a string (token bucket, fixed
// window, sliding counter) gets a script of its own ([ruleScript]), with
// its constants written in its text: Lua compiles them once, as constants,
// and a call sends only the key, the reading and n, where sending them
// costs Redis a string per argument per call, and converting the numbers.
// Every other script ([mustScript]: the sliding log's, the composite's) has
// one text for all limiters, and reads the constants and rules from its
// arguments. The helpers (helpers.lua) follow the prelude in every script
// but a token bucket's that converts nothing, which calls none of them and
// so does not create their closures at every decision. docs/redis.md
// ("Performance") gives what each of these saves; running the token
// bucket's decision in place, and reading numbers by arithmetic rather
// than tonumber (prelude.lua, single.lua), brought a decision from about
// 70,000 to about 63,000 instructions in Redis 7.0 (valgrind's counts), and
// the reply of one integer to about 55,000, where redis_rate's script takes
// about 74,000.
//
//go:embed lua/*.lua
var luaFiles embed.FS

var (
	slidingLogScript = mustScript("slidinglog.lua", "list.lua")
	compositeScript  = mustScript("tokenbucket.lua", "fixedwindow.lua", "slidinglog.lua", "slidingcounter.lua", "composite.lua")
)

// argsHeader is the header of a script whose text every limiter shares: it
// reads the limiter's constants from ARGV[3] to ARGV[6] (see prelude.lua).
const argsHeader = "local perMs, slackMs, tag, strategy = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], ARGV[6]\n"

// noCarry stands for carry.lua in the script of a limiter that converts
// nothing: carry then only raises the error the key met, as carry.lua's
// does (error itself, so that no closure is created for it).
const noCarry = "local carry = error\n"

// mustScript returns the script, shared by every limiter, of argsHeader,
// the prelude, the helpers and the conversion followed by parts, each a
// file of lua/ or, if it ends in a newline, Lua text.
func mustScript(parts ...string) *redis.Script {
	return redis.NewScript(assemble(append([]string{argsHeader, "prelude.lua", "helpers.lua", "carry.lua"}, parts...)))
}

// ruleScripts holds the scripts ruleScript built, by header and algorithm:
// limiters of equal rules, units and conversion share one. It holds one
// script per such rule the process has built a limiter for, never more.
var ruleScripts sync.Map // string → *redis.Script

// ruleScript returns the script of a limiter of one rule r, whose state is
// a string (not a sliding log), with its constants in its text: units per
// millisecond, TTL slack in milliseconds, the tag, the conversion strategy
// (empty for none, which leaves carry.lua out), the rule's limit and window
// in units, and the pattern and formats that read and write its state (see
// single.lua). The tag, built by newLimiter, holds only letters, digits,
// '/' and ':', none of them special in a Lua string or pattern, or in a
// format.
func ruleScript(r admit.Rule, perMs, slackMs int64, tag, strategy string, window int64) *redis.Script {
	format := "%d %d"
	if r.Algorithm == admit.SlidingCounter {
		format = "%d %d %d" // window index, previous and current counts
	}
	header := fmt.Sprintf("local perMs, slackMs, tag, strategy = %d, %d, '%s', '%s'\n"+
		"local limit, window = %d, %d\n"+
		"local statePattern, stateFormat, stateZero = '^%s (%%S+) (%%S+) ?(%%S*)$', '%s %s', '%s %%d 0'\n",
		perMs, slackMs, tag, strategy, r.Limit, window, tag, tag, format, tag)
	if s, ok := ruleScripts.Load(header); ok {
		return s.(*redis.Script)
	}
	var alg string
	switch r.Algorithm {
	case admit.TokenBucket:
		alg = "tokenbucket"
	case admit.FixedWindow:
		alg = "fixedwindow"
	case admit.SlidingCounter:
		alg = "slidingcounter"
	default:
		panic(fmt.Sprintf("redisstore: ruleScript(%v): not a rule whose state is a string", r.Algorithm)) // newLimiter never asks
	}
	parts := []string{header, "prelude.lua", "helpers.lua", "carry.lua", "single.lua", tokenbucketInPlace, "tokenbucket_reply.lua"}
	if r.Algorithm != admit.TokenBucket {
		parts = slices.Insert(parts, 4, alg+".lua")
		parts[6], parts[7] = fmt.Sprintf(callDecision, alg), "single_write.lua"
	}
	if strategy == "" {
		parts[3] = noCarry
		if r.Algorithm == admit.TokenBucket {
			parts = slices.Delete(parts, 2, 3) // it calls no helper
		}
	}
	s, _ := ruleScripts.LoadOrStore(header, redis.NewScript(assemble(parts)))
	return s.(*redis.Script)
}

// tokenbucketInPlace is a token bucket's decision in a script of its one
// rule (single.lua): the block of lua/tokenbucket.lua between its
// "decision" marks, run in place rather than as a function, so that a
// decision creates no closure, and no table for the state read or the
// state written (see tokenbucket.lua). The state is a, b as single.lua
// reads it, nil for a fresh key; tokenbucket_reply.lua then writes and
// replies with the debt the block leaves.
var tokenbucketInPlace = func() string {
	src, err := luaFiles.ReadFile("lua/tokenbucket.lua")
	if err != nil {
		panic(fmt.Sprintf("redisstore: embedded script tokenbucket.lua: %v", err)) // a build defect, caught by every test
	}
	_, block, ok := strings.Cut(string(src), "\n  -- decision {\n")
	if ok {
		block, _, ok = strings.Cut(block, "\n  -- } decision\n")
	}
	if !ok {
		panic("redisstore: lua/tokenbucket.lua lacks its decision marks") // a build defect, caught by every test
	}
	return "local tat, frac = a, b or 0\n" +
		"local capacity, debt, units, charged\n" + block + "\n"
}()

// callDecision is the decision, in a script of its one rule (single.lua),
// of an algorithm other than the token bucket: a call of its function
// (%s) on the state as single.lua reads it (a, b, c; nil for a fresh key),
// which returns the state to write as a table, unpacked into wa, wb, wc.
const callDecision = `local state
if a then
  state = {a, b, c}
end
local allowed, remaining, retry, reset, write = %s(limit, window, n, state)
local wa, wb, wc
if write then
  wa, wb, wc = write[1], write[2], write[3]
end
`

// assemble returns the text of parts, each a file of lua/ or, if it ends
// in a newline, Lua text.
func assemble(parts []string) string {
	var b strings.Builder
	for _, p := range parts {
		if strings.HasSuffix(p, "\n") {
			b.WriteString(p)
			continue
		}
		src, err := luaFiles.ReadFile("lua/" + p)
		if err != nil {
			panic(fmt.Sprintf("redisstore: embedded script %s: %v", p, err)) // a build defect, caught by every test
		}
		if p == "carry.lua" {
			// The header defines strategy for every script: a line of
			// carry.lua reading it from ARGV[6] would hide it, with nil in
			// a script that takes no such argument.
			src = []byte(strings.Replace(string(src), "local strategy = ARGV[6]\n", "", 1))
			if strings.Contains(string(src), "= ARGV[") {
				panic("redisstore: lua/carry.lua reads ARGV: it must take its strategy from the header") // a build defect, caught by every test
			}
		}
		b.Write(src)
	}
	return b.String()
}
