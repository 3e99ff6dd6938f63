package policy

// The parser of a JSON book: a walk over its tokens that reads the default,
// "apis" and "users" fields and each entry's limits (rule text, the object
// form of jsonrule.go, an array of rules), and places every error at its
// line and path.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/admit-go/admit"
)

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
