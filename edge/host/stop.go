package host

import (
	"net"
	"net/http"
	"sync"
)

// A graceful stop of the HTTP server (Serve on SIGTERM, or Shutdown of the
// server Server returns) ends at once what would otherwise hold it up:
//   - a /v1/wait answers with its last decision (429 and Retry-After)
//     instead of sleeping on to its max_wait (up to the write timeout less
//     1 s: a stop waited 4.8 s for one wait on a key whose denials said a
//     short Retry-After);
//   - a connection that has not sent a request yet is closed: net/http
//     waits until such a connection is 5 s old, and a client's spare
//     keep-alive connection (dialled for a request another connection then
//     took) or a load balancer's TCP check held a stop for 4.8 s in a
//     probe, and is the likely cause of the stops of 5.2-5.3 s the chaos
//     test saw now and then.
//
// Requests in flight (/v1/decide, a /v1/wait's current decision) are
// answered as before.
type stopper struct {
	stopping chan struct{} // closed when the stop begins (under mu)

	mu      sync.Mutex
	fresh   map[net.Conn]struct{} // connections that have not sent a request
	stopped bool                  // stopping is closed
}

func newStopper() *stopper {
	return &stopper{stopping: make(chan struct{}), fresh: map[net.Conn]struct{}{}}
}

// connState is the server's http.Server.ConnState: it tracks the
// connections that have not sent a request (closing one that opens after
// the stop began).
func (s *stopper) connState(c net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case st == http.StateNew && s.stopped:
		c.Close()
	case st == http.StateNew:
		s.fresh[c] = struct{}{}
	default:
		delete(s.fresh, c)
	}
}

// stop begins the stop (http.Server.RegisterOnShutdown): the waits end and
// the connections without a request are closed.
func (s *stopper) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopped {
		s.stopped = true
		close(s.stopping)
	}
	for c := range s.fresh {
		c.Close()
	}
	clear(s.fresh)
}
