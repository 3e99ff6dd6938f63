// Command admit runs admit's walkthrough.
//
//	admit demo    replay the design notes' walkthrough with a fake clock
//
// The walkthrough is deterministic: the clock is fake and moves only when the
// script moves it, so it prints the same thing on every run.
package main

import (
	"fmt"
	"io"
	"os"
)

const usage = `usage: admit <command>

commands:
  demo    replay the walkthrough: per-key token buckets and windows, the
          boundary burst of each algorithm, and a concurrency check
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "demo":
		if len(args) > 1 {
			fmt.Fprintf(stderr, "admit demo: unexpected argument %q\n", args[1])
			return 2
		}
		if err := demo(stdout); err != nil {
			fmt.Fprintln(stderr, "admit demo:", err)
			return 1
		}
		return 0
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "admit: unknown command %q\n\n%s", args[0], usage)
	return 2
}
