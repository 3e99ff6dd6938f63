package policy

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/admit-go/admit"
)

// Bounds on what a rule book may hold, so that a hostile or corrupt file can
// make neither parsing nor the book itself, nor an error message, arbitrarily
// large. Input beyond a bound is an error that names the bound; it is never
// silently truncated.
const (
	// MaxLineBytes is the longest line of the properties format, not counting
	// its line ending.
	MaxLineBytes = 4096

	// MaxLines is the most lines a properties file may have, comments and
	// blank lines included.
	MaxLines = 100_000

	// MaxJSONBytes is the largest JSON rule book.
	MaxJSONBytes = 8 << 20

	// MaxRules is the most entries a JSON rule book may hold, a composite
	// counting once (the properties format is bounded by MaxLines).
	MaxRules = 100_000

	// MaxNameBytes is the longest user or API name.
	MaxNameBytes = 1024
)

// Scope says which requests a rule of a [Book] applies to.
type Scope uint8

const (
	// Default is the scope of the rule for requests that match no other rule.
	Default Scope = iota + 1
	// API is the scope of a rule for every user's requests to one API.
	API
	// User is the scope of a rule for one user's requests to every API.
	User
)

// String returns "default", "api" or "user": the prefix of the scope's names
// in the properties format.
func (s Scope) String() string {
	switch s {
	case Default:
		return "default"
	case API:
		return "api"
	case User:
		return "user"
	}
	return "Scope(" + strconv.Itoa(int(s)) + ")"
}

// Entry is one entry of a [Book]: the limits for the user or the API Name,
// or the default limits (Scope Default, empty Name).
type Entry struct {
	Scope Scope
	Name  string

	// Limits is what the entry enforces: one rule, or a composite of two or
	// more rules that all apply at once (see [admit.Limits]). It is set in
	// every Entry a Book returns.
	Limits admit.Limits

	// Rule is the entry's rule when Limits holds one rule (Limits.At(0)),
	// and the zero Rule when Limits is a composite, which no single rule
	// describes: read Limits to handle both.
	Rule admit.Rule
}

// entry returns the Entry of scope s and name for l, its Rule filled in.
func entry(s Scope, name string, l admit.Limits) Entry {
	e := Entry{Scope: s, Name: name, Limits: l}
	if l.Len() == 1 {
		e.Rule = l.At(0)
	}
	return e
}

// Key returns the entry's name as the properties format writes it: "default",
// "api./login" or "user.vip-1".
func (e Entry) Key() string {
	if e.Scope == Default {
		return "default"
	}
	return e.Scope.String() + "." + e.Name
}

// String returns the entry as a line of the properties format, such as
// "api./login = fixed-window,2,10s" or, for a composite,
// "api./search = token-bucket,10,1s + fixed-window,1000,1h". An Entry built
// by hand with its Rule and no Limits writes its Rule.
func (e Entry) String() string {
	if e.Limits.Len() == 0 {
		return e.Key() + " = " + e.Rule.String()
	}
	return e.Key() + " = " + e.Limits.String()
}

// Book is an immutable rule book: default limits, and optional limits for
// particular APIs and particular users, each one rule or a composite of
// several (see [admit.Limits]). [Book.LimitsFor] answers which limits apply
// to a request, the most specific entry winning: the user's, else the API's,
// else the default.
//
// Books come from [Parse], [ParseJSON] or [Load], which accept only valid
// books: all limits pass [admit.Limits.Validate], every name is well formed,
// and the default is present. A Book is safe for concurrent use and is
// never modified, with one exception: [Book.UnmarshalJSON] replaces the
// contents of the Book it is called on, so unmarshal only into a new Book.
// The zero Book has no default; a [Service] rejects it.
type Book struct {
	def   admit.Limits
	apis  map[string]admit.Limits
	users map[string]admit.Limits
}

// LimitsFor returns the limits for a request from user to api: user's
// limits if the book has an entry for user, else api's if it has one for
// api, else the default. A user entry applies to that user on every API (the
// [Service] still keeps a separate budget for each API); an API entry
// applies to every user without an entry of their own.
func (b *Book) LimitsFor(user, api string) admit.Limits { return b.EntryFor(user, api).Limits }

// RuleFor is [Book.LimitsFor] for a book of single rules: it returns the
// rule of the entry that applies, and the zero Rule if that entry is a
// composite (two or more rules, which no single rule describes). Use
// LimitsFor when the book may hold composites.
func (b *Book) RuleFor(user, api string) admit.Rule { return b.EntryFor(user, api).Rule }

