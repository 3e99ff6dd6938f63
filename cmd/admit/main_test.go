package main

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/demo.golden")

// TestDemoGolden pins the walkthrough's output: the clock is fake, so every run
// prints exactly the same thing, and the numbers are the design notes' numbers.
func TestDemoGolden(t *testing.T) {
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"demo"}, &out, &errOut), errOut.String())
	if *update {
		require.NoError(t, os.WriteFile("testdata/demo.golden", out.Bytes(), 0o644))
	}
	want, err := os.ReadFile("testdata/demo.golden")
	require.NoError(t, err)
	assert.Equal(t, string(want), out.String())
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{nil, {"nope"}, {"demo", "extra"}} {
		var out, errOut bytes.Buffer
		assert.Equal(t, 2, run(args, &out, &errOut), "run(%q)", args)
		assert.NotEmpty(t, errOut.String(), "run(%q) explains itself", args)
	}
	var out, errOut bytes.Buffer
	assert.Equal(t, 0, run([]string{"help"}, &out, &errOut))
	assert.Contains(t, out.String(), "demo")
}
