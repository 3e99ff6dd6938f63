package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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

// ruleWant says what a rule may look like, for error messages.
const ruleWant = `want rule text such as "token-bucket,5,10s", an object such as {"algorithm": "TokenBucket", "algoConfig": {"capacity": 5, "refillRatePerSecond": 0.5}}, or an array of such rules that all apply`

// elementWant says what an element of a composite's array may look like.
const elementWant = `an element of the array is one rule: rule text such as "token-bucket,5,10s" or an object such as {"algorithm": "FixedWindow", "algoConfig": {"maxRequests": 1000, "windowMs": 3600000}}`

// objectForm is one algorithm of the object form of a rule.
type objectForm struct {
	name   string // the "algorithm" value, such as "TokenBucket"
	alg    admit.Algorithm
	params [2]string // the algoConfig fields, all required
}

var objectForms = []objectForm{
	{"TokenBucket", admit.TokenBucket, [2]string{"capacity", "refillRatePerSecond"}},
	{"FixedWindow", admit.FixedWindow, [2]string{"maxRequests", "windowMs"}},
	{"SlidingWindowLog", admit.SlidingLog, [2]string{"maxRequests", "windowMs"}},
	{"SlidingWindowCounter", admit.SlidingCounter, [2]string{"maxRequests", "windowMs"}},
}

func (f objectForm) wants() string {
	return fmt.Sprintf("%s wants %q and %q", f.name, f.params[0], f.params[1])
}

// jsonParser walks the tokens of a JSON book, so that it sees what
// encoding/json's decoding into structs would hide: duplicate fields, the case
// of names, null.
type jsonParser struct {
	data  []byte
	lex   jsonLexer
	rules int
}

// parseError is an error at byte offset off of the input (0: the whole book).
func (p *jsonParser) errorAt(off int64, path, msg string, err error) *Error {
	e := &Error{Path: path, Msg: msg, Err: err}
	if off > 0 {
		e.Line = 1 + bytes.Count(p.data[:min(off, int64(len(p.data)))], []byte{'\n'})
	}
	return e
}

// next returns the next token and the offset just after it; on a syntax
// error, an *Error on the line the lexer chose (see jsonLexer).
func (p *jsonParser) next(path string) (json.Token, int64, error) {
	tok, err := p.lex.Token()
	if err != nil {
		le, ok := err.(*lexError)
		if !ok { // io.EOF: the book's object is read before its end is
			le = p.lex.endError()
		}
		return nil, 0, &Error{Line: 1 + bytes.Count(p.data[:le.off], []byte{'\n'}), Path: path, Msg: "invalid JSON: " + le.msg}
	}
	// The offset is just past the token; its last byte is on the token's line.
	return tok, max(int64(p.lex.pos), 1), nil
}

// key reads an object's next key (the decoder guarantees it is a string).
func (p *jsonParser) key(path string) (string, int64, error) {
	tok, off, err := p.next(path)
	if err != nil {
		return "", 0, err
	}
	k, ok := tok.(string)
	if !ok {
		return "", 0, p.errorAt(off, path, "invalid JSON: want a field name", nil)
	}
	return k, off, nil
}

// open reads the '{' that starts an object; what describes the object for a
// type error.
func (p *jsonParser) open(path, what string) (int64, error) {
	tok, off, err := p.next(path)
	if err != nil {
		return 0, err
	}
	if tok != json.Delim('{') {
		return 0, p.errorAt(off, path, fmt.Sprintf("%s is not an object; want %s", describe(tok), what), nil)
	}
	return off, nil
}

// close reads the '}' that ends an object after More reported false.
func (p *jsonParser) close(path string) error {
	_, _, err := p.next(path)
	return err
}

// dup checks a field name against those already seen in the same object.
func (p *jsonParser) dup(seen map[string]int64, name string, off int64, path string) error {
	if first, ok := seen[name]; ok {
		return p.errorAt(off, path, fmt.Sprintf("duplicate field %s (first on line %d); each field may appear once", quoteName(name), p.errorAt(first, "", "", nil).Line), nil)
	}
	seen[name] = off
	return nil
}

// unknownField is the error for a field name not in known.
func (p *jsonParser) unknownField(name string, off int64, path string, known []string, want string) *Error {
	for _, k := range known {
		if strings.EqualFold(name, k) {
			return p.errorAt(off, path, fmt.Sprintf("unknown field %s; field names are case-sensitive: did you mean %q?", quoteName(name), k), nil)
		}
	}
	return p.errorAt(off, path, fmt.Sprintf("unknown field %s; %s", quoteName(name), want), nil)
}

