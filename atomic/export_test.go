package atomic

// Held reports whether the bucket's word is the held value: a reservation
// holds it, or its state is past the word's horizon (spilled).
func Held(l *TokenBucket) bool { return l.c.w.Load() == tbHeld }
