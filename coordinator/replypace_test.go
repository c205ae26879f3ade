package coordinator

import (
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// smallSendBuffers accepts connections whose kernel send buffer is small,
// so that a reply the client does not read blocks its writer at once.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(8 << 10)
	}
	return c, err
}

// TestUnreadReplyGivesBackItsBody: a client posts a batch of 1,000 keys
// of 256 bytes (a body past its 64 KiB allowance, held in the body budget
// until the reply is written) and never reads the reply. The write stalls
// on the full socket buffers; once the reply's pace (bodyGrace plus a
// second per minBodyRate bytes) has passed, the write ends, the connection
// closes and the budget comes back. Before, the request held it for as
// long as the client kept the connection open (two such connections of
// one token answered other tokens' large batches 503 busy for minutes).
func TestUnreadReplyGivesBackItsBody(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	srv := httptest.NewUnstartedServer(c.Handler())
	srv.Listener = smallSendBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)

	var ds []wire.Delta
	for i := range 1000 {
		ds = append(ds, wire.Delta{Limiter: "fw", Key: fmt.Sprintf("%04d-%s", i, strings.Repeat("k", 251)), Window: 1000, Delta: 1})
	}
	body := batch("stall", 1, clk.now(), ds...).AppendMsg(nil)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	start := time.Now()
	if _, err := fmt.Fprintf(conn, "POST /v1/sync HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s",
		srv.Listener.Addr(), MsgpackContentType, len(body), body); err != nil {
		t.Fatal(err)
	}
	held := func() int64 { return c.bodies.used.Load() + c.bodies.allowed.Load() }
	// The batch is applied and its reply stalls, the body still held.
	for held() == 0 || getKey(t, c, "fw", ds[999].Key).Count == 0 {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the batch was not applied and held: %d bytes held", held())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if held() == 0 {
		t.Fatal("the body was given back within a second of the reply's write: the reply did not stall (the test's buffers are too large)")
	}
	// The reply is about as large as the body: its pace ends within
	// bodyGrace + len(body)/minBodyRate (7 s), with slack for a loaded CI.
	bound := bodyGrace + time.Duration(int64(len(body))*int64(time.Second)/minBodyRate) + 10*time.Second
	for held() != 0 {
		if time.Since(start) > bound {
			t.Fatalf("%d body bytes still held %v after a reply nobody reads (bound %v)", held(), time.Since(start).Round(time.Millisecond), bound)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("a body of %d bytes given back %v after its unread reply began", len(body), time.Since(start).Round(time.Millisecond))
}
