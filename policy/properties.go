package policy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/admit-go/admit"
)

// Parse reads a rule book in the properties format of the design notes:
//
//	# comments and blank lines are ignored
//	default    = token-bucket,5,10
//	api./login = fixed-window,2,10
//	user.vip-1 = token-bucket,8,10
//
// Every other line is "name = rule". The name is "default", "api.<api>" or
// "user.<user>" (names are case-sensitive; a user or API name is printable
// characters other than space and '=', at most [MaxNameBytes] bytes); the
// line is split at its first '='; spaces and tabs around the name and the
// rule are ignored; the rule is the text [admit.ParseRule] reads, or a
// composite of 2 to [admit.MaxLimits] such rules joined by "+", all of which
// apply at once, in the text [admit.ParseLimits] reads:
//
//	api./search = token-bucket,10,1s + fixed-window,1000,1h
//
// A comment
// is a line whose first non-blank character is '#'; there are no comments at
// the end of a rule line. Lines end in "\n" or "\r\n". The "default" rule is
// required, and each name may appear once.
//
// Parse is strict: a line it cannot read is an error, never skipped. The
// error is an *[Error] whose message names the line and says what would be
// right, and for a composite which of its rules is at fault, such as
//
//	line 3: api./login: admit: invalid rule: limit 0 must be at least 1 (…)
//	line 4: api./search: rule 2 of 2: admit: invalid rule: algorithm "fixed-windw" is unknown; want one of …
//
// Input is bounded: a line longer than [MaxLineBytes], more than [MaxLines]
// lines, a file that is not UTF-8 (or starts with a byte order mark) is an
// error. An error reading r is not an *Error: it is returned wrapped
// ("policy: reading rules after line 12: …"), for [errors.Is] to see through.
func Parse(r io.Reader) (*Book, error) {
	sc := bufio.NewScanner(r)
	// Room for the longest line plus its "\r\n", so that one byte more is
	// reported as too long rather than split.
	sc.Buffer(make([]byte, 0, 512), MaxLineBytes+2)
	bd := newBuilder()
	line := 0
	for sc.Scan() {
		line++
		if line > MaxLines {
			return nil, &Error{Line: line, Msg: fmt.Sprintf("too many lines; a rule file has at most %d lines, comments and blank lines included", MaxLines)}
		}
		if msg, err := parseLine(bd, sc.Text(), line); msg != "" {
			return nil, &Error{Line: line, Msg: msg, Err: err}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &Error{Line: line + 1, Msg: fmt.Sprintf("line too long; a line is at most %d bytes", MaxLineBytes)}
		}
		return nil, fmt.Errorf("policy: reading rules after line %d: %w", line, err)
	}
	if !bd.seen {
		return nil, &Error{Msg: missingDefault}
	}
	return &bd.book, nil
}

// parseLine reads one line (without its line ending) into bd. It returns the
// message of an error and its cause, if any, or "".
func parseLine(bd *bookBuilder, text string, line int) (string, error) {
	if len(text) > MaxLineBytes {
		return fmt.Sprintf("line too long (%d bytes); a line is at most %d bytes", len(text), MaxLineBytes), nil
	}
	if !utf8.ValidString(text) {
		return "not valid UTF-8; save the file as UTF-8", nil
	}
	if line == 1 && strings.HasPrefix(text, "\uFEFF") {
		return byteOrderMark, nil
	}
	t := strings.Trim(text, " \t")
	if t == "" || t[0] == '#' {
		return "", nil
	}
	k, v, ok := strings.Cut(t, "=")
	if !ok {
		return fmt.Sprintf("%s has no '='; want name = rule, such as default = token-bucket,5,10s (or # at the start of a comment)", quoteName(t)), nil
	}
	key, val := strings.Trim(k, " \t"), strings.Trim(v, " \t")
	e, msg := parseKey(key)
	if msg != "" {
		return msg, nil
	}
	if val == "" {
		return fmt.Sprintf("%s has no rule after '='; want algorithm,limit,window, such as %s = token-bucket,5,10s", clip(key), clip(key)), nil
	}
	if strings.ContainsRune(val, '#') {
		return fmt.Sprintf("%s: the rule %s contains '#'; a comment must be on a line of its own", clip(key), quoteName(val)), nil
	}
	limits, err := admit.ParseLimits(val)
	if err != nil {
		return clip(key), err
	}
	e.Limits = limits
	return bd.add(e, fmt.Sprintf("line %d", line)), nil
}

// parseKey reads the name before a line's '='.
func parseKey(key string) (Entry, string) {
	if key == "" {
		return Entry{}, "no name before '='; want default, api.<api> or user.<user>"
	}
	if key == "default" {
		return Entry{Scope: Default}, ""
	}
	for _, s := range []Scope{API, User} {
		if name, ok := strings.CutPrefix(key, s.String()+"."); ok {
			if msg := checkName(s, name); msg != "" {
				return Entry{}, msg
			}
			return Entry{Scope: s, Name: name}, ""
		}
	}
	lower := strings.ToLower(key)
	switch {
	case lower == "default", strings.HasPrefix(lower, "api."), strings.HasPrefix(lower, "user."):
		return Entry{}, fmt.Sprintf("unknown name %s; names are case-sensitive: want default, api.<api> or user.<user> in lower case", quoteName(key))
	case key == "api" || key == "user":
		return Entry{}, fmt.Sprintf("%s has no name; want %s.<name>, such as api./login or user.vip-1", key, key)
	}
	return Entry{}, fmt.Sprintf("unknown name %s; want default, api.<api> (such as api./login) or user.<user> (such as user.vip-1)", quoteName(key))
}