// EntryFor is [Book.LimitsFor] that also says which entry of the book
// matched, which is what a log line or a debugging tool wants to show.
func (b *Book) EntryFor(user, api string) Entry {
	if l, ok := b.users[user]; ok {
		return entry(User, user, l)
	}
	if l, ok := b.apis[api]; ok {
		return entry(API, api, l)
	}
	return entry(Default, "", b.def)
}

// Default returns the default rule, or the zero Rule if the default is a
// composite; [Book.DefaultLimits] returns it in both cases.
func (b *Book) Default() admit.Rule { return entry(Default, "", b.def).Rule }

// DefaultLimits returns the default limits: the limits of the requests that
// match no user or API entry.
func (b *Book) DefaultLimits() admit.Limits { return b.def }

// Len returns the number of entries in the book, the default included; a
// composite counts once.
func (b *Book) Len() int { return 1 + len(b.apis) + len(b.users) }

// Rules lists the book's entries in canonical order: the default first,
// then the API entries and then the user entries, each sorted by name.
func (b *Book) Rules() []Entry {
	out := make([]Entry, 0, b.Len())
	out = append(out, entry(Default, "", b.def))
	for _, name := range slices.Sorted(maps.Keys(b.apis)) {
		out = append(out, entry(API, name, b.apis[name]))
	}
	for _, name := range slices.Sorted(maps.Keys(b.users)) {
		out = append(out, entry(User, name, b.users[name]))
	}
	return out
}

// String returns the book in the properties format, canonically: one
// "name = limits" line per entry in the order of [Book.Rules], each in the
// canonical text of [admit.Limits.String] (a single rule's is
// [admit.Rule.String]'s). Parse(strings.NewReader(b.String())) returns a
// book equal to b.
func (b *Book) String() string {
	var sb strings.Builder
	for _, e := range b.Rules() {
		sb.WriteString(e.String())
		sb.WriteByte('\n')
	}
	return sb.String()
}

// clone returns a copy of b that shares no map with it.
func (b *Book) clone() *Book {
	return &Book{def: b.def, apis: maps.Clone(b.apis), users: maps.Clone(b.users)}
}

// validate checks what Parse, ParseJSON and Load guarantee, for a Book that
// may have been built otherwise (the zero Book).
func (b *Book) validate() error {
	if b.def.Len() == 0 {
		return fmt.Errorf("the book has no default rule; build it with Parse, ParseJSON or Load: %w", admit.ErrInvalidRule)
	}
	for _, e := range b.Rules() {
		if err := e.Limits.Validate(); err != nil {
			return fmt.Errorf("%s: %w", e.Key(), err)
		}
	}
	return nil
}

// bookBuilder accumulates a book while it is parsed: one place that enforces the
// rules on names, duplicates and the default, whatever the format.
type bookBuilder struct {
	book  Book
	where map[string]string // key ("api./login") → where it was defined, for duplicate errors
	seen  bool              // the default rule was given
}

func newBuilder() *bookBuilder {
	return &bookBuilder{book: Book{apis: map[string]admit.Limits{}, users: map[string]admit.Limits{}}, where: map[string]string{}}
}

// add records e (its Limits; its Rule is not read), defined at where ("line 3", or a JSON path). It returns the
// message of an error, or "".
func (bd *bookBuilder) add(e Entry, where string) string {
	key := e.Key()
	if first, dup := bd.where[key]; dup {
		return fmt.Sprintf("%s is defined twice (first at %s); each name may appear once", quoteName(key), first)
	}
	bd.where[key] = where
	switch e.Scope {
	case Default:
		bd.book.def, bd.seen = e.Limits, true
	case API:
		bd.book.apis[e.Name] = e.Limits
	case User:
		bd.book.users[e.Name] = e.Limits
	}
	return ""
}

// missingDefault is the message of the error for a book without a default rule.
const missingDefault = "no default rule; add one for the requests that match no user or API rule, such as `default = token-bucket,5,10s` (or \"default\": \"token-bucket,5,10s\" in JSON)"

// byteOrderMark is the message of the error for a book that starts with a
// UTF-8 byte order mark, in either format: encoding/json and the properties
// syntax would both read it as text, so name it rather than let it surface as
// an odd first character.
const byteOrderMark = "the file starts with a byte order mark (U+FEFF); save it as UTF-8 without one"

