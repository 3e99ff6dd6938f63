package policy

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/admit-go/admit"
)

// ParseJSON reads a rule book in JSON. The document is one object:
//
//	{
//	  "default": "token-bucket,5,10s",
//	  "apis":  {"/login": "fixed-window,2,10s"},
//	  "users": {"vip-1": {"algorithm": "TokenBucket", "algoConfig": {"capacity": 8, "refillRatePerSecond": 0.8}}}
//	}
//
// "default" is required; "apis" and "users", objects from an API or a user
// name to its rule, are optional. Names follow the rules of [Parse]. Each rule
// is either text, as the properties format reads it ([admit.ParseLimits]:
// one rule, or a composite "token-bucket,10,1s + fixed-window,1000,1h"), or
// an object naming an algorithm and its parameters, after the design notes'
// configuration:
//
//	{"algorithm": "TokenBucket",          "algoConfig": {"capacity": C, "refillRatePerSecond": R}}
//	{"algorithm": "FixedWindow",          "algoConfig": {"maxRequests": N, "windowMs": W}}
//	{"algorithm": "SlidingWindowLog",     "algoConfig": {"maxRequests": N, "windowMs": W}}
//	{"algorithm": "SlidingWindowCounter", "algoConfig": {"maxRequests": N, "windowMs": W}}
//
// A token bucket of capacity C refilled at R tokens per second is the rule
// token-bucket,C,(C/R seconds): C and the window in which the whole capacity
// refills. C/R seconds must be a whole number of nanoseconds. C, N and W are
// whole numbers written without a fraction or an exponent; R is a positive
// decimal such as 2 or 0.5, without an exponent. The other forms read N
// requests per W milliseconds.
//
// Wherever a rule is accepted, an array of 1 to [admit.MaxLimits] rules, each
// in the text or the object form of one rule, is a composite: every rule of
// it applies at once (see [admit.Limits]). A one-element array is its rule.
//
//	"/search": ["token-bucket,10,1s", {"algorithm": "FixedWindow", "algoConfig": {"maxRequests": 1000, "windowMs": 3600000}}]
//
// ParseJSON is strict where encoding/json is lenient: an unknown field (also
// inside algoConfig), a field name in the wrong case ("Default"), a field or
// a name given twice, null, a value of the wrong type (the string "5" for a
// number), a number out of range (1e400), text after the object, input that
// is not UTF-8 or starts with a byte order mark are errors, as are a missing
// default and a book of more than [MaxJSONBytes] bytes or [MaxRules] rules.
// The error is an *[Error] that gives the line and the path of the problem
// and says what would be right, and for a composite which of its rules is at
// fault, such as
//
//	line 4: apis["/login"].algoConfig: unknown field "capacty"; TokenBucket wants "capacity" and "refillRatePerSecond"
//	line 7: apis["/search"][1].algoConfig.maxRequests: rule 2 of 2: 0 must be at least 1
//
// A syntax error names the line of the first byte at which the text stops
// being JSON (the '}' after a trailing ','), or when the text ends early,
// the line of its last byte that is not space; ParseJSON checks the syntax
// itself, so the line and the message are the same on every Go release.
//
// An error reading r is not an *Error: it is returned wrapped ("policy:
// reading rules: …"), for [errors.Is] to see through.
func ParseJSON(r io.Reader) (*Book, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxJSONBytes+1))
	if err != nil {
		return nil, fmt.Errorf("policy: reading rules: %w", err)
	}
	if len(data) > MaxJSONBytes {
		return nil, &Error{Msg: fmt.Sprintf("the JSON book is larger than %d bytes, the most a rule book may be", MaxJSONBytes)}
	}
	return parseJSON(data)
}

// MarshalJSON returns the book in the JSON format of [ParseJSON], each rule
// in the canonical text of [admit.Rule.String] and each composite as an
// array of its rules' texts, names sorted. "apis" and "users" are left out
// when empty. It returns an error for a Book without a default rule (the
// zero Book).
func (b *Book) MarshalJSON() ([]byte, error) {
	if err := b.validate(); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	doc := struct {
		Default any            `json:"default"`
		APIs    map[string]any `json:"apis,omitempty"`
		Users   map[string]any `json:"users,omitempty"`
	}{Default: limitsJSON(b.def)}
	if len(b.apis) > 0 {
		doc.APIs = make(map[string]any, len(b.apis))
		for name, l := range b.apis {
			doc.APIs[name] = limitsJSON(l)
		}
	}
	if len(b.users) > 0 {
		doc.Users = make(map[string]any, len(b.users))
		for name, l := range b.users {
			doc.Users[name] = limitsJSON(l)
		}
	}
	return json.Marshal(doc)
}

// limitsJSON returns what MarshalJSON writes for l: its rule's text for one
// rule, the array of its rules' texts for a composite.
func limitsJSON(l admit.Limits) any {
	if l.Len() == 1 {
		return l.At(0).String()
	}
	texts := make([]string, l.Len())
	for i := range texts {
		texts[i] = l.At(i).String()
	}
	return texts
}

// UnmarshalJSON reads data with the rules of [ParseJSON] (null included: it
// is an error, not a no-op) and replaces b's contents with the book read, so
// that a *Book can be a field of a larger configuration. Line numbers in its
// errors count from the start of data. A Book must not change while it is in
// use, so unmarshal only into a new Book; on error b is left unchanged.
func (b *Book) UnmarshalJSON(data []byte) error {
	nb, err := parseJSON(data)
	if err != nil {
		return err
	}
	*b = *nb
	return nil
}
