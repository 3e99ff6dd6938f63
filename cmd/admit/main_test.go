package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/demo.golden")

// TestDemoGolden pins the walkthrough's output: the clock is fake, so every run
// prints exactly the same thing, and the numbers are the design notes' numbers.
func TestDemoGolden(t *testing.T) {
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"demo"}, nil, &out, &errOut), errOut.String())
	if *update {
		require.NoError(t, os.WriteFile("testdata/demo.golden", out.Bytes(), 0o644))
	}
	want, err := os.ReadFile("testdata/demo.golden")
	require.NoError(t, err)
	assert.Equal(t, string(want), out.String())
	assert.Empty(t, errOut.String())
}

// TestDemoMatchesSeed checks the demo prints every line the design notes'
// walkthrough shows, verbatim.
func TestDemoMatchesSeed(t *testing.T) {
	var out bytes.Buffer
	require.Equal(t, 0, run([]string{"demo"}, nil, &out, io.Discard))
	lines := strings.Split(out.String(), "\n")
	for _, want := range []string{
		"t=    0ms  alice /orders #1         ALLOWED  remaining=4",
		"t=    0ms  alice /orders #2         ALLOWED  remaining=3",
		"t=    0ms  alice /orders #3         ALLOWED  remaining=2",
		"t=    0ms  alice /orders #4         ALLOWED  remaining=1",
		"t=    0ms  alice /orders #5         ALLOWED  remaining=0",
		"t=    0ms  alice /orders #6         REJECTED retryAfter=2000ms",
		"t= 2000ms  alice /orders after 2s   ALLOWED  remaining=0",
		"t= 2000ms  alice /login #1          ALLOWED  remaining=1",
		"t= 2000ms  alice /login #2          ALLOWED  remaining=0",
		"t= 2000ms  alice /login #3          REJECTED retryAfter=8000ms",
		"t= 2000ms  bob /orders              ALLOWED  remaining=4",
		"t= 2000ms  vip-1 /orders #1         ALLOWED  remaining=7",
		"t= 2000ms  vip-1 /orders #6         ALLOWED  remaining=2",
		"TOKEN_BUCKET    allowed 3 at 9.0s, 0 at 10.0s",
		"FIXED_WINDOW    allowed 3 at 9.0s, 3 at 10.0s",
		"SLIDING_WINDOW  allowed 3 at 9.0s, 0 at 10.0s",
		"SLIDING_COUNTER allowed 3 at 9.0s, 0 at 10.0s",
		"400 calls made, allowed = 100",
	} {
		assert.Contains(t, lines, want)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		nil, {"nope"}, {"demo", "extra"}, {"demo", "-x"},
		{"check"}, {"check", "rules.conf"}, {"check", "-"}, {"check", "-rules"}, {"check", "-rules", "a.conf", "-", "extra"}, {"check", "-", "-rules", "a.conf"}, {"check", "-bogus"},
	} {
		var out, errOut bytes.Buffer
		assert.Equal(t, 2, run(args, nil, &out, &errOut), "run(%q)", args)
		assert.NotEmpty(t, errOut.String(), "run(%q) explains itself", args)
		assert.Empty(t, out.String(), "run(%q) prints nothing on stdout", args)
	}
	for _, args := range [][]string{{"help"}, {"-h"}} {
		var out, errOut bytes.Buffer
		assert.Equal(t, 0, run(args, nil, &out, &errOut))
		assert.Contains(t, out.String(), "check -rules FILE")
	}
	var out, errOut bytes.Buffer
	assert.Equal(t, 0, run([]string{"check", "-h"}, nil, &out, &errOut))
	assert.Contains(t, errOut.String(), "USER API [N] [+DURATION]")
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	return p
}

const seedFile = `# the design notes' config
default    = token-bucket,5,10
api./login = fixed-window,2,10
user.vip-1 = token-bucket,8,10
`

