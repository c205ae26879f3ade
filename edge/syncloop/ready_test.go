package syncloop

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/edgelimit/edgelimit/clock"
)

// TestReadyReadsTimeFromAnyCoordinator: before the first reading of the
// coordinator's time, Ready probes the coordinators of the list in turn,
// the one in use first: with the first one down it reads the time from
// the second (an isolate whose first coordinator is down still syncs), and
// once read, it asks nobody again. With every coordinator down it reports
// the error, and without Time it asks nobody at all.
func TestReadyReadsTimeFromAnyCoordinator(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	var hits atomic.Int64
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set(clock.Header, strconv.FormatInt(clock.Real.Now()+3e9, 10)) // 3 s ahead
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("[]"))
	}))
	defer live.Close()
	off := &clock.Offset{Base: clock.Real}
	tr := &HTTPTransport{URL: dead + "," + live.URL, Time: off}
	if err := tr.Ready(context.Background()); err != nil {
		t.Fatalf("ready with the first coordinator down: %v", err)
	}
	if !off.Read() || hits.Load() != 1 {
		t.Fatalf("after Ready: read %v, the live coordinator probed %d times; want a reading from it", off.Read(), hits.Load())
	}
	if err := tr.Ready(context.Background()); err != nil || hits.Load() != 1 {
		t.Fatalf("a second Ready: %v, probes %d; want none", err, hits.Load())
	}

	down := &HTTPTransport{URL: dead, Time: &clock.Offset{Base: clock.Real}}
	if err := down.Ready(context.Background()); err == nil {
		t.Fatal("Ready with every coordinator down: no error")
	}
	if err := (&HTTPTransport{URL: dead}).Ready(context.Background()); err != nil {
		t.Fatalf("Ready without Time: %v, want nil at once", err)
	}
}
