package tally_test

import (
	"fmt"
	"strings"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/observe"
	"github.com/admit-go/admit/policy"
	"github.com/admit-go/admit/tally"
)

// A Tally attached to a Service counts its decisions per API and scope;
// Snapshot is what an exporter reads at a scrape.
func Example() {
	t, err := tally.New()
	if err != nil {
		panic(err)
	}
	book, err := policy.Parse(strings.NewReader("default = token-bucket,2,1m\napi./login = fixed-window,1,1m\n"))
	if err != nil {
		panic(err)
	}
	svc, err := policy.NewService(book, policy.WithObserver(t), admit.WithClock(clock.NewFake()))
	if err != nil {
		panic(err)
	}
	for range 3 {
		svc.Check("alice", "/orders")
		svc.Check("alice", "/login")
	}
	for _, s := range t.Snapshot() {
		fmt.Printf("%s %s scope=%s limits=%s admitted=%d denied=%d\n", s.Labels.Source, s.Labels.Name, s.Labels.Scope,
			s.Labels.Limits, s.Decisions[observe.Admitted], s.Decisions[observe.Denied])
	}
	// Output:
	// policy /login scope=api limits=fixed-window,1,1m admitted=1 denied=2
	// policy /orders scope=default limits=token-bucket,2,1m admitted=2 denied=1
}
