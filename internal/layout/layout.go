// Package layout holds the one constant admit's memory layout is built on.
package layout

// CacheLinePad is the size that words written by different goroutines (a
// shard's lock, a stripe, a ring, a shared counter) are padded to, so that
// writing one does not slow down the reads of its neighbours. 128, not 64:
// Intel's adjacent-line prefetcher fetches 64-byte lines in pairs, so two
// words that share a 128-byte pair still slow each other down; 128 is also
// the line size of Apple's arm64 cores. Each padded type pins its size with
// a test.
const CacheLinePad = 128
