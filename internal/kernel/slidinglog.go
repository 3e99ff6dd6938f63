package kernel

import (
	"time"

	"github.com/admit-go/admit"
)

// SlidingLog is the sliding-log kernel: an admission at effective time t counts
// against requests in [t, t+W) and expires at exactly t+W, so no span of length
// W ever holds more than Limit admissions. Denials are never recorded (a flood
// of denied requests cannot lock a key out).
type SlidingLog struct {
	limit  int64
	window int64
}

// Log is one key's record of unexpired admissions: a ring buffer of Limit
// timestamps, in ascending order from head. The zero value is an empty log; the
// ring is allocated on the key's first admission, at exactly Limit entries.
// Expired entries are dropped lazily, by the next admission.
//
// A log that a change of limits carried (Convert) may hold more entries
// than Limit: the ring keeps the newest Limit, and extra counts the rest as
// copies of the newest entry (later than their own readings, so never
// kinder), expiring with it. Such a log denies every request until enough
// of it expires, and the next admission writes the copies into the ring,
// which then has room for them (live + n <= Limit).
type Log struct {
	ts    []time.Duration // ring; len(ts) == limit once allocated
	head  int             // index of the oldest entry
	size  int             // entries in use, from head (some may have expired)
	extra int64           // copies of the newest entry beyond the ring; 0 unless carried past Limit
}

// Len returns how many timestamps the log holds, expired ones included.
func (l *Log) Len() int { return l.size + int(l.extra) }

// NewSlidingLog returns the kernel for rule, which must be valid.
func NewSlidingLog(rule admit.Rule) *SlidingLog {
	return &SlidingLog{limit: int64(rule.Limit), window: int64(rule.Window)}
}

func (l *Log) at(i int) int64 {
	j := l.head + i
	if j >= len(l.ts) {
		j -= len(l.ts)
	}
	return int64(l.ts[j])
}

// expired reports whether an entry at ts has expired at effective time eff,
// which is never older than ts: eff - ts >= W, computed without overflow.
func (k *SlidingLog) expired(ts, eff int64) bool {
	d := eff - ts
	return d < 0 || d >= k.window // d < 0 only if the difference overflowed
}

// scan returns the effective time of reading now (the newest entry if now is
// older) and the number of expired entries at the head of the log, found by
// binary search since the log is sorted.
func (k *SlidingLog) scan(l *Log, now int64) (eff int64, dead int) {
	eff = now
	if l.size == 0 {
		return eff, 0
	}
	if newest := l.at(l.size - 1); newest > eff {
		eff = newest
	}
	lo, hi := 0, l.size // entries [0, lo) expired, [hi, size) live
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if k.expired(l.at(mid), eff) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return eff, lo
}

// Allow implements [Kernel]. It writes the log only when it admits n > 0, and it
// writes n entries, one per admitted request.
func (k *SlidingLog) Allow(l *Log, now time.Duration, n int) (d admit.Decision) {
	k.Decide(l, now, n).fill(&d, int(k.limit))
	return d
}

