package table

import (
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/hook"
	"github.com/admit-go/admit/internal/kernel"
)

// The hottest path of the table: a token bucket's Allow on a key the table
// holds. Everything else a token bucket's table does (reservations,
// cancellations, the held protocol) is in reserve.go; the general path of
// every algorithm is in decide.go.

// Allow is AllowN(key, 1), the call most keyed limiters see most often, with
// the token bucket's one-token path written out in one frame: the clock,
// the hash, the probe, one load of the slot's word, kernel.AllowOne and one
// CAS (decide's fast path; see there for the CAS and where an admission
// takes effect). Whatever it declines (a denial, a sentinel, a lost CAS, a
// reading AllowOne does not take, a missing key, a test's pause in builds
// with the tag admittest) goes to decideAt with the same reading and hash,
// which decides on what it loads again.
func (r reserver) Allow(key string) (d admit.Decision) {
	t := r.Table
	var now time.Duration
	if t.clock.Sys {
		now = clock.System().Now() // devirtualized: see clockref.Ref
	} else {
		now = t.now()
	}
	h, k0, k1 := t.hash(key)
	if !pauseEnabled || !t.pause.armed() {
		if tb := t.shards[h>>t.shift].tab.Load(); tb != nil {
			var i uint64
			var ok bool
			if t.hashed {
				i, ok = tb.firstHashed(tagOf(h), t.sbits)
			} else {
				i, ok = tb.first(tagOf(h), k0, k1, t.sbits)
			}
			if !ok {
				i, ok = tb.find(tagOf(h), k0, k1, key, t.hashed, t.sbits)
			}
			if ok {
				hook.Between(hook.AfterLookup)
				p := &tb.slot(i)[1]
				if old := p.Load(); old-kernel.TokenBucketTomb > kernel.TokenBucketHeld-kernel.TokenBucketTomb {
					if nw, owed, ok := t.tb.AllowOne(old, now); ok {
						hook.Between(hook.BeforeCAS)
						if p.CompareAndSwap(old, nw) {
							d.Allowed, d.Limit = true, t.limit
							d.Remaining, d.ResetAfter = t.tb.OneVerdict(owed)
							return d
						}
					}
				}
			}
		}
	}
	v, moved := t.decideAt(key, h, k0, k1, now, 1)
	if moved {
		return t.redirect(key, 1)
	}
	d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = v.Allowed, t.limit, v.Remaining, v.RetryAfter, v.ResetAfter
	return d
}
