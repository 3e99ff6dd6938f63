package httplimit

import (
	"strings"
	"testing"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/policy"
)

// TestQuotaForRacingReload: a Service's decision made under limits other
// than the entry's (a Reload between Book and the check) is described by
// those limits, under the entry's name, and never by a part the decision's
// index does not belong to.
func TestQuotaForRacingReload(t *testing.T) {
	book, err := policy.Parse(strings.NewReader("default = token-bucket,5,10s\napi./search = token-bucket,2,1s + fixed-window,3,1m\n"))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := policy.NewService(book)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ForService(svc)
	if err != nil {
		t.Fatal(err)
	}
	b := svc.Book()
	same := b.LimitsFor("alice", "/search")
	if q := m.quotaFor(b, "alice", "/search", same); q != m.books.Load().apis["/search"] {
		t.Errorf("quotaFor under the entry's own limits rendered a new quota")
	}

	other, err := admit.ParseLimits("fixed-window,9,1m + sliding-log,4,2s + token-bucket,1,1s")
	if err != nil {
		t.Fatal(err)
	}
	q := m.quotaFor(b, "alice", "/search", other)
	want := `"api./search:fixed-window,9,1m";q=9;w=60, "api./search:sliding-log,4,2s";q=4;w=2, "api./search:token-bucket,1,1s";q=1;w=1`
	if q.policy != want {
		t.Errorf("quotaFor under other limits: policy %s, want %s", q.policy, want)
	}
	if p := q.part(2); p.name != "api./search:token-bucket,1,1s" || p.rule != other.At(2) {
		t.Errorf("quotaFor under other limits: part 2 is %q, rule %v", p.name, p.rule)
	}

	q = m.quotaFor(b, "alice", "/search", admit.Limits{})
	if q.policy != "" || q.part(1) != q || q.name != "api./search" {
		t.Errorf("quotaFor under the zero Limits: policy %q, name %q", q.policy, q.name)
	}
}
