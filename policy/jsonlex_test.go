package policy

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// FuzzJSONLexer checks jsonLexer against encoding/json: it accepts a text
// exactly when json.Valid does, and reads the tokens json.Decoder reads, the
// values of strings and numbers included.
//
// Run it with: go test -run '^$' -fuzz '^FuzzJSONLexer$' -fuzztime 1m ./policy/
func FuzzJSONLexer(f *testing.F) {
	for _, s := range []string{
		`{"default": "token-bucket,5,10", "apis": {"/a": ["fixed-window,1,1s", {"algorithm": "TokenBucket", "algoConfig": {"capacity": 1, "refillRatePerSecond": 0.5}}]}}`,
		"{\n\"a\": 1,\n}", `[1,]`, `[,1]`, `{"a" 1}`, `{"a":1 "b":2}`, `{'a': 1}`, `{"a": tru}`, `{"a": nulls}`,
		`"\u0041\u00e9\ud83d\ude00\ud800\u0041\udc00\\\/\b\f\n\r\t\""`, `"\ud800\ud800"`, `"\u12"`, `"\x"`, "\"a\tb\"", "\"\xff\"",
		`-0`, `-`, `01`, `1.`, `.5`, `1e`, `1e+`, `1E-7`, `-1.5e300`, `1e400`, `0x10`, `+1`,
		`true`, `false`, `null`, ` `, ``, `{}`, `[]`, `[[[]]]`, `[{}]`, `{"a":{}}`, `]`, `}`, `{]`, `[}`, `{} {}`, `{} x`, "{}\n",
		"\uFEFF{}", `{"a":1}}`, `[1 2]`, `{"a":[1,{"b":null}],"c":"d"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if bytes.Count(data, []byte{'['})+bytes.Count(data, []byte{'{'}) >= 10000 {
			t.Skip("encoding/json stops at 10,000 levels of nesting; the lexer does not")
		}
		l := jsonLexer{data: data}
		err := l.skip()
		if err == nil {
			_, err = l.Token()
			if err == io.EOF {
				err = nil
			} else if err == nil {
				err = l.errorf(l.start, "a second value")
			}
		}
		require.Equal(t, json.Valid(data), err == nil, "jsonLexer and json.Valid disagree on %q: %v", data, err)
		if err != nil {
			var le *lexError
			require.ErrorAs(t, err, &le)
			require.True(t, 0 <= le.off && le.off <= max(len(data)-1, 0), "error offset %d in %d bytes", le.off, len(data))
			require.Less(t, len(le.msg), 200)
			return
		}
		if !utf8.Valid(data) {
			return // ParseJSON rejects it first; json.Decoder would replace the bytes
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		l = jsonLexer{data: data}
		for {
			want, werr := dec.Token()
			got, gerr := l.Token()
			require.Equal(t, werr == io.EOF, gerr == io.EOF, "end of %q", data)
			if werr == io.EOF {
				return
			}
			require.NoError(t, werr)
			require.NoError(t, gerr)
			require.Equal(t, want, got, "a token of %q", data)
			require.Equal(t, dec.InputOffset(), int64(l.pos), "the offset after %v in %q", got, data)
		}
	})
}

// TestJSONLexerCount: count reads an array's elements however deep they
// nest, and -1 for an array that is not JSON.
func TestJSONLexerCount(t *testing.T) {
	for in, want := range map[string]int{
		`[]`: 0, `[1]`: 1, `[1, [2, 3], {"a": [4]}, "x"]`: 4, `[1,]`: -1, `[1, 2`: -1, `[[1, 2]`: -1, strings.Repeat("[", 20) + strings.Repeat("]", 20): 1,
	} {
		p := &jsonParser{data: []byte(in)}
		require.Equal(t, want, p.count(1), "count(%q)", in)
	}
}