// describe names a token in an error message.
func describe(tok json.Token) string {
	switch t := tok.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprint(t)
	case json.Number:
		return "the number " + clip(string(t))
	case string:
		return "the string " + quoteName(t)
	case json.Delim:
		if t == '[' {
			return "an array"
		}
		return "an object"
	}
	return fmt.Sprintf("%T", tok)
}

// join returns the path of field in the object at path: path.field, or
// path["field"] when field is not a short identifier (it comes from the
// input, so it is quoted and shortened).
func join(path, field string) string {
	ident := field != "" && len(field) <= 64
	for _, c := range field {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			ident = false
		}
	}
	switch {
	case !ident:
		return path + "[" + quoteName(field) + "]"
	case path == "":
		return field
	}
	return path + "." + field
}

func parseJSON(data []byte) (*Book, error) {
	p := &jsonParser{data: data, lex: jsonLexer{data: data}}
	if !utf8.Valid(data) {
		off := 0
		for off < len(data) {
			r, size := utf8.DecodeRune(data[off:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			off += size
		}
		return nil, p.errorAt(int64(off)+1, "", "not valid UTF-8; save the file as UTF-8", nil)
	}
	if bytes.HasPrefix(data, []byte("\uFEFF")) {
		return nil, p.errorAt(1, "", byteOrderMark, nil)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &Error{Msg: `empty input; want a JSON object such as {"default": "token-bucket,5,10s"}`}
	}
	const bookWant = `a JSON object such as {"default": "token-bucket,5,10s", "apis": {"/login": "fixed-window,2,10s"}, "users": {"vip-1": "token-bucket,8,10s"}}`
	if _, err := p.open("", bookWant); err != nil {
		return nil, err
	}
	bd := newBuilder()
	seen := map[string]int64{}
	known := []string{"default", "apis", "users"}
	for p.lex.More() {
		key, off, err := p.key("")
		if err != nil {
			return nil, err
		}
		if err := p.dup(seen, key, off, ""); err != nil {
			return nil, err
		}
		switch key {
		case "default":
			if p.rules++; p.rules > MaxRules {
				return nil, p.errorAt(off, "default", fmt.Sprintf("too many rules; a book holds at most %d", MaxRules), nil)
			}
			l, err := p.limits("default")
			if err != nil {
				return nil, err
			}
			bd.add(Entry{Scope: Default, Limits: l}, "default") // cannot clash: dup saw every field
		case "apis":
			err = p.names(bd, API, "apis")
		case "users":
			err = p.names(bd, User, "users")
		default:
			err = p.unknownField(key, off, "", known, `want "default", "apis" or "users"`)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := p.close(""); err != nil {
		return nil, err
	}
	if tok, err := p.lex.Token(); err != io.EOF {
		what := "text"
		if err == nil {
			what = describe(tok)
		}
		// At the first byte after the object that is not space.
		return nil, p.errorAt(int64(p.lex.start)+1, "", fmt.Sprintf("%s after the end of the book's object; a JSON book is one object and nothing else", what), nil)
	}
	if !bd.seen {
		return nil, &Error{Msg: missingDefault}
	}
	return &bd.book, nil
}

// names reads the object of API or user rules in field.
func (p *jsonParser) names(bd *bookBuilder, s Scope, field string) error {
	example := `{"/login": "fixed-window,2,10s"}`
	if s == User {
		example = `{"vip-1": "token-bucket,8,10s"}`
	}
	if _, err := p.open(field, "an object from name to rule such as "+example+", or no "+field+" field at all"); err != nil {
		return err
	}
	seen := map[string]int64{}
	for p.lex.More() {
		name, off, err := p.key(field)
		if err != nil {
			return err
		}
		path := field + "[" + quoteName(name) + "]"
		if msg := checkName(s, name); msg != "" {
			return p.errorAt(off, path, msg, nil)
		}
		if first, ok := seen[name]; ok {
			return p.errorAt(off, path, fmt.Sprintf("duplicate name %s (first on line %d); each name may appear once", quoteName(name), p.errorAt(first, "", "", nil).Line), nil)
		}
		seen[name] = off
		if p.rules++; p.rules > MaxRules {
			return p.errorAt(off, path, fmt.Sprintf("too many rules; a book holds at most %d", MaxRules), nil)
		}
		l, err := p.limits(path)
		if err != nil {
			return err
		}
		bd.add(Entry{Scope: s, Name: name, Limits: l}, path) // cannot clash: seen saw every name
	}
	return p.close(field)
}

// limits reads the limits at path: rule text (one rule, or a composite's
// text form), the object form of a rule, or an array of rules.
func (p *jsonParser) limits(path string) (admit.Limits, error) {
	tok, off, err := p.next(path)
	if err != nil {
		return admit.Limits{}, err
	}
	switch t := tok.(type) {
	case string:
		l, err := admit.ParseLimits(t)
		if err != nil {
			return admit.Limits{}, p.errorAt(off, path, "", err)
		}
		return l, nil
	case json.Delim:
		switch t {
		case '{':
			r, err := p.ruleObject(path, off)
			if err != nil {
				return admit.Limits{}, err
			}
			l, err := admit.NewLimits(r)
			if err != nil {
				return admit.Limits{}, p.errorAt(off, path, "", err) // r is valid: not reached
			}
			return l, nil
		case '[':
			return p.composite(path, off)
		}
	}
	return admit.Limits{}, p.errorAt(off, path, fmt.Sprintf("%s is not a rule; %s", describe(tok), ruleWant), nil)
}

// composite reads an array of rules after its '[' (at offset open): the
// rules of a composite, or the one rule of a one-element array. An error
// about an element says which rule of how many it concerns.
func (p *jsonParser) composite(path string, open int64) (admit.Limits, error) {
	count := p.count(open)
	if count > admit.MaxLimits {
		return admit.Limits{}, p.errorAt(open, path, fmt.Sprintf("an array of %d rules; a composite holds at most %d", count, admit.MaxLimits), nil)
	}
	var rules []admit.Rule
	for i := 0; p.lex.More(); i++ {
		at := fmt.Sprintf("%s[%d]", path, i)
		if i == admit.MaxLimits {
			return admit.Limits{}, p.errorAt(open, path, fmt.Sprintf("an array of more than %d rules; a composite holds at most %d", admit.MaxLimits, admit.MaxLimits), nil)
		}
		tok, off, err := p.next(at)
		if err != nil {
			return admit.Limits{}, err
		}
		var r admit.Rule
		switch t := tok.(type) {
		case string:
			if r, err = admit.ParseRule(t); err != nil {
				if l, lerr := admit.ParseLimits(t); lerr == nil && l.Len() > 1 {
					return admit.Limits{}, ruleOf(i, count, p.errorAt(off, at, fmt.Sprintf("%s joins %d rules; %s: give each its own element", quoteName(t), l.Len(), elementWant), nil))
				}
				return admit.Limits{}, ruleOf(i, count, p.errorAt(off, at, "", err))
			}
		case json.Delim:
			if t != '{' {
				return admit.Limits{}, ruleOf(i, count, p.errorAt(off, at, fmt.Sprintf("%s is not a rule; %s", describe(tok), elementWant), nil))
			}
			if r, err = p.ruleObject(at, off); err != nil {
				return admit.Limits{}, ruleOf(i, count, err)
			}
		default:
			return admit.Limits{}, ruleOf(i, count, p.errorAt(off, at, fmt.Sprintf("%s is not a rule; %s", describe(tok), elementWant), nil))
		}
		for j, q := range rules {
			if q == r {
				return admit.Limits{}, ruleOf(i, count, p.errorAt(off, at, "", fmt.Errorf("%w: %v repeats rule %d; each rule of a composite must differ", admit.ErrInvalidRule, r, j+1)))
			}
		}
		rules = append(rules, r)
	}
	if err := p.close(path); err != nil {
		return admit.Limits{}, err
	}
	if len(rules) == 0 {
		return admit.Limits{}, p.errorAt(open, path, fmt.Sprintf(`an empty array is not a rule; want 1 to %d rules that all apply, such as ["token-bucket,10,1s", "fixed-window,1000,1h"]`, admit.MaxLimits), nil)
	}
	l, err := admit.NewLimits(rules...)
	if err != nil {
		return admit.Limits{}, p.errorAt(open, path, "", err) // every rule valid, none repeated: not reached
	}
	return l, nil
}

// count returns the number of elements of the array whose '[' ends at
// offset open, or -1 if the array does not read as JSON (the parse then
// reports why when it gets there). It reads the array a second time, which
// bounds its cost by the book's size.
func (p *jsonParser) count(open int64) int {
	if open < 1 || open > int64(len(p.data)) || p.data[open-1] != '[' {
		return -1
	}
	l := jsonLexer{data: p.data[open-1:]}
	if tok, err := l.Token(); tok != json.Delim('[') || err != nil {
		return -1
	}
	n := 0
	for ; l.More(); n++ {
		if err := l.skip(); err != nil {
			return -1
		}
	}
	if tok, err := l.Token(); tok != json.Delim(']') || err != nil {
		return -1
	}
	return n
}

// ruleOf prefixes the message of err, an error about the i-th rule of an
// array of count, with "rule i+1 of count". A one-element array is its
// rule, and its errors are that rule's; an array that does not read as JSON
// (count -1) has only the index in the error's path.
func ruleOf(i, count int, err error) error {
	e, ok := err.(*Error)
	if !ok || count <= 1 {
		return err
	}
	label := fmt.Sprintf("rule %d of %d", i+1, count)
	if e.Msg == "" {
		e.Msg = label
	} else {
		e.Msg = label + ": " + e.Msg
	}
	return e
}

// param is one field of an algoConfig object.
type param struct {
	name string
	val  json.Number
	off  int64
}

// ruleObject reads the object form of a rule after its '{' (at offset open).
func (p *jsonParser) ruleObject(path string, open int64) (admit.Rule, error) {
	var (
		alg          string
		algOff       int64
		params       []param
		cfgOff       int64
		seen         = map[string]int64{}
		cfgPath      = join(path, "algoConfig")
		algorithmErr = func(tok json.Token, off int64) error {
			return p.errorAt(off, join(path, "algorithm"), fmt.Sprintf("%s is not an algorithm; want one of %s", describe(tok), formNames()), nil)
		}
	)
	for p.lex.More() {
		key, off, err := p.key(path)
		if err != nil {
			return admit.Rule{}, err
		}
		if err := p.dup(seen, key, off, path); err != nil {
			return admit.Rule{}, err
		}
		switch key {
		case "algorithm":
			tok, off, err := p.next(join(path, key))
			if err != nil {
				return admit.Rule{}, err
			}
			s, ok := tok.(string)
			if !ok {
				return admit.Rule{}, algorithmErr(tok, off)
			}
			alg, algOff = s, off
		case "algoConfig":
			if cfgOff, err = p.open(cfgPath, `an object of the algorithm's parameters, such as {"maxRequests": 5, "windowMs": 1000}`); err != nil {
				return admit.Rule{}, err
			}
			cfgSeen := map[string]int64{}
			for p.lex.More() {
				name, off, err := p.key(cfgPath)
				if err != nil {
					return admit.Rule{}, err
				}
				if err := p.dup(cfgSeen, name, off, cfgPath); err != nil {
					return admit.Rule{}, err
				}
				tok, voff, err := p.next(join(cfgPath, name))
				if err != nil {
					return admit.Rule{}, err
				}
				n, ok := tok.(json.Number)
				if !ok {
					return admit.Rule{}, p.errorAt(voff, join(cfgPath, name), fmt.Sprintf("%s is not a number; want a number such as 10", describe(tok)), nil)
				}
				params = append(params, param{name, n, voff})
			}
			if err := p.close(cfgPath); err != nil {
				return admit.Rule{}, err
			}
		default:
			if err := p.unknownField(key, off, path, []string{"algorithm", "algoConfig"}, `a rule object has only "algorithm" and "algoConfig"`); err != nil {
				return admit.Rule{}, err
			}
		}
	}
	if err := p.close(path); err != nil {
		return admit.Rule{}, err
	}
	if algOff == 0 {
		return admit.Rule{}, p.errorAt(open, path, fmt.Sprintf(`missing field "algorithm"; want one of %s`, formNames()), nil)
	}
	var form objectForm
	for _, f := range objectForms {
		if f.name == alg {
			form = f
		}
	}
	if form.alg == 0 {
		for _, f := range objectForms {
			if strings.EqualFold(f.name, alg) {
				return admit.Rule{}, p.errorAt(algOff, join(path, "algorithm"), fmt.Sprintf("unknown algorithm %s; algorithm names are case-sensitive: did you mean %q?", quoteName(alg), f.name), nil)
			}
		}
		return admit.Rule{}, p.errorAt(algOff, join(path, "algorithm"), fmt.Sprintf("unknown algorithm %s; want one of %s", quoteName(alg), formNames()), nil)
	}
	if cfgOff == 0 {
		return admit.Rule{}, p.errorAt(open, path, fmt.Sprintf(`missing field "algoConfig"; %s`, form.wants()), nil)
	}
	var vals [2]param
	for _, pm := range params {
		i := 0
		for i < 2 && form.params[i] != pm.name {
			i++
		}
		if i == 2 {
			return admit.Rule{}, p.unknownField(pm.name, pm.off, cfgPath, form.params[:], form.wants())
		}
		vals[i] = pm
	}
	for i, v := range vals {
		if v.off == 0 {
			return admit.Rule{}, p.errorAt(cfgOff, cfgPath, fmt.Sprintf("missing field %q; %s", form.params[i], form.wants()), nil)
		}
	}
	r, bad, msg := form.rule(vals)
	if msg != "" {
		return admit.Rule{}, p.errorAt(vals[bad].off, join(cfgPath, vals[bad].name), msg, nil)
	}
	if err := r.Validate(); err != nil {
		return admit.Rule{}, p.errorAt(open, path, "as "+r.String(), err)
	}
	return r, nil
}

func formNames() string {
	names := make([]string, len(objectForms))
	for i, f := range objectForms {
		names[i] = fmt.Sprintf("%q", f.name)
	}
	return strings.Join(names, ", ")
}

// rule converts the form's two parameters to a rule. On error it returns
// which parameter is at fault and the message.
func (f objectForm) rule(vals [2]param) (admit.Rule, int, string) {
	first, msg := whole(vals[0].val, admit.MaxLimit)
	if msg != "" {
		return admit.Rule{}, 0, msg
	}
	if f.alg != admit.TokenBucket {
		ms, msg := whole(vals[1].val, math.MaxInt64/uint64(time.Millisecond))
		if msg != "" {
			return admit.Rule{}, 1, msg
		}
		return admit.Rule{Algorithm: f.alg, Limit: int(first), Window: time.Duration(ms) * time.Millisecond}, 0, ""
	}
	w, msg := refillWindow(first, string(vals[1].val))
	if msg != "" {
		return admit.Rule{}, 1, msg
	}
	return admit.Rule{Algorithm: admit.TokenBucket, Limit: int(first), Window: w}, 0, ""
}

// whole reads a JSON number that must be a whole number in [1, max].
func whole(n json.Number, max uint64) (uint64, string) {
	s := string(n)
	const want = "want a whole number such as 10, written without a fraction or an exponent"
	switch {
	case strings.HasPrefix(s, "-"):
		return 0, fmt.Sprintf("%s must be at least 1", clip(s))
	case strings.ContainsAny(s, ".eE"):
		return 0, fmt.Sprintf("%s is not accepted; %s", clip(s), want)
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v > max {
		return 0, fmt.Sprintf("%s exceeds the maximum %d", clip(s), max)
	}
	if v == 0 {
		return 0, "0 must be at least 1"
	}
	return v, ""
}

// maxRateDigits bounds the digits of a refill rate, to keep the exact
// arithmetic on it small.
const maxRateDigits = 40

// refillWindow returns the window in which a bucket of capacity tokens refills
// at rate tokens per second: capacity/rate seconds, exactly, or a message.
func refillWindow(capacity uint64, rate string) (time.Duration, string) {
	const want = "want a positive decimal number of tokens per second, such as 2 or 0.5, written without an exponent"
	switch {
	case strings.HasPrefix(rate, "-"):
		return 0, fmt.Sprintf("%s must be positive; %s", clip(rate), want)
	case strings.ContainsAny(rate, "eE"):
		return 0, fmt.Sprintf("%s is not accepted; %s", clip(rate), want)
	case len(rate) > maxRateDigits:
		return 0, fmt.Sprintf("%s has more than %d digits; %s", clip(rate), maxRateDigits, want)
	}
	intPart, frac, _ := strings.Cut(rate, ".")
	m, _ := new(big.Int).SetString(intPart+frac, 10) // digits only: JSON syntax checked it
	if m.Sign() == 0 {
		return 0, fmt.Sprintf("%s must be positive (a bucket that never refills is not a rate limit); %s", rate, want)
	}
	// capacity / (m / 10^len(frac)) seconds = capacity × 10^(9+len(frac)) / m ns.
	num := new(big.Int).Mul(new(big.Int).SetUint64(capacity), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(9+len(frac))), nil))
	q, rem := new(big.Int).QuoRem(num, m, new(big.Int))
	if rem.Sign() != 0 {
		half := strconv.FormatUint(capacity/2, 10)
		if capacity%2 == 1 {
			half += ".5"
		}
		return 0, fmt.Sprintf("the refill window capacity / refillRatePerSecond = %d / %s seconds is not a whole number of nanoseconds; choose a rate that divides capacity × 10^9 exactly, such as %d (a 1s window) or %s (2s)",
			capacity, rate, capacity, half)
	}
	if !q.IsInt64() {
		return 0, fmt.Sprintf("the refill window capacity / refillRatePerSecond = %d / %s seconds overflows a time.Duration (about 292 years); raise the rate", capacity, rate)
	}
	return time.Duration(q.Int64()), ""
}
