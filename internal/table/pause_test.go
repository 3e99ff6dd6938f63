//go:build !admittest

package table

import (
	"testing"
	"unsafe"
)

// TestNoPausePointInNormalBuild: the tests' pause point is compiled only
// with the tag admittest; in a normal build it takes no space in a Table
// and every check of it is a constant false, so the hot paths load nothing.
func TestNoPausePointInNormalBuild(t *testing.T) {
	if pauseEnabled {
		t.Fatal("pauseEnabled is true in a build without the tag admittest")
	}
	if n := unsafe.Sizeof(pausePoint{}); n != 0 {
		t.Fatalf("a normal build's pausePoint takes %d bytes, want 0", n)
	}
}
