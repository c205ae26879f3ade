package syncloop

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/clock"
)

// endAfter returns a context that ends with cause 100 ms from now.
func endAfter(t *testing.T, cause error) context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	tm := time.AfterFunc(100*time.Millisecond, func() { cancel(cause) })
	t.Cleanup(func() { tm.Stop(); cancel(nil) })
	return ctx
}

// TestHTTPTransportStaysWhenAnswered: an attempt ended because another
// reply answered its batch (Loop.EndAttempt: context.Canceled) leaves the
// transport on the coordinator it was using; one abandoned as hung
// (Loop.AbandonAttempt: ErrAbandoned) moves it to the next. Before, every
// cancelled attempt moved it on: an edge host whose amendments answer its
// batches went back and forth between two healthy coordinators (53
// failovers in 7 s), and back to a hung one every second.
func TestHTTPTransportStaysWhenAnswered(t *testing.T) {
	hung, live := hungAndLive(t)
	tr := &HTTPTransport{URL: hung.URL + "," + live.URL, Client: &http.Client{Timeout: time.Minute}}
	if _, err := tr.Sync(endAfter(t, context.Canceled), []byte("batch"), nil); err == nil {
		t.Fatal("an attempt ended before its answer: no error")
	}
	if tr.Current() != hung.URL || tr.Failovers() != 0 {
		t.Fatalf("after an attempt ended as answered: in use %s, %d failovers; want the first, none", tr.Current(), tr.Failovers())
	}
	if _, err := tr.Sync(endAfter(t, ErrAbandoned), []byte("batch"), nil); err == nil {
		t.Fatal("an attempt abandoned before its answer: no error")
	}
	if tr.Current() != live.URL || tr.Failovers() != 1 {
		t.Fatalf("after an attempt abandoned as hung: in use %s, %d failovers; want the second, 1", tr.Current(), tr.Failovers())
	}
}

// TestReadyAbandonedMovesOn: a read of the coordinator's time abandoned
// as hung (the first coordinator hangs) makes the next read start with
// the next coordinator, which answers. Before, every read began with the
// hung one, and a host that abandons it within a second never reached the
// second.
func TestReadyAbandonedMovesOn(t *testing.T) {
	hung, live := hungAndLive(t)
	tr := &HTTPTransport{URL: hung.URL + "," + live.URL, Client: &http.Client{Timeout: time.Minute}, Time: &clock.Offset{Base: clock.Real}}
	err := tr.Ready(endAfter(t, ErrAbandoned))
	if !errors.Is(err, ErrAbandoned) {
		t.Fatalf("a read abandoned before its answer: %v, want ErrAbandoned", err)
	}
	if tr.Current() != live.URL {
		t.Fatalf("after a read abandoned as hung: in use %s, want the second", tr.Current())
	}
	if err := tr.Ready(context.Background()); err != nil {
		t.Fatalf("the next read: %v", err)
	}
}
