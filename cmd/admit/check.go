package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/policy"
)

const checkUsage = `usage: admit check -rules FILE [REQUESTS]

Validate a rule file: JSON if its name ends in .json, else the properties
format (default = token-bucket,5,10 / api./login = … / user.vip-1 = …,
where a composite joins rules that all apply with +:
token-bucket,10,1s + fixed-window,1000,1h). A valid file is printed back
in canonical form; an invalid one is reported on standard error, with its
line, and exits 1.

Given REQUESTS, a file of requests or - for standard input, check then
reads requests from it, one per line, and prints each decision:

  USER API [N] [+DURATION]

+DURATION advances a fake clock (starting at 0) before the requests, in Go's
syntax (+2s, +1500ms); N is how many requests to make (1 to %d, default 1).
Blank lines and lines starting with # are skipped. Standard input is read
only when REQUESTS is -:

  printf 'alice /login 3\nalice /login +8s\n' | admit check -rules rules.conf -

flags:
`

// maxRequestsPerLine bounds N, and so the output of one request line.
const maxRequestsPerLine = 10_000

// maxRequestLine bounds the length of a request line.
const maxRequestLine = 4096

func runCheck(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rules := fs.String("rules", "", "the rule `FILE` to validate (required)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, checkUsage, maxRequestsPerLine)
		fs.PrintDefaults()
	}
	if status, stop := parseFlags(fs, args); stop {
		return status
	}
	if fs.NArg() > 1 {
		fmt.Fprintf(stderr, "admit check: unexpected argument %q; want the flags, then at most one file of requests (- for standard input): admit check -rules FILE [REQUESTS]\n", fs.Arg(1))
		return 2
	}
	if *rules == "" {
		fmt.Fprintln(stderr, "admit check: -rules FILE is required")
		fs.Usage()
		return 2
	}
	book, err := policy.Load(*rules)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	summarize(stdout, *rules, book)
	if fs.NArg() == 0 {
		return 0 // no requests asked for: standard input is left alone
	}
	requests, name := stdin, "standard input"
	if fs.Arg(0) != "-" {
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			fmt.Fprintln(stderr, "admit check:", err)
			return 1
		}
		defer f.Close()
		requests, name = f, fs.Arg(0)
	}
	fake := clock.NewFake()
	svc, err := policy.NewService(book, admit.WithClock(fake))
	if err != nil {
		fmt.Fprintln(stderr, "admit check:", err)
		return 1
	}
	if err := checkRequests(requests, name, stdout, svc, fake); err != nil {
		fmt.Fprintln(stderr, "admit check:", err)
		return 1
	}
	return 0
}

// summarize prints the entries of a valid book, aligned, each in canonical
// form (a composite's rules joined by " + ").
func summarize(w io.Writer, file string, book *policy.Book) {
	noun := "rules"
	if book.Len() == 1 {
		noun = "rule"
	}
	fmt.Fprintf(w, "%s: %d %s, valid\n", file, book.Len(), noun)
	width := 0
	for _, e := range book.Rules() {
		width = max(width, min(len(e.Key()), 32))
	}
	for _, e := range book.Rules() {
		fmt.Fprintf(w, "  %-*s = %v\n", width, e.Key(), e.Limits)
	}
}

// checkRequests reads request lines from r, which errors call name, and
// prints the decision of each request, and the entry that applied; for a
// composite, also the rule that bound the decision (on a denial, the rule
// that denied).
func checkRequests(r io.Reader, name string, w io.Writer, svc *policy.Service, fake *clock.Fake) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 256), maxRequestLine+2)
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	line := 0
	for sc.Scan() {
		line++
		req, err := parseRequest(sc.Text())
		if err != nil {
			return fmt.Errorf("%s, line %d: %v; want USER API [N] [+DURATION], such as alice /orders 3 +2s", name, line, err)
		}
		if req.user == "" {
			continue // blank or comment
		}
		if req.advance > time.Duration(math.MaxInt64)-fake.Now() {
			return fmt.Errorf("%s, line %d: +%v takes the clock past %v, the largest time.Duration", name, line, req.advance, time.Duration(math.MaxInt64))
		}
		fake.Advance(req.advance)
		book := svc.Book()
		for i := 1; i <= req.n; i++ {
			d, limits, which := svc.CheckNWhich(req.user, req.api, 1)
			verdict := "allowed"
			if !d.Allowed {
				verdict = "denied"
			}
			bound := ""
			if limits.Len() > 1 {
				bound = fmt.Sprintf(" bound-by=%v", limits.At(which))
			}
			fmt.Fprintf(bw, "t=%v %s %s #%d: %s remaining=%d retry-after=%s reset-after=%v%s (%v)\n",
				fake.Now(), req.user, req.api, i, verdict, d.Remaining, retryAfter(d), d.ResetAfter, bound, book.EntryFor(req.user, req.api))
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("%s, line %d: longer than %d bytes", name, line+1, maxRequestLine)
		}
		return fmt.Errorf("reading %s after line %d: %w", name, line, err)
	}
	return nil
}

func retryAfter(d admit.Decision) string {
	if d.RetryAfter == admit.Never {
		return "never"
	}
	return d.RetryAfter.String()
}

// request is one line of check's requests. A zero user means the line
// holds no request (blank, or a comment).
type request struct {
	user, api string
	n         int
	advance   time.Duration
}

func parseRequest(text string) (request, error) {
	if len(text) > maxRequestLine {
		return request{}, fmt.Errorf("longer than %d bytes", maxRequestLine)
	}
	f := strings.Fields(text)
	if len(f) == 0 || strings.HasPrefix(f[0], "#") {
		return request{}, nil
	}
	if len(f) < 2 {
		return request{}, fmt.Errorf("%q has no API", clip(text))
	}
	req := request{user: f[0], api: f[1], n: 1}
	rest := f[2:]
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "+") {
		n, err := strconv.Atoi(rest[0])
		if err != nil || n < 1 || n > maxRequestsPerLine || rest[0][0] < '0' || rest[0][0] > '9' {
			return request{}, fmt.Errorf("N %q is not a whole number from 1 to %d", clip(rest[0]), maxRequestsPerLine)
		}
		req.n, rest = n, rest[1:]
	}
	if len(rest) > 0 {
		d, err := time.ParseDuration(rest[0][1:])
		if !strings.HasPrefix(rest[0], "+") || err != nil || d < 0 || strings.HasPrefix(rest[0], "+-") || strings.HasPrefix(rest[0], "++") {
			return request{}, fmt.Errorf("%q is not +DURATION, a non-negative duration such as +2s or +1500ms", clip(rest[0]))
		}
		req.advance, rest = d, rest[1:]
	}
	if len(rest) > 0 {
		return request{}, fmt.Errorf("unexpected %q after the request", clip(rest[0]))
	}
	return req, nil
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