// checkName returns "" if name is acceptable as the name of a user or an API
// of scope s, else the message of an error.
//
// A name is 1 to MaxNameBytes bytes of UTF-8 made of printable characters
// other than the space, '=' and U+FFFD. That keeps every name writable in both
// formats (the properties format splits a line at its first '=' and trims
// spaces) and visible in an error message: no control characters, no
// invisible format characters, no replacement characters standing for bytes
// that were not text.
func checkName(s Scope, name string) string {
	what := "user name"
	example := "user.vip-1"
	if s == API {
		what, example = "API name", "api./login"
	}
	switch {
	case name == "":
		return fmt.Sprintf("empty %s; want %s.<name>, for example %s", what, s, example)
	case len(name) > MaxNameBytes:
		return fmt.Sprintf("%s is %d bytes; a name is at most %d bytes", what, len(name), MaxNameBytes)
	case !utf8.ValidString(name):
		return fmt.Sprintf("%s %s is not valid UTF-8", what, quoteName(name))
	}
	for _, r := range name {
		if r == ' ' || r == '=' || r == utf8.RuneError || !unicode.IsPrint(r) {
			return fmt.Sprintf("%s %s contains %U, which a name may not: a name is printable characters other than space, '=' and U+FFFD",
				what, quoteName(name), r)
		}
	}
	return ""
}

// clip returns s, cut to at most 64 bytes (and "…") for a message.
func clip(s string) string {
	if len(s) > 64 {
		return cutUTF8(s, 64) + "…"
	}
	return s
}

func cutUTF8(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > max-utf8.UTFMax+1 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// quoteName quotes s for a message, shortened so that a hostile input cannot
// make the message large.
func quoteName(s string) string {
	if len(s) > 64 {
		return strconv.Quote(cutUTF8(s, 64)) + "…"
	}
	return strconv.Quote(s)
}

// Error is a problem in the text of a rule book. Every error that [Parse],
// [ParseJSON] and [Load] return for a malformed book is an *Error. An error
// opening or reading the file is not: it is returned wrapped with what policy
// was doing ("policy: open rules.conf: no such file or directory"), and
// [errors.Is] sees through the wrapping (errors.Is(err, fs.ErrNotExist)). An
// Error's message says where the problem is and what would be right:
//
//	rules.conf: line 3: api./login: admit: invalid rule: limit 0 must be at least 1 (…)
//	rules.json: line 4: apis["/login"].algoConfig: unknown field "capacty"; TokenBucket wants "capacity" and "refillRatePerSecond"
type Error struct {
	// File is the path given to Load; empty for Parse and ParseJSON.
	File string
	// Line is the 1-based line of the problem; 0 when it concerns the whole
	// book (a missing default rule, a file over MaxJSONBytes).
	Line int
	// Path locates the problem in a JSON book, such as
	// `apis["/login"].algoConfig.capacity`; empty for the properties format.
	Path string
	// Msg says what is wrong and what would be right.
	Msg string
	// Err is the underlying error, if any: for a rule the admit package
	// rejected, an error wrapping [admit.ErrInvalidRule].
	Err error
}

func (e *Error) Error() string {
	var sb strings.Builder
	if e.File != "" {
		sb.WriteString(e.File)
		sb.WriteString(": ")
	}
	if e.Line > 0 {
		sb.WriteString("line ")
		sb.WriteString(strconv.Itoa(e.Line))
		sb.WriteString(": ")
	}
	if e.Path != "" {
		sb.WriteString(e.Path)
		sb.WriteString(": ")
	}
	sb.WriteString(e.Msg)
	if e.Err != nil {
		if e.Msg != "" {
			sb.WriteString(": ")
		}
		sb.WriteString(e.Err.Error())
	}
	return sb.String()
}

// Unwrap returns e.Err.
func (e *Error) Unwrap() error { return e.Err }

// Load reads a rule book from a file: the JSON format if the file's name ends
// in ".json" (in any case), else the properties format. The returned errors
// that concern the book's text are *[Error]s whose File is path; an error
// opening or reading the file is wrapped ("policy: open …: …").
func Load(path string) (*Book, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	defer f.Close()
	var b *Book
	if strings.EqualFold(filepath.Ext(path), ".json") {
		b, err = ParseJSON(f)
	} else {
		b, err = Parse(f)
	}
	if e, ok := err.(*Error); ok {
		e.File = path
	}
	return b, err
}
