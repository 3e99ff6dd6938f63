package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonLexer reads the tokens of a JSON text one at a time, as
// json.Decoder.Token does (the same token types: json.Delim for brackets,
// string, json.Number, bool, nil for null; commas and colons consumed), and
// checks the grammar as it goes.
//
// It exists for its syntax errors. encoding/json's place and word them
// differently from one Go release to the next: for `{"a": 1,` and a '}' on
// the next line, Go 1.26 reports the '}' and Go 1.27 the ',' a line
// earlier. A rule book's error must name the same line, in the same words,
// on every Go release, so the lexer decides both:
//
//   - a text that stops being JSON is reported at its first byte that no
//     JSON text could have there (the '}' after a trailing ',', the '"' of a
//     field whose ',' is missing), the convention of Go 1.26 and of most
//     JSON tools;
//   - a text that ends early is reported at its last byte that is not
//     space, where it breaks off, rather than on a line past its end.
//
// A jsonLexer never reads past data, holds nothing but positions, its
// state and the stack of open objects and arrays, and accepts exactly the
// texts json.Valid accepts (FuzzJSONLexer checks it), nesting aside: it sets
// no depth limit, where encoding/json stops at 10,000 (a rule book nests
// four deep at most, and its size is bounded).
type jsonLexer struct {
	data  []byte
	pos   int      // the next byte to read
	start int      // the first byte of the last token read (or of the error)
	state lexState // what may come next
	open  []byte   // the '{' or '[' of each open object or array, innermost last
	comma int      // the offset of the last ',' read
}

// lexState is what a jsonLexer expects next.
type lexState uint8

const (
	lexValue      lexState = iota // a value: the text's, or a field's after ':'
	lexFirstElem                  // after '[': a value or ']'
	lexElem                       // after ',' in an array: a value
	lexAfterElem                  // after an element: ',' or ']'
	lexFirstField                 // after '{': a field name or '}'
	lexField                      // after ',' in an object: a field name
	lexColon                      // after a field name: ':'
	lexAfterField                 // after a field's value: ',' or '}'
	lexDone                       // after the text's value: space, or another value
)

// lexError is a syntax error at data[off], or at the end of the input (off
// is then the last byte that is not space).
type lexError struct {
	off int
	msg string
}

func (e *lexError) Error() string { return e.msg }

// valueWant says what a value may be, for syntax errors.
const valueWant = "want a string in double quotes, a number, an object, an array, true, false or null"

// Token returns the next token; io.EOF after the text's value when only
// space follows; a *lexError when the text is not JSON.
func (l *jsonLexer) Token() (json.Token, error) {
	for {
		l.skipSpace()
		l.start = l.pos
		if l.pos == len(l.data) {
			if l.state == lexDone {
				return nil, io.EOF
			}
			return nil, l.endError()
		}
		c := l.data[l.pos]
		switch l.state {
		case lexValue, lexDone:
			return l.value()
		case lexFirstElem, lexElem:
			if c == ']' {
				if l.state == lexElem {
					return nil, l.trailingComma("element")
				}
				return l.close(), nil
			}
			return l.value()
		case lexAfterElem, lexAfterField:
			end, what := byte(']'), "an element of an array"
			if l.state == lexAfterField {
				end, what = '}', "a field's value"
			}
			switch c {
			case ',':
				l.comma = l.pos
				l.pos++
				if l.state == lexAfterElem {
					l.state = lexElem
				} else {
					l.state = lexField
				}
				continue
			case end:
				return l.close(), nil
			}
			return nil, l.errorf(l.pos, "invalid character %s after %s; want ',' or '%c'", l.char(l.pos), what, end)
		case lexFirstField, lexField:
			switch {
			case c == '"':
				s, err := l.str()
				if err != nil {
					return nil, err
				}
				l.state = lexColon
				return s, nil
			case c == '}' && l.state == lexFirstField:
				return l.close(), nil
			case c == '}':
				return nil, l.trailingComma("field")
			}
			return nil, l.errorf(l.pos, "invalid character %s where a field name was expected; want a name in double quotes", l.char(l.pos))
		case lexColon:
			if c != ':' {
				return nil, l.errorf(l.pos, "invalid character %s after a field name; want ':'", l.char(l.pos))
			}
			l.pos++
			l.state = lexValue
		}
	}
}

