package admit

// StoreStats is what a keyed store reports of itself ([Store.Stats]).
type StoreStats struct {
	// Keys is the number of keys stored now (Store.Len).
	Keys int
	// MaxKeys is the bound of WithMaxKeys, or 0 when the store has none.
	MaxKeys int
	// Evictions counts the keys evicted since the store was built (idle
	// keys dropped by insertions, Sweep and the full-store policy).
	Evictions uint64
	// FullDenials counts the requests for new keys denied since the store
	// was built because it was full (WithMaxKeys) and had no idle key to
	// evict.
	FullDenials uint64
}
