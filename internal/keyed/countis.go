package keyed

// CountIs reports whether c counts exactly n keys, probing the count with
// Reserve (which counts one more only below the bound it is given) and
// giving back what the probe counted. It must not race the store's other
// calls. It is for the conformance suite's StoreHooks.CountIs, which the
// containers' test hooks answer with it; nothing else calls it.
func (c *Counter) CountIs(n int) bool {
	if c.Reserve(int64(n)) { // fewer than n
		c.Release(1)
		return false
	}
	if !c.Reserve(int64(n) + 1) { // more than n
		return false
	}
	c.Release(1)
	return true
}
