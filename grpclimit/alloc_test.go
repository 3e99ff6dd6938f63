package grpclimit_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/admit-go/admit/grpclimit"
	"github.com/admit-go/admit/sharded"
)

// TestUnaryAllocations pins the allocation budget of an admitted unary
// call through the server interceptor, beyond the limiter (which allocates
// nothing here): none for a constant key; one for a key read from the
// metadata (the copy of the values grpc's metadata.ValueFromIncomingContext
// returns; the key is a substring of a value, as an IPv4 address behind a
// trusted proxy is); one for the peer's address (the key's text); and none
// more with an observer, timed or not.
func TestUnaryAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's runtime allocates on its own")
	}
	constant := grpclimit.WithKey(func(context.Context, string) (string, bool) { return "k", true })
	for _, tc := range []struct {
		name string
		opts []grpclimit.Option
		md   metadata.MD
		want float64
	}{
		{"key=const", []grpclimit.Option{constant}, nil, 0},
		{"key=const/observer=untimed", []grpclimit.Option{constant, grpclimit.WithObserver(&observer{})}, nil, 0},
		{"key=const/observer=timed", []grpclimit.Option{constant, grpclimit.WithObserver(&observer{timed: true})}, nil, 0},
		{"key=peer", nil, nil, 1},
		{"key=peer/observer=timed", []grpclimit.Option{grpclimit.WithObserver(&observer{timed: true})}, nil, 1},
		{"key=metadata", []grpclimit.Option{grpclimit.WithKeyFrom(grpclimit.Metadata("x-api-key"))}, metadata.Pairs("x-api-key", "k-1"), 1},
		{"key=xff", []grpclimit.Option{grpclimit.WithTrustedProxies(grpclimit.XForwardedFor, "203.0.113.0/24")},
			metadata.Pairs("x-forwarded-for", "198.51.100.1"), 1},
	} {
		lim, err := sharded.New(allowAll)
		if err != nil {
			t.Fatal(err)
		}
		ic, err := grpclimit.New(lim, tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		intercept, ctx := ic.UnaryServerInterceptor(), callContext(tc.md)
		handled := 0
		handler := func(context.Context, any) (any, error) { handled++; return nil, nil }
		got := testing.AllocsPerRun(1000, func() {
			intercept(ctx, nil, checkInfo, handler) //nolint:errcheck // counted by handled
		})
		if handled == 0 {
			t.Errorf("%s: no call admitted", tc.name)
		}
		if got != tc.want {
			t.Errorf("%s: %v allocations per admitted call, want %v", tc.name, got, tc.want)
		}
	}
}