func TestCheckValid(t *testing.T) {
	for _, tc := range []struct{ name, text string }{
		{"rules.conf", seedFile},
		{"rules.json", `{"default": "token-bucket,5,10", "apis": {"/login": {"algorithm": "FixedWindow", "algoConfig": {"maxRequests": 2, "windowMs": 10000}}}, "users": {"vip-1": "token-bucket,8,10s"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, tc.name, tc.text)
			var out, errOut bytes.Buffer
			assert.Equal(t, 0, run([]string{"check", "-rules", path}, nil, &out, &errOut))
			assert.Equal(t, path+`: 3 rules, valid
  default    = token-bucket,5,10s
  api./login = fixed-window,2,10s
  user.vip-1 = token-bucket,8,10s
`, out.String())
			assert.Empty(t, errOut.String())
		})
	}
	path := writeFile(t, "one.conf", "default = sliding-log,3,1")
	var out bytes.Buffer
	assert.Equal(t, 0, run([]string{"check", "-rules=" + path}, nil, &out, io.Discard))
	assert.Equal(t, path+": 1 rule, valid\n  default = sliding-log,3,1s\n", out.String())
}

// TestCheckComposite: a book with composites, in either format, is printed
// in canonical form, and each decision of a composite names the rule that
// bound it.
func TestCheckComposite(t *testing.T) {
	const summary = `: 3 rules, valid
  default    = token-bucket,2,1s + fixed-window,5,1h
  api./login = fixed-window,2,10s
  user.vip-1 = token-bucket,4,1s + sliding-log,6,1m
`
	for _, tc := range []struct{ name, text string }{
		{"rules.conf", "default = token-bucket,2,1 +fixed-window,5,1h\napi./login = fixed-window,2,10\nuser.vip-1 = token-bucket,4,1s+sliding-window,6,60\n"},
		{"rules.json", `{"default": ["token-bucket,2,1", {"algorithm": "FixedWindow", "algoConfig": {"maxRequests": 5, "windowMs": 3600000}}], "apis": {"/login": ["fixed-window,2,10"]}, "users": {"vip-1": "token-bucket,4,1s + sliding-log,6,1m"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, tc.name, tc.text)
			var out, errOut bytes.Buffer
			assert.Equal(t, 0, run([]string{"check", "-rules", path}, nil, &out, &errOut))
			assert.Empty(t, errOut.String())
			assert.Equal(t, path+summary, out.String())
		})
	}

	path := writeFile(t, "rules.conf", "default = token-bucket,2,1s + fixed-window,5,1h\napi./login = fixed-window,2,10\n")
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"check", "-rules", path, "-"}, strings.NewReader("alice /orders 3\nalice /orders 2 +1s\nalice /orders 2 +3s\nalice /login\n"), &out, &errOut), errOut.String())
	assert.Empty(t, errOut.String())
	const def = " (default = token-bucket,2,1s + fixed-window,5,1h)\n"
	assert.Equal(t, path+`: 2 rules, valid
  default    = token-bucket,2,1s + fixed-window,5,1h
  api./login = fixed-window,2,10s
t=0s alice /orders #1: allowed remaining=1 retry-after=0s reset-after=1h0m0s bound-by=token-bucket,2,1s`+def+
		`t=0s alice /orders #2: allowed remaining=0 retry-after=0s reset-after=1h0m0s bound-by=token-bucket,2,1s`+def+
		`t=0s alice /orders #3: denied remaining=0 retry-after=500ms reset-after=1h0m0s bound-by=token-bucket,2,1s`+def+
		`t=1s alice /orders #1: allowed remaining=1 retry-after=0s reset-after=59m59s bound-by=token-bucket,2,1s`+def+
		`t=1s alice /orders #2: allowed remaining=0 retry-after=0s reset-after=59m59s bound-by=token-bucket,2,1s`+def+
		`t=4s alice /orders #1: allowed remaining=0 retry-after=0s reset-after=59m56s bound-by=fixed-window,5,1h`+def+
		`t=4s alice /orders #2: denied remaining=0 retry-after=59m56s reset-after=59m56s bound-by=fixed-window,5,1h`+def+
		`t=4s alice /login #1: allowed remaining=1 retry-after=0s reset-after=6s (api./login = fixed-window,2,10s)
`, out.String())
}

func TestCheckInvalid(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"bad.conf", "default = token-bucket,5,10\n\napi./login = fixed-window,0,10\n", "line 3: api./login: admit: invalid rule: limit 0 must be at least 1 (a rule that admits nothing is not a rate limit)\n"},
		{"bad.conf", "default = token-bucket,5,10\nendpoint./x = fixed-window,1,10\n", `line 2: unknown name "endpoint./x"; want default, api.<api> (such as api./login) or user.<user> (such as user.vip-1)` + "\n"},
		{"bad.json", "{\"default\": \"token-bucket,5,10\",\n \"apis\": {\"/login\": {\"algorithm\": \"TokenBucket\", \"algoConfig\": {\"capacity\": 10, \"refillRatePerSecond\": null}}}}", `line 2: apis["/login"].algoConfig.refillRatePerSecond: null is not a number; want a number such as 10` + "\n"},
		{"bad.conf", "default = token-bucket,5,10\nuser.vip-1 = token-bucket,10,1s + fixed-window,1000,1h + sliding-log,0,1m\n", "line 2: user.vip-1: rule 3 of 3: admit: invalid rule: limit 0 must be at least 1 (a rule that admits nothing is not a rate limit)\n"},
		{"bad.conf", "default = token-bucket,5,10 + token-bucket,5,10s\n", "line 1: default: admit: invalid rule: rule 2, token-bucket,5,10s, repeats rule 1; each rule of a composite must differ\n"},
		{"bad.json", "{\"default\": \"token-bucket,5,10\",\n \"apis\": {\"/search\": [\"token-bucket,10,1s\",\n {\"algorithm\": \"FixedWindow\", \"algoConfig\": {\"maxRequests\": 1000, \"windowMs\": 0}}]}}", `line 3: apis["/search"][1].algoConfig.windowMs: rule 2 of 2: 0 must be at least 1` + "\n"},
	} {
		path := writeFile(t, tc.name, tc.text)
		var out, errOut bytes.Buffer
		// Requests on stdin are not read when the rules are invalid.
		assert.Equal(t, 1, run([]string{"check", "-rules", path, "-"}, strings.NewReader("alice /orders\n"), &out, &errOut))
		assert.Equal(t, path+": "+tc.want, errOut.String())
		assert.Empty(t, out.String())
	}
	var out, errOut bytes.Buffer
	assert.Equal(t, 1, run([]string{"check", "-rules", filepath.Join(t.TempDir(), "missing.conf")}, nil, &out, &errOut))
	assert.Contains(t, errOut.String(), "no such file or directory")
}

