package redisstore

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/admit-go/admit/clock"
)

// TestBreakerOneProbePerBackoff plays, step by step, the interleaving that
// let two probes through one backoff: a caller reads until once the
// backoff has passed, a probe fails and clears probing, and the caller
// then takes probing (claim). It must be refused: the failed probe's new
// until has not passed.
func TestBreakerOneProbePerBackoff(t *testing.T) {
	c := clock.NewFake()
	b := breaker{backoff: time.Second, clock: c}
	down := errors.New("connection refused")
	b.exit(false, down) // a call fails: open until 1s
	probe, pass := b.enter()
	assert.False(t, pass, "within the backoff")
	assert.False(t, probe)

	c.Advance(time.Second)
	first, pass := b.enter()
	assert.True(t, first && pass, "the backoff has passed: one probe")
	// A second caller has read until (1s, passed) and is about to claim;
	// another sees the probe on its way.
	probe, pass = b.enter()
	assert.False(t, probe || pass, "a probe is on its way")
	now := c.Now()
	b.exit(true, down) // the probe fails: open until 2s, probing cleared
	probe, pass = b.claim(now)
	assert.False(t, probe || pass, "the failed probe's new until has not passed")
	probe, pass = b.enter()
	assert.False(t, probe || pass)

	c.Advance(time.Second)
	probe, pass = b.enter()
	assert.True(t, probe && pass, "the next backoff has passed: the next probe")
	b.exit(true, nil) // it succeeds: closed
	probe, pass = b.enter()
	assert.True(t, pass && !probe, "closed: every call goes to Redis")
}