// More reports whether the current array or object has another element,
// as json.Decoder.More does: false at its closing bracket or at the end of
// the input (where Token then reports the error).
func (l *jsonLexer) More() bool {
	l.skipSpace()
	return l.pos < len(l.data) && l.data[l.pos] != ']' && l.data[l.pos] != '}'
}

// skip reads the value that starts with the next token, however deep.
func (l *jsonLexer) skip() error {
	depth := 0
	for {
		tok, err := l.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

func (l *jsonLexer) skipSpace() {
	for l.pos < len(l.data) {
		switch l.data[l.pos] {
		case ' ', '\t', '\n', '\r':
			l.pos++
		default:
			return
		}
	}
}

// value reads a value that starts at data[pos], not past the end.
func (l *jsonLexer) value() (json.Token, error) {
	c := l.data[l.pos]
	switch c {
	case '{', '[':
		l.pos++
		l.open = append(l.open, c)
		l.state = lexFirstField
		if c == '[' {
			l.state = lexFirstElem
		}
		return json.Delim(c), nil
	case '"':
		s, err := l.str()
		if err != nil {
			return nil, err
		}
		l.afterValue()
		return s, nil
	case 't', 'f', 'n':
		word, tok := "null", json.Token(nil)
		switch c {
		case 't':
			word, tok = "true", true
		case 'f':
			word, tok = "false", false
		}
		for i := 1; i < len(word); i++ {
			switch {
			case l.pos+i == len(l.data):
				return nil, l.endError()
			case l.data[l.pos+i] != word[i]:
				return nil, l.errorf(l.pos+i, "invalid character %s in the literal %s", l.char(l.pos+i), word)
			}
		}
		l.pos += len(word)
		l.afterValue()
		return tok, nil
	}
	if c == '-' || '0' <= c && c <= '9' {
		return l.number()
	}
	return nil, l.errorf(l.pos, "invalid character %s where a value was expected; %s", l.char(l.pos), valueWant)
}

// number reads a number at data[pos]: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (l *jsonLexer) number() (json.Token, error) {
	i := l.pos
	digits := func() int { // skips digits, returns how many
		n := 0
		for ; i < len(l.data) && '0' <= l.data[i] && l.data[i] <= '9'; i++ {
			n++
		}
		return n
	}
	// need reads at least one digit after data[i-1].
	need := func() error {
		switch {
		case i == len(l.data):
			return l.endError()
		case digits() == 0:
			return l.errorf(i, "invalid character %s in a number after '%c'; want a digit", l.char(i), l.data[i-1])
		}
		return nil
	}
	if l.data[i] == '-' {
		i++
	}
	if i < len(l.data) && l.data[i] == '0' {
		i++ // a leading 0 is the whole integer part
	} else if err := need(); err != nil {
		return nil, err
	}
	if i < len(l.data) && l.data[i] == '.' {
		i++
		if err := need(); err != nil {
			return nil, err
		}
	}
	if i < len(l.data) && (l.data[i] == 'e' || l.data[i] == 'E') {
		i++
		if i < len(l.data) && (l.data[i] == '+' || l.data[i] == '-') {
			i++
		}
		if err := need(); err != nil {
			return nil, err
		}
	}
	n := json.Number(l.data[l.pos:i])
	l.pos = i
	l.afterValue()
	return n, nil
}

// str reads a string at data[pos] and returns its value, escapes decoded as
// encoding/json decodes them (a lone surrogate is U+FFFD).
func (l *jsonLexer) str() (string, error) {
	i, escaped := l.pos+1, false
	for {
		if i == len(l.data) {
			return "", l.endError()
		}
		switch c := l.data[i]; {
		case c == '"':
			raw := l.data[l.pos+1 : i]
			l.pos = i + 1
			if !escaped {
				return string(raw), nil
			}
			return unescape(raw), nil
		case c == '\\':
			escaped = true
			i++
			if i == len(l.data) {
				return "", l.endError()
			}
			switch l.data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				for k := 1; k <= 4; k++ {
					switch {
					case i+k == len(l.data):
						return "", l.endError()
					case !isHex(l.data[i+k]):
						return "", l.errorf(i+k, `invalid character %s in a \u escape; want four hexadecimal digits`, l.char(i+k))
					}
				}
				i += 5
			default:
				r, _ := utf8.DecodeRune(l.data[i:])
				return "", l.errorf(i, `invalid escape '\%c' in a string; want \", \\, \/, \b, \f, \n, \r, \t, or \u and four hexadecimal digits`, r)
			}
		case c < 0x20:
			return "", l.errorf(i, `invalid character %s in a string; want it escaped, such as \n for a line break`, l.char(i))
		default:
			i++
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// unescape decodes the escapes of raw, the checked inside of a string.
func unescape(raw []byte) string {
	b := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		if raw[i] != '\\' {
			b = append(b, raw[i])
			i++
			continue
		}
		c := raw[i+1]
		i += 2
		switch c {
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r := hex4(raw[i:])
			i += 4
			if utf16.IsSurrogate(r) {
				// A pair is one rune; anything else is U+FFFD, and the
				// escape after it is read on its own.
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					if pair := utf16.DecodeRune(r, hex4(raw[i+2:])); pair != unicode.ReplacementChar {
						r = pair
						i += 6
					} else {
						r = unicode.ReplacementChar
					}
				} else {
					r = unicode.ReplacementChar
				}
			}
			b = utf8.AppendRune(b, r)
		default: // '"', '\\', '/'
			b = append(b, c)
		}
	}
	return string(b)
}

// hex4 reads the four hexadecimal digits that begin h (checked).
func hex4(h []byte) rune {
	v, _ := strconv.ParseUint(string(h[:4]), 16, 32)
	return rune(v)
}

// close reads the ']' or '}' at data[pos] that closes the innermost open
// array or object (the caller checked which).
func (l *jsonLexer) close() json.Token {
	c := l.data[l.pos]
	l.pos++
	l.open = l.open[:len(l.open)-1]
	l.afterValue()
	return json.Delim(c)
}

// afterValue sets what may follow a value that was just read.
func (l *jsonLexer) afterValue() {
	switch {
	case len(l.open) == 0:
		l.state = lexDone
	case l.open[len(l.open)-1] == '[':
		l.state = lexAfterElem
	default:
		l.state = lexAfterField
	}
}

// trailingComma is the error for the bracket at data[pos] after a ','.
func (l *jsonLexer) trailingComma(what string) *lexError {
	c := l.data[l.pos]
	after := "','"
	if bytes.IndexByte(l.data[l.comma:l.pos], '\n') >= 0 {
		after = fmt.Sprintf("the ',' on line %d", 1+bytes.Count(l.data[:l.comma], []byte{'\n'}))
	}
	return l.errorf(l.pos, "'%c' after %s; want another %s, or no ',' before the '%c'", c, after, what, c)
}

// endError is the error for input that ends before the text's value does,
// at its last byte that is not space.
func (l *jsonLexer) endError() *lexError {
	off := len(bytes.TrimRight(l.data, " \t\r\n")) - 1
	return &lexError{off: max(off, 0), msg: "unexpected end of input"}
}

func (l *jsonLexer) errorf(off int, format string, args ...any) *lexError {
	return &lexError{off: off, msg: fmt.Sprintf(format, args...)}
}

// char quotes the character at data[off] for a message: '}', '\n', '«'.
func (l *jsonLexer) char(off int) string {
	r, _ := utf8.DecodeRune(l.data[off:])
	return strconv.QuoteRune(r)
}
