package bookquota

import (
	"strings"
	"testing"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/policy"
)

// TestForRacingReload: a Service's decision made under limits other than
// the entry's (a Reload between Book and the check) is described by those
// limits, under the entry's name, and never by a part the decision's index
// does not belong to.
func TestForRacingReload(t *testing.T) {
	book, err := policy.Parse(strings.NewReader("default = token-bucket,5,10s\napi./search = token-bucket,2,1s + fixed-window,3,1m\n"))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := policy.NewService(book)
	if err != nil {
		t.Fatal(err)
	}
	var bs Books
	b := svc.Book()
	bs.Of(b)
	same := b.LimitsFor("alice", "/search")
	if q := bs.For(b, "alice", "/search", same); q != bs.Current().APIs["/search"] {
		t.Errorf("For under the entry's own limits rendered a new quota")
	}

	other, err := admit.ParseLimits("fixed-window,9,1m + sliding-log,4,2s + token-bucket,1,1s")
	if err != nil {
		t.Fatal(err)
	}
	q := bs.For(b, "alice", "/search", other)
	want := `"api./search:fixed-window,9,1m";q=9;w=60, "api./search:sliding-log,4,2s";q=4;w=2, "api./search:token-bucket,1,1s";q=1;w=1`
	if q.Policy != want {
		t.Errorf("For under other limits: policy %s, want %s", q.Policy, want)
	}
	if p := q.Part(2); p.Name != "api./search:token-bucket,1,1s" || p.Rule != other.At(2) {
		t.Errorf("For under other limits: part 2 is %q, rule %v", p.Name, p.Rule)
	}

	q = bs.For(b, "alice", "/search", admit.Limits{})
	if q.Policy != "" || q.Part(1) != q || q.Name != "api./search" {
		t.Errorf("For under the zero Limits: policy %q, name %q", q.Policy, q.Name)
	}
}

// TestForNewBook: For renders a book it has not seen (a Reload), once, and
// keeps it as the current one.
func TestForNewBook(t *testing.T) {
	b1, err := policy.Parse(strings.NewReader("default = token-bucket,5,10s\n"))
	if err != nil {
		t.Fatal(err)
	}
	b2, err := policy.Parse(strings.NewReader("default = fixed-window,7,1m\nuser.vip = fixed-window,70,1m\n"))
	if err != nil {
		t.Fatal(err)
	}
	var bs Books
	bs.Of(b1)
	q := bs.For(b2, "vip", "/x", b2.LimitsFor("vip", "/x"))
	if q.Policy != `"user.vip";q=70;w=60` || bs.Current().Book != b2 || bs.Current().Users["vip"] != q {
		t.Errorf("For under a new book: policy %s, current book is the new one: %v", q.Policy, bs.Current().Book == b2)
	}
	if d := bs.For(b2, "bob", "/x", b2.LimitsFor("bob", "/x")); d.Policy != `"default";q=7;w=60` {
		t.Errorf("For(bob) under the new book: %s", d.Policy)
	}
}
