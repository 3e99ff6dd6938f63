package policy_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit/policy"
)

// TestConfigurationDocMessages: the error messages docs/configuration.md
// quotes in full are the ones the parsers return, byte for byte.
func TestConfigurationDocMessages(t *testing.T) {
	data, err := os.ReadFile("../docs/configuration.md")
	require.NoError(t, err)
	doc := string(data)
	const def = "default = token-bucket,5,10\n"
	long := strings.Repeat("#", policy.MaxLineBytes+1)
	for _, tc := range []struct {
		name, in string
		json     bool
	}{
		{"no =", def + "api./login fixed-window,2,10\n", false},
		{"empty name", def + "api. = token-bucket,1,1\n", false},
		{"duplicate", def + "api./login = fixed-window,2,10\napi./login = fixed-window,2,10\n", false},
		{"not UTF-8", def + "user.\xff = token-bucket,1,1\n", false},
		{"byte order mark", "\uFEFF" + def, false},
		{"a line of MaxLineBytes+1 bytes", def + long + "\n", false},
		{"the last line, unterminated", def + long, false},
		{"a line of MaxLineBytes+1 bytes and CRLF", def + long + "\r\n", false},
		{"a longer line", def + long + "#\n", false},
		{"JSON byte order mark", "\uFEFF{\"default\": \"token-bucket,5,10\"}", true},
		{"JSON empty", " ", true},
		{"JSON syntax", "{\n\"default\": \"token-bucket,5,10\",\n}", true},
		{"JSON ends early", `{"default": "token-bucket,5,10"`, true},
		{"bad rule of a composite", def + "api./search = token-bucket,10,1s + fixed-windw,1000,1h\n", false},
		{"a rule twice in a composite", def + "user.u = token-bucket,10,1s + fixed-window,5,1h + token-bucket,10,1\n", false},
		{"more than 8 rules", def + "api.x = " + strings.TrimSuffix(strings.Repeat("token-bucket,1,1+", 9), "+") + "\n", false},
		{"JSON bad rule of a composite", "{\"default\": \"token-bucket,5,10\",\n \"apis\": {\"/search\": [\"token-bucket,10,1s\",\n \"fixed-window,0,1h\"]}}", true},
		{"JSON bad parameter in a composite", `{"default": ["token-bucket,10,1s", {"algorithm": "FixedWindow", "algoConfig": {"maxRequests": 0, "windowMs": 1000}}, "sliding-log,5,1s"]}`, true},
		{"JSON a rule twice in a composite", "{\"default\": [\"token-bucket,10,1s\", \"fixed-window,5,1h\",\n{\"algorithm\": \"TokenBucket\", \"algoConfig\": {\"capacity\": 10, \"refillRatePerSecond\": 10}}]}", true},
		{"JSON empty array", `{"default": "token-bucket,5,10", "users": {"u": []}}`, true},
		{"JSON more than 8 rules", `{"default": ["fixed-window,1,1s", "fixed-window,2,1s", "fixed-window,3,1s", "fixed-window,4,1s", "fixed-window,5,1s", "fixed-window,6,1s", "fixed-window,7,1s", "fixed-window,8,1s", "fixed-window,9,1s"]}`, true},
	} {
		var err error
		if tc.json {
			_, err = policy.ParseJSON(strings.NewReader(tc.in))
		} else {
			_, err = policy.Parse(strings.NewReader(tc.in))
		}
		require.Errorf(t, err, "%s", tc.name)
		assert.Truef(t, strings.Contains(doc, "`"+err.Error()+"`"), "%s: docs/configuration.md does not quote the message `%s`", tc.name, err)
	}
}
