package httplimit_test

import (
	"fmt"
	"strconv"
	"strings"
)

// This file holds a small parser of the structured-field lists the RateLimit
// fields are (RFC 9651, section 4.2): enough to check that what the
// middleware writes parses, and to read the draft's own examples with the
// same code, so that the tests compare meaning as well as bytes.

// sfItem is one member of a list: a bare item with parameters, in order.
type sfItem struct {
	Value  any // string, int64, sfToken or sfBytes
	Params []sfParam
}

type sfParam struct {
	Key   string
	Value any // as sfItem.Value, or true for a bare key
}

type (
	sfToken string
	sfBytes string // the base64 text between the colons
)

// param returns the value of the parameter key, or nil.
func (it sfItem) param(key string) any {
	for _, p := range it.Params {
		if p.Key == key {
			return p.Value
		}
	}
	return nil
}

// parseSFList parses the field lines of a List field, joined as RFC 9651
// says (with ", ").
func parseSFList(lines []string) ([]sfItem, error) {
	s := strings.Join(lines, ", ")
	p := &sfParser{s: strings.TrimLeft(s, " ")}
	var out []sfItem
	for p.i < len(p.s) {
		it, err := p.item()
		if err != nil {
			return nil, err
		}
		out = append(out, it)
		p.ows()
		if p.i == len(p.s) {
			return out, nil
		}
		if p.s[p.i] != ',' {
			return nil, fmt.Errorf("at %d of %q: want ',' after a member", p.i, p.s)
		}
		p.i++
		p.ows()
		if p.i == len(p.s) {
			return nil, fmt.Errorf("%q: trailing comma", p.s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty list")
	}
	return out, nil
}

type sfParser struct {
	s string
	i int
}

func (p *sfParser) ows() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *sfParser) item() (sfItem, error) {
	v, err := p.bare()
	if err != nil {
		return sfItem{}, err
	}
	it := sfItem{Value: v}
	for p.i < len(p.s) && p.s[p.i] == ';' {
		p.i++
		for p.i < len(p.s) && p.s[p.i] == ' ' {
			p.i++
		}
		k := p.key()
		if k == "" {
			return sfItem{}, fmt.Errorf("at %d of %q: want a parameter key", p.i, p.s)
		}
		var pv any = true
		if p.i < len(p.s) && p.s[p.i] == '=' {
			p.i++
			if pv, err = p.bare(); err != nil {
				return sfItem{}, err
			}
		}
		it.Params = append(it.Params, sfParam{k, pv})
	}
	return it, nil
}

func (p *sfParser) key() string {
	j := p.i
	for j < len(p.s) {
		c := p.s[j]
		if ('a' <= c && c <= 'z') || c == '*' || (j > p.i && (('0' <= c && c <= '9') || c == '_' || c == '-' || c == '.')) {
			j++
			continue
		}
		break
	}
	k := p.s[p.i:j]
	p.i = j
	return k
}

func (p *sfParser) bare() (any, error) {
	if p.i == len(p.s) {
		return nil, fmt.Errorf("%q: want an item at the end", p.s)
	}
	c := p.s[p.i]
	switch {
	case c == '"':
		var sb strings.Builder
		for j := p.i + 1; j < len(p.s); j++ {
			switch c := p.s[j]; {
			case c == '\\':
				if j+1 == len(p.s) || (p.s[j+1] != '"' && p.s[j+1] != '\\') {
					return nil, fmt.Errorf("at %d of %q: bad escape", j, p.s)
				}
				j++
				sb.WriteByte(p.s[j])
			case c == '"':
				p.i = j + 1
				return sb.String(), nil
			case c < 0x20 || c > 0x7e:
				return nil, fmt.Errorf("at %d of %q: byte %#x in a string", j, p.s, c)
			default:
				sb.WriteByte(c)
			}
		}
		return nil, fmt.Errorf("%q: unterminated string", p.s)
	case c == '-' || ('0' <= c && c <= '9'):
		j := p.i + 1
		for j < len(p.s) && '0' <= p.s[j] && p.s[j] <= '9' {
			j++
		}
		if j-p.i > 15+btoi(c == '-') {
			return nil, fmt.Errorf("%q: integer of more than 15 digits", p.s[p.i:j])
		}
		n, err := strconv.ParseInt(p.s[p.i:j], 10, 64)
		if err != nil {
			return nil, err
		}
		p.i = j
		return n, nil
	case c == ':':
		j := strings.IndexByte(p.s[p.i+1:], ':')
		if j < 0 {
			return nil, fmt.Errorf("%q: unterminated byte sequence", p.s)
		}
		b := p.s[p.i+1 : p.i+1+j]
		p.i += j + 2
		return sfBytes(b), nil
	case ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || c == '*':
		j := p.i + 1
		for j < len(p.s) && (isTcharTest(p.s[j]) || p.s[j] == ':' || p.s[j] == '/') {
			j++
		}
		t := p.s[p.i:j]
		p.i = j
		return sfToken(t), nil
	}
	return nil, fmt.Errorf("at %d of %q: not an item", p.i, p.s)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func isTcharTest(c byte) bool {
	return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') ||
		strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