func TestCheckRequests(t *testing.T) {
	path := writeFile(t, "rules.conf", seedFile)
	stdin := `# the walkthrough, parts one to three
alice /orders 6
alice /orders +2s

alice /login 3
bob   /orders
vip-1 /orders 2
vip-1 /login +8s
alice /login 0001
alice /orders 1 +0s
`
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"check", "-rules", path, "-"}, strings.NewReader(stdin), &out, &errOut), errOut.String())
	assert.Empty(t, errOut.String())
	assert.Equal(t, path+`: 3 rules, valid
  default    = token-bucket,5,10s
  api./login = fixed-window,2,10s
  user.vip-1 = token-bucket,8,10s
t=0s alice /orders #1: allowed remaining=4 retry-after=0s reset-after=2s (default = token-bucket,5,10s)
t=0s alice /orders #2: allowed remaining=3 retry-after=0s reset-after=4s (default = token-bucket,5,10s)
t=0s alice /orders #3: allowed remaining=2 retry-after=0s reset-after=6s (default = token-bucket,5,10s)
t=0s alice /orders #4: allowed remaining=1 retry-after=0s reset-after=8s (default = token-bucket,5,10s)
t=0s alice /orders #5: allowed remaining=0 retry-after=0s reset-after=10s (default = token-bucket,5,10s)
t=0s alice /orders #6: denied remaining=0 retry-after=2s reset-after=10s (default = token-bucket,5,10s)
t=2s alice /orders #1: allowed remaining=0 retry-after=0s reset-after=10s (default = token-bucket,5,10s)
t=2s alice /login #1: allowed remaining=1 retry-after=0s reset-after=8s (api./login = fixed-window,2,10s)
t=2s alice /login #2: allowed remaining=0 retry-after=0s reset-after=8s (api./login = fixed-window,2,10s)
t=2s alice /login #3: denied remaining=0 retry-after=8s reset-after=8s (api./login = fixed-window,2,10s)
t=2s bob /orders #1: allowed remaining=4 retry-after=0s reset-after=2s (default = token-bucket,5,10s)
t=2s vip-1 /orders #1: allowed remaining=7 retry-after=0s reset-after=1.25s (user.vip-1 = token-bucket,8,10s)
t=2s vip-1 /orders #2: allowed remaining=6 retry-after=0s reset-after=2.5s (user.vip-1 = token-bucket,8,10s)
t=10s vip-1 /login #1: allowed remaining=7 retry-after=0s reset-after=1.25s (user.vip-1 = token-bucket,8,10s)
t=10s alice /login #1: allowed remaining=1 retry-after=0s reset-after=10s (api./login = fixed-window,2,10s)
t=10s alice /orders #1: allowed remaining=3 retry-after=0s reset-after=4s (default = token-bucket,5,10s)
`, out.String())
}

