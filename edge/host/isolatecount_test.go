package host

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestIsolateCountBounded: a host is refused more than MaxIsolates
// isolates, with an error naming the bound, and a host whose context ends
// while it builds its isolates stops there. Before, a count of 100,000,000
// built isolates until memory ran out (3.7 GB at 25,000), and SIGTERM
// could not stop it.
func TestIsolateCountBounded(t *testing.T) {
	_, err := New(context.Background(), Options{Config: bigConfig(), Isolates: MaxIsolates + 1})
	if err == nil || !strings.Contains(err.Error(), "MaxIsolates") {
		t.Fatalf("New with %d isolates: %v, want an error naming MaxIsolates", MaxIsolates+1, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if h, err := New(ctx, Options{Config: bigConfig(), Isolates: MaxIsolates}); !errors.Is(err, context.Canceled) {
		if h != nil {
			h.Close()
		}
		t.Fatalf("New with its context ended: %v, want context.Canceled", err)
	}
}
