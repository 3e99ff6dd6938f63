// Command admit replays admit's walkthrough and checks rule files.
//
// Usage:
//
//	admit demo
//	admit check -rules FILE [REQUESTS]
//
// "admit demo" replays the walkthrough of the design notes through a
// policy.Service built from the notes' configuration, with a fake clock, so it
// prints the same thing on every run.
//
// "admit check -rules FILE" validates a rule file (JSON if its name ends in
// .json, else the properties format of package policy). An invalid file is
// reported on standard error with its line and what would be right, and the
// exit status is 1; a valid one is summarized on standard output. Given
// REQUESTS, a file of requests or - for standard input, check then reads
// requests from it, one per line:
//
//	USER API [N] [+DURATION]
//
// It advances a fake clock (starting at 0) by DURATION (Go syntax: 2s, 1500ms),
// then makes N requests (default 1) from USER to API and prints each decision.
// Blank lines and lines starting with # are skipped; any other line that does
// not read is an error naming the line (exit status 1). Standard input is
// read only when REQUESTS is -, so that check does not wait on a standard
// input left open, such as a CI job's. For example:
//
//	$ printf 'alice /login 3\nalice /login +8s\n' | admit check -rules rules.conf -
//	rules.conf: 3 rules, valid
//	  default    = token-bucket,5,10s
//	  api./login = fixed-window,2,10s
//	  user.vip-1 = token-bucket,8,10s
//	t=0s alice /login #1: allowed remaining=1 retry-after=0s reset-after=10s (api./login = fixed-window,2,10s)
//	t=0s alice /login #2: allowed remaining=0 retry-after=0s reset-after=10s (api./login = fixed-window,2,10s)
//	t=0s alice /login #3: denied remaining=0 retry-after=10s reset-after=10s (api./login = fixed-window,2,10s)
//	t=8s alice /login #1: denied remaining=0 retry-after=2s reset-after=2s (api./login = fixed-window,2,10s)
//
// A composite entry (rules that all apply at once, joined by " + ") is
// printed in canonical form, and each of its decisions also names the rule
// that bound it, bound-by=fixed-window,1000,1h for instance: on a denial,
// the rule that denied.
//
// Usage errors exit with status 2.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

const usage = `usage: admit <command> [flags]

commands:
  demo                          replay the design notes' walkthrough through
                                a policy.Service, with a fake clock
  check -rules FILE [REQUESTS]  validate a rule file (.json: JSON, else
                                properties) and, given a file of requests
                                (- for standard input), check each of them:
                                USER API [N] [+DURATION]
  help                          print this message
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run runs the command line args and returns the exit status: 0 for success,
// 1 for a failure (an invalid rule file, a malformed request), 2 for a usage
// error. stdin is read only by check, and only when args ask for it ("-").
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "demo":
		return runDemo(args[1:], stdout, stderr)
	case "check":
		return runCheck(args[1:], stdin, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "admit: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// parseFlags parses a command's args into fs, and reports whether the
// command must stop there, with its exit status: 0 after -help (fs has
// printed its usage), 2 for a flag that does not parse (fs has said which).
func parseFlags(fs *flag.FlagSet, args []string) (status int, stop bool) {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		return 0, true
	}
	return 2, true
}
