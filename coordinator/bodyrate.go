package coordinator

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// The pace of a request body. A sync's body must keep coming: by bodyGrace
// after the handler starts reading it, plus one second for each
// minBodyRate bytes already read, the next bodyPaceChunk must have arrived,
// or the read ends and the sync is answered 408 (nothing applied). An
// upload that stalls thus gives back what it holds of the body budget
// (bodybudget.go) within seconds, not at the server's read timeout (60 s):
// holding the budget takes a steady stream of bytes rather than a few
// idle connections. An edge gives up on a sync after its own timeout (5 s
// by default), so a body slower than this has no one waiting for its
// answer. No body is given longer than the server's read timeout.
const (
	bodyGrace     = 5 * time.Second
	minBodyRate   = 128 << 10 // bytes per second
	bodyPaceChunk = 32 << 10  // bytes
	// serverReadTimeout bounds reading a whole request (Serve).
	serverReadTimeout = 60 * time.Second
)

// errBodyTooSlow is the error of a body that came slower than its pace.
var errBodyTooSlow = fmt.Errorf("coordinator: the request body came slower than %d KiB/s after a %v grace",
	minBodyRate>>10, bodyGrace)

// paceReader reads a body under the pace above, setting the connection's
// read deadline before each read.
type paceReader struct {
	r     io.ReadCloser
	rc    *http.ResponseController
	start time.Time
	n     int64 // bytes read
}

// pacedBody returns r read under the pace, for the request answered by w.
func pacedBody(w http.ResponseWriter, r io.ReadCloser) *paceReader {
	return &paceReader{r: r, rc: http.NewResponseController(w), start: time.Now()}
}

// Read reads from the body within the deadline of its next chunk.
func (p *paceReader) Read(b []byte) (int, error) {
	due := p.start.Add(min(serverReadTimeout,
		bodyGrace+time.Duration((p.n+bodyPaceChunk)*int64(time.Second)/minBodyRate)))
	// A writer without deadlines (a test's recorder) reads unpaced.
	_ = p.rc.SetReadDeadline(due)
	n, err := p.r.Read(b)
	p.n += int64(n)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return n, errBodyTooSlow
	}
	return n, err
}

// Close closes the body.
func (p *paceReader) Close() error { return p.r.Close() }

// done lifts the body's deadline: the server sets the next request's own.
func (p *paceReader) done() { _ = p.rc.SetReadDeadline(time.Time{}) }

// writeReply writes out, a sync's reply, under the same pace as its body:
// the client must take it within bodyGrace plus one second for each
// minBodyRate bytes, or the write fails and the connection is closed. The
// request holds its share of the body budget (bodybudget.go) until its
// reply is written, and the server has no write timeout (the edges'
// long waits are not here, but a reply of MaxBodyBytes to a slow link may
// take seconds): before, a client that sent a large batch and never read
// the reply held that memory for as long as it kept the connection open,
// and two such connections of one token answered every other token's
// large batches 503 busy for minutes on a coordinator sized for 128 MiB.
// The deadline is lifted after the write, as the next request on the
// connection has none of its own.
func writeReply(w http.ResponseWriter, out []byte) {
	rc := http.NewResponseController(w)
	// A writer without deadlines (a test's recorder) writes unpaced.
	_ = rc.SetWriteDeadline(time.Now().Add(min(serverReadTimeout,
		bodyGrace+time.Duration(int64(len(out))*int64(time.Second)/minBodyRate))))
	if _, err := w.Write(out); err == nil {
		_ = rc.Flush() // within the deadline, not after the handler returns
	}
	_ = rc.SetWriteDeadline(time.Time{})
}
