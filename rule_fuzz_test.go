package admit_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/admit-go/admit"
)

// FuzzParseRule checks ParseRule on any text. Its invariants:
//
//   - it never panics;
//   - an error wraps ErrInvalidRule, comes with the zero Rule and is at most
//     maxErrorLen bytes, whatever the input's length; an excerpt of a long
//     field in it is never empty (` ""…`);
//   - an accepted rule is valid, its String parses back to it (P17) and is
//     stable (canonical text is a fixed point);
//   - an accepted window means what Go's duration syntax says it means: a bare
//     number is seconds, anything else is what time.ParseDuration reads (which
//     may truncate each fractional component by at most 1ns, where ParseRule is
//     exact).
//
// Run it with: go test -run '^$' -fuzz FuzzParseRule -fuzztime 3m .
func FuzzParseRule(f *testing.F) {
	for _, tc := range acceptedRules {
		f.Add(tc.in)
	}
	for _, tc := range rejectedRules {
		f.Add(tc.in)
	}
	for _, in := range []string{
		"token-bucket,5,10" + strings.Repeat(" ", 256-len("token-bucket,5,10")), // exactly the length bound
		"token-bucket,5,10" + strings.Repeat(" ", 257-len("token-bucket,5,10")), // one past it
		strings.Repeat("a", 4096),
		strings.Repeat(",", 300),
		"token-bucket,5,1" + strings.Repeat("\x00", 240),
		strings.Repeat("\x80", 60) + ",5,10",
		"token-bucket,5,9223372036.854775807s",
		"token-bucket,5,9223372036.854775808s",
		"token-bucket,5,9223372036854775807ns",
		"token-bucket,1,4611686018.427387904s",
		"token-bucket,1,4611686018.427387905s",
		"token-bucket,5,0.1234567890123456789s",
		"token-bucket,5,1.00000000000000000000000000001s",
		"token-bucket,5,1.5000000000000000000000000000000h",
		"sliding-counter,7,1.0000000001h0.5m0.25s0.125ms",
		"fixed-window,3,5µs5μs5us",
		"sliding-log,65536,65536ns",
		"token-bucket,5,18446744073709551616ns",
		"token-bucket,5,18446744073709551615",
		"token-bucket,4294967296,10",
		"token-bucket,18446744073709551617,10",
	} {
		f.Add(in)
	}

	f.Fuzz(func(t *testing.T, text string) {
		r, err := admit.ParseRule(text)
		if err != nil {
			if !errors.Is(err, admit.ErrInvalidRule) {
				t.Fatalf("ParseRule(%q) error %q does not wrap ErrInvalidRule", text, err)
			}
			if n := len(err.Error()); n > maxErrorLen {
				t.Fatalf("ParseRule(%q) error is %d bytes, more than %d: %q", text, n, maxErrorLen, err)
			}
			// An empty excerpt is an opening quote right after a space, then the
			// closing one; inside a quoted excerpt a '"' is always escaped.
			if strings.Contains(err.Error(), ` ""…`) {
				t.Fatalf("ParseRule(%q) error %q shortens a long field to nothing", text, err)
			}
			if r != (admit.Rule{}) {
				t.Fatalf("ParseRule(%q) = %#v with error %v, want the zero Rule", text, r, err)
			}
			return
		}
		if verr := r.Validate(); verr != nil {
			t.Fatalf("ParseRule(%q) = %#v, which does not validate: %v", text, r, verr)
		}
		canon := r.String()
		again, err := admit.ParseRule(canon)
		if err != nil {
			t.Fatalf("ParseRule(%q) = %#v, but ParseRule(its String %q) fails: %v", text, r, canon, err)
		}
		if again != r {
			t.Fatalf("ParseRule(%q) = %#v, but ParseRule(%q) = %#v", text, r, canon, again)
		}
		if s := again.String(); s != canon {
			t.Fatalf("String is not stable: ParseRule(%q).String() = %q, then %q", text, canon, s)
		}
		checkWindowAgainstGo(t, text, r)
	})
}

// checkWindowAgainstGo compares the window ParseRule accepted in text with what
// strconv (a bare number of seconds) or time.ParseDuration reads there.
func checkWindowAgainstGo(t *testing.T, text string, r admit.Rule) {
	t.Helper()
	fields := strings.Split(text, ",")
	if len(fields) != 3 {
		t.Fatalf("ParseRule(%q) = %#v from %d fields, want 3", text, r, len(fields))
	}
	field := strings.Trim(fields[2], " \t")
	if secs, err := strconv.ParseInt(field, 10, 64); err == nil && !strings.HasPrefix(field, "+") && !strings.HasPrefix(field, "-") {
		// Accepted, so secs seconds fit a Duration: the product cannot overflow.
		if r.Window != time.Duration(secs)*time.Second {
			t.Fatalf("ParseRule(%q).Window = %v, want %d seconds", text, r.Window, secs)
		}
		return
	}
	d, err := time.ParseDuration(field)
	if err != nil {
		t.Fatalf("ParseRule(%q) accepted window %q, which time.ParseDuration rejects: %v", text, field, err)
	}
	slack := time.Duration(strings.Count(field, "."))
	if diff := r.Window - d; diff < 0 || diff > slack {
		t.Fatalf("ParseRule(%q).Window = %v (%d ns), time.ParseDuration(%q) = %v (%d ns)", text, r.Window, int64(r.Window), field, d, int64(d))
	}
}
