package redisstore

import (
	"time"

	"github.com/admit-go/admit/clock"
)

// TestSlack is the slack WithTestClock adds to every key's time to live,
// where a limiter adds 100 ms: longer than any test runs.
const TestSlack = 24 * time.Hour

// WithTestClock is WithClock(c) for a test that moves c, a clock.Fake,
// while real time runs on: every key the limiter writes lives TestSlack
// longer than its state needs, so that Redis, which expires keys on its
// own real-time clock, never drops a state that the fake clock still
// holds, however slowly the machine runs the test. A limiter's expiry is
// lossless only on a clock that keeps pace with real time (docs/redis.md,
// "Expiry is eviction, losslessly"); a frozen fake clock does not. The
// tests of the time to live itself use WithClock.
func WithTestClock(c clock.Clock) Option {
	return func(cfg *config) error {
		if err := WithClock(c)(cfg); err != nil {
			return err
		}
		cfg.slack = TestSlack
		return nil
	}
}