// Decide is Allow without the Limit, for hot paths (see [Verdict]).
func (k *SlidingLog) Decide(l *Log, now time.Duration, n int) Verdict {
	now = clampTime(now)
	eff, dead := k.scan(l, int64(now))
	live := l.live(dead)
	if n < 0 || int64(n) > k.limit {
		return Verdict{RetryAfter: admit.Never, ResetAfter: time.Duration(k.untilEmpty(l, live, int64(now)))}
	}
	if n > 0 && live+int64(n) > k.limit { // a probe passes, even past a carried Limit
		// The (live+n-limit)-th oldest live entry must expire first: in
		// the ring, or one of the extra copies of the newest.
		oldest := l.at(l.size - 1)
		if i := live + int64(n) - k.limit - 1; i < int64(l.size-dead) {
			oldest = l.at(dead + int(i))
		}
		return Verdict{
			RetryAfter: time.Duration(wait(addSat(oldest, k.window), int64(now))),
			ResetAfter: time.Duration(k.untilEmpty(l, live, int64(now))),
		}
	}
	if n > 0 {
		if l.ts == nil {
			l.ts = make([]time.Duration, k.limit)
		}
		l.head += dead
		if l.head >= len(l.ts) {
			l.head -= len(l.ts)
		}
		l.size -= dead
		if l.size == 0 {
			l.extra = 0 // the copies expired with the newest entry
		} else if l.extra > 0 { // a carried log's copies of its newest entry, into the ring
			newest := time.Duration(l.at(l.size - 1))
			for ; l.extra > 0; l.extra-- {
				l.push(newest)
			}
		}
		for range n {
			l.push(time.Duration(eff))
		}
		live += int64(n)
	}
	return Verdict{
		Allowed:    true,
		Remaining:  int(max(0, k.limit-live)), // a probe of a carried log may find more than Limit
		ResetAfter: time.Duration(k.untilEmpty(l, live, int64(now))),
	}
}

// push appends an entry at t to the ring, which has room for it.
func (l *Log) push(t time.Duration) {
	j := l.head + l.size
	if j >= len(l.ts) {
		j -= len(l.ts)
	}
	l.ts[j] = t
	l.size++
}

// live returns the live entries of a log whose dead oldest entries scan
// counted, the extra copies of a live newest entry included.
func (l *Log) live(dead int) int64 {
	if dead == l.size {
		return 0
	}
	return int64(l.size-dead) + l.extra
}

// live returns the entries of l live at reading now.
func (k *SlidingLog) live(l *Log, now int64) int64 {
	_, dead := k.scan(l, now)
	return l.live(dead)
}

// carried returns the log of a part with whole (>= 1) requests in use at
// reading now (Convert): the newest whole live entries of ol, the log of
// the sliding-log kernel old (nil, or ol nil, when the source has no log),
// padded with entries at now (or at ol's newest, if later) when ol has
// fewer. Past Limit entries, the ring keeps the newest Limit and extra
// counts the rest (see Log).
func (k *SlidingLog) carried(old *SlidingLog, ol *Log, now time.Duration, whole int64) *Log {
	var stamps []time.Duration
	if old != nil && ol != nil {
		_, dead := old.scan(ol, int64(now))
		for i := dead; i < ol.size; i++ {
			stamps = append(stamps, time.Duration(ol.at(i)))
		}
		if dead < ol.size { // its copies of the newest, as many as can be kept
			for range min(ol.extra, whole) {
				stamps = append(stamps, stamps[len(stamps)-1])
			}
		}
	}
	if int64(len(stamps)) > whole {
		stamps = stamps[int64(len(stamps))-whole:]
	}
	eff := now
	if len(stamps) > 0 {
		eff = max(eff, stamps[len(stamps)-1])
	}
	ring := min(whole, k.limit)
	pad := min(whole-int64(len(stamps)), ring) // the padding's entries the ring keeps
	keep := stamps[int64(len(stamps))-(ring-pad):]
	l := &Log{ts: make([]time.Duration, k.limit), extra: whole - ring}
	copy(l.ts, keep)
	for i := range pad {
		l.ts[int64(len(keep))+i] = eff
	}
	l.size = int(ring)
	return l
}

// untilEmpty is the wait from now until every live entry has expired.
func (k *SlidingLog) untilEmpty(l *Log, live, now int64) int64 {
	if live == 0 {
		return 0
	}
	return wait(addSat(l.at(l.size-1), k.window), now)
}

// Limit returns the rule's Limit.
func (k *SlidingLog) Limit() int { return int(k.limit) }

// Fresh implements [Kernel]: every entry has expired.
func (k *SlidingLog) Fresh(l *Log, now time.Duration) bool {
	now = clampTime(now)
	_, dead := k.scan(l, int64(now))
	return dead == l.size
}
