package coordinator

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// postSlowly sends a sync of body to srv over a raw connection: head (the
// first bytes), then the rest in chunks of chunk bytes every gap (nothing
// more when gap is 0). It returns the answer's status line, read within
// wait ("" when none came).
func postSlowly(t *testing.T, addr string, body []byte, head, chunk int, gap, wait time.Duration) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/sync HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", addr, MsgpackContentType, len(body))
	if _, err := conn.Write(body[:head]); err != nil {
		t.Fatal(err)
	}
	if gap > 0 {
		go func() {
			for off := head; off < len(body); off += chunk {
				time.Sleep(gap)
				if _, err := conn.Write(body[off:min(off+chunk, len(body))]); err != nil {
					return
				}
			}
		}()
	}
	conn.SetReadDeadline(time.Now().Add(wait))
	line, _ := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line)
}

// TestStalledBodyAnsweredWithinGrace: an upload that sends 100 KiB of a
// 1 MiB body and stalls is answered 408 once its pace falls behind (the
// grace of 5 s and 128 KiB/s), and what it held of the body budget is given
// back. Before, nothing shorter than the server's read timeout (60 s; none
// in a test server) cut it, and it held its bytes all that time.
func TestStalledBodyAnsweredWithinGrace(t *testing.T) {
	c, _, srv := newTestServer(t, nil)
	body := make([]byte, 1<<20)
	start := time.Now()
	line := postSlowly(t, srv.Listener.Addr().String(), body, 100<<10, 0, 0, bodyGrace+10*time.Second)
	if !strings.HasPrefix(line, fmt.Sprintf("HTTP/1.1 %d", http.StatusRequestTimeout)) {
		t.Fatalf("a stalled upload: %q after %v, want 408", line, time.Since(start).Round(time.Millisecond))
	}
	t.Logf("answered %q after %v", line, time.Since(start).Round(time.Millisecond))
	for deadline := time.Now().Add(2 * time.Second); c.bodies.used.Load()+c.bodies.allowed.Load() != 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if used, allowed := c.bodies.used.Load(), c.bodies.allowed.Load(); used != 0 || allowed != 0 {
		t.Errorf("%d + %d body bytes still counted after the stalled upload was answered", used, allowed)
	}
}

// TestSteadySlowBodyServed: a batch of 1.5 MiB sent at about 300 KiB/s,
// for longer than the grace, keeps its pace and is applied.
func TestSteadySlowBodyServed(t *testing.T) {
	_, clk, srv := newTestServer(t, nil)
	var ds []wire.Delta
	for i := 0; len(ds)*200 < 3<<19; i++ {
		ds = append(ds, wire.Delta{Limiter: "fw", Key: fmt.Sprintf("%0190d", i), Window: 1000, Delta: 1})
	}
	body := batch("slow", 1, clk.now(), ds...).AppendMsg(nil)
	start := time.Now()
	line := postSlowly(t, srv.Listener.Addr().String(), body, 30<<10, 30<<10, 100*time.Millisecond, 30*time.Second)
	if took := time.Since(start); took < bodyGrace {
		t.Fatalf("the body took %v, less than the grace (%v): the test proves nothing", took, bodyGrace)
	}
	if line != "HTTP/1.1 200 OK" {
		t.Fatalf("a steady body of %d bytes at ~300 KiB/s: %q", len(body), line)
	}
}
