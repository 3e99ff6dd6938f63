package redisstore_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: a
// client's, a timeout's or a test server's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