func TestCheckMalformedRequests(t *testing.T) {
	path := writeFile(t, "rules.conf", seedFile)
	const want = "; want USER API [N] [+DURATION], such as alice /orders 3 +2s\n"
	for _, tc := range []struct{ stdin, err string }{
		{"alice\n", `admit check: standard input, line 1: "alice" has no API` + want},
		{"alice /orders\nbob /orders 0\n", `admit check: standard input, line 2: N "0" is not a whole number from 1 to 10000` + want},
		{"alice /orders -3\n", `admit check: standard input, line 1: N "-3" is not a whole number from 1 to 10000` + want},
		{"alice /orders 10001\n", `admit check: standard input, line 1: N "10001" is not a whole number from 1 to 10000` + want},
		{"alice /orders three\n", `admit check: standard input, line 1: N "three" is not a whole number from 1 to 10000` + want},
		{"alice /orders +2\n", `admit check: standard input, line 1: "+2" is not +DURATION, a non-negative duration such as +2s or +1500ms` + want},
		{"alice /orders +-2s\n", `admit check: standard input, line 1: "+-2s" is not +DURATION, a non-negative duration such as +2s or +1500ms` + want},
		{"alice /orders ++2s\n", `admit check: standard input, line 1: "++2s" is not +DURATION, a non-negative duration such as +2s or +1500ms` + want},
		{"alice /orders +2s 3\n", `admit check: standard input, line 1: unexpected "3" after the request` + want},
		{"alice /orders 1 +2s extra\n", `admit check: standard input, line 1: unexpected "extra" after the request` + want},
		{"alice /orders +2562047h\nalice /orders +1h\n", "admit check: standard input, line 2: +1h0m0s takes the clock past 2562047h47m16.854775807s, the largest time.Duration\n"},
		{"#\n\n" + strings.Repeat("x", 5000) + "\n", "admit check: standard input, line 3: longer than 4096 bytes\n"},
	} {
		var out, errOut bytes.Buffer
		assert.Equal(t, 1, run([]string{"check", "-rules", path, "-"}, strings.NewReader(tc.stdin), &out, &errOut), "stdin %q", tc.stdin)
		assert.Equal(t, tc.err, errOut.String(), "stdin %q", tc.stdin)
		assert.True(t, strings.HasPrefix(out.String(), path+": 3 rules, valid\n"), "the summary comes first")
	}
}

// readRecorder records whether anything tried to read from r.
type readRecorder struct {
	r    io.Reader
	read chan struct{} // closed by the first Read
	once sync.Once
}

func (rr *readRecorder) Read(p []byte) (int, error) {
	rr.once.Do(func() { close(rr.read) })
	return rr.r.Read(p)
}

// TestCheckLeavesStdinAlone: without "-", check does not read standard
// input, even when it is an open pipe that never delivers end of input (a CI
// job's stdin): it validates the file and returns. Before, it read standard
// input whenever it was not a terminal, and blocked there.
func TestCheckLeavesStdinAlone(t *testing.T) {
	path := writeFile(t, "rules.conf", seedFile)
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	defer pr.Close()
	defer pw.Close() // the writer stays open until the test ends: no end of input
	stdin := &readRecorder{r: pr, read: make(chan struct{})}
	var out, errOut bytes.Buffer
	status := make(chan int, 1)
	go func() { status <- run([]string{"check", "-rules", path}, stdin, &out, &errOut) }()
	select {
	case <-stdin.read:
		pw.Close() // end the read, so that run returns
		<-status
		t.Fatal("admit check -rules FILE read standard input, which it was not asked to")
	case code := <-status:
		assert.Equal(t, 0, code, errOut.String())
		assert.Equal(t, path+`: 3 rules, valid
  default    = token-bucket,5,10s
  api./login = fixed-window,2,10s
  user.vip-1 = token-bucket,8,10s
`, out.String())
	}
}

// TestCheckRequestsFile: REQUESTS may be a file, which errors name, rather
// than - for standard input; standard input is then not read.
func TestCheckRequestsFile(t *testing.T) {
	rules := writeFile(t, "rules.conf", seedFile)
	reqs := writeFile(t, "requests.txt", "alice /login 3\nalice /login +8s\n")
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"check", "-rules", rules, reqs}, nil, &out, &errOut), errOut.String())
	assert.Equal(t, rules+`: 3 rules, valid
  default    = token-bucket,5,10s
  api./login = fixed-window,2,10s
  user.vip-1 = token-bucket,8,10s
t=0s alice /login #1: allowed remaining=1 retry-after=0s reset-after=10s (api./login = fixed-window,2,10s)
t=0s alice /login #2: allowed remaining=0 retry-after=0s reset-after=10s (api./login = fixed-window,2,10s)
t=0s alice /login #3: denied remaining=0 retry-after=10s reset-after=10s (api./login = fixed-window,2,10s)
t=8s alice /login #1: denied remaining=0 retry-after=2s reset-after=2s (api./login = fixed-window,2,10s)
`, out.String())

	bad := writeFile(t, "bad.txt", "alice /orders\nbob\n")
	out.Reset()
	errOut.Reset()
	assert.Equal(t, 1, run([]string{"check", "-rules", rules, bad}, nil, &out, &errOut))
	assert.Equal(t, "admit check: "+bad+`, line 2: "bob" has no API; want USER API [N] [+DURATION], such as alice /orders 3 +2s`+"\n", errOut.String())

	errOut.Reset()
	assert.Equal(t, 1, run([]string{"check", "-rules", rules, filepath.Join(t.TempDir(), "missing.txt")}, nil, io.Discard, &errOut))
	assert.Contains(t, errOut.String(), "no such file or directory")
}
