package atomic

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCAS128: the two-word compare-and-swap swaps only when both words
// match, reports the words it found either way, and writes nothing when it
// fails; load128 reads both words, by either of its instructions.
func TestCAS128(t *testing.T) {
	require.True(t, cas128OK, "every amd64 machine this runs on has CMPXCHG16B")
	for _, movdqa := range []bool{true, false} {
		if movdqa && !movdqaAtomic {
			continue // no AVX: the SSE load is not atomic here
		}
		restore := movdqaAtomic
		movdqaAtomic = movdqa
		var c pairCell
		p := &c.w[c.pairAt()]
		cur0, cur1, ok := cas128(p, 0, 0, 1, 2)
		assert.True(t, ok)
		assert.Equal(t, [2]uint64{0, 0}, [2]uint64{cur0, cur1}, "the words found: the old ones")
		cur0, cur1, ok = cas128(p, 1, 3, 5, 6)
		assert.False(t, ok, "the second word differs")
		assert.Equal(t, [2]uint64{1, 2}, [2]uint64{cur0, cur1}, "the words found")
		cur0, cur1, ok = cas128(p, 7, 2, 5, 6)
		assert.False(t, ok, "the first word differs")
		assert.Equal(t, [2]uint64{1, 2}, [2]uint64{cur0, cur1})
		w0, w1 := load128(p)
		assert.Equal(t, [2]uint64{1, 2}, [2]uint64{w0, w1}, "movdqa %v: a failed CAS writes nothing", movdqa)
		_, _, ok = cas128(p, 1, 2, 1<<63|9, ^uint64(0))
		assert.True(t, ok)
		w0, w1 = load128(p)
		assert.Equal(t, [2]uint64{1<<63 | 9, ^uint64(0)}, [2]uint64{w0, w1}, "movdqa %v", movdqa)
		movdqaAtomic = restore
	}
}

// TestLoad128Atomic: writers move a pair through values whose two words
// are equal, and readers never see them differ, with either load (a torn
// read would mix two values).
func TestLoad128Atomic(t *testing.T) {
	for _, movdqa := range []bool{true, false} {
		if movdqa && !movdqaAtomic {
			continue
		}
		restore := movdqaAtomic
		movdqaAtomic = movdqa
		var c pairCell
		p := &c.w[c.pairAt()]
		var wg sync.WaitGroup
		var torn [2]uint64
		var mu sync.Mutex
		rounds := 20000
		if testing.Short() {
			rounds = 2000
		}
		for range 2 {
			wg.Go(func() {
				for range rounds {
					for {
						w0, w1 := load128(p)
						if _, _, ok := cas128(p, w0, w1, w0+1, w1+1); ok {
							break
						}
					}
				}
			})
			wg.Go(func() {
				for range rounds {
					if w0, w1 := load128(p); w0 != w1 {
						mu.Lock()
						torn = [2]uint64{w0, w1}
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		assert.Equal(t, [2]uint64{}, torn, "movdqa %v: a torn read", movdqa)
		w0, w1 := load128(p)
		assert.Equal(t, [2]uint64{uint64(2 * rounds), uint64(2 * rounds)}, [2]uint64{w0, w1}, "movdqa %v: every increment counted once", movdqa)
		movdqaAtomic = restore
	}
}
