// Package bookquota renders the quotas of a policy.Service's books for
// httplimit's and grpclimit's ForService: one [ratehdr.Quota] per entry of
// each book, rendered once per book, so that a decision under a Service
// finds its quota without rendering it.
package bookquota

import (
	"sync"
	"sync/atomic"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/ratehdr"
	"github.com/admit-go/admit/policy"
)

// Books renders the quotas of the books of one policy.Service, once per
// book: at the first call that sees a book (a middleware's constructor
// calls [Books.Of] with the Service's first), and after each Reload. The
// zero Books is ready to use; it is safe for concurrent use.
type Books struct {
	cur atomic.Pointer[BookQuotas]
	mu  sync.Mutex // serializes rendering a new book's quotas
}

// BookQuotas is the rendered quotas of one book, one per entry.
type BookQuotas struct {
	Book  *policy.Book
	Def   *ratehdr.Quota
	APIs  map[string]*ratehdr.Quota
	Users map[string]*ratehdr.Quota
}

// Current returns the quotas of the book rendered last, or nil.
func (b *Books) Current() *BookQuotas { return b.cur.Load() }

// Of returns the quotas of book, rendering them if book is not the one
// rendered last: concurrent callers wait for the first one's rendering.
func (b *Books) Of(book *policy.Book) *BookQuotas {
	b.mu.Lock()
	defer b.mu.Unlock()
	if bq := b.cur.Load(); bq != nil && bq.Book == book {
		return bq
	}
	bq := &BookQuotas{Book: book, APIs: map[string]*ratehdr.Quota{}, Users: map[string]*ratehdr.Quota{}}
	for _, e := range book.Rules() {
		q := ratehdr.EntryQuota(e.Key(), e.Limits)
		switch e.Scope {
		case policy.User:
			bq.Users[e.Name] = q
		case policy.API:
			bq.APIs[e.Name] = q
		default:
			bq.Def = q
		}
	}
	b.cur.Store(bq)
	return bq
}

// For returns the quota of the entry of book that applies to (user, api),
// for a decision the Service made under limits (as CheckNWhich returns
// them). Should a Reload have come between reading book and the check, and
// the entry's limits differ from those, the quota is rendered afresh for
// limits under the entry's name, so that the numbers and the binding index
// always match the limits that decided.
func (b *Books) For(book *policy.Book, user, api string, limits admit.Limits) *ratehdr.Quota {
	bq := b.cur.Load()
	if bq == nil || bq.Book != book {
		bq = b.Of(book)
	}
	e := book.EntryFor(user, api)
	var q *ratehdr.Quota
	switch e.Scope {
	case policy.User:
		q = bq.Users[e.Name]
	case policy.API:
		q = bq.APIs[e.Name]
	default:
		q = bq.Def
	}
	if q == nil || q.Limits != limits { // a Reload in between; never fail a request on it
		q = ratehdr.EntryQuota(e.Key(), limits)
	}
	return q
}
