package coordinator

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// heldBody is a request body of n bytes whose last byte is sent only once
// release is closed.
type heldBody struct {
	n       int
	sent    chan struct{} // closed when all but the last byte were read
	release chan struct{}
}

func (h *heldBody) Read(p []byte) (int, error) {
	switch {
	case h.n > 1:
		k := min(len(p), h.n-1)
		for i := range p[:k] {
			p[i] = 0xc0
		}
		h.n -= k
		return k, nil
	case h.n == 1:
		close(h.sent)
		<-h.release
		h.n = 0
		p[0] = 0xc0
		return 1, nil
	}
	return 0, io.EOF
}

// heldBodies are syncs whose bodies' last bytes wait for release.
type heldBodies struct {
	sent    []chan struct{} // sent[i] closed: the i-th sent all but its last byte
	ended   []chan struct{} // ended[i] closed: the i-th was answered or failed
	status  []int           // status[i]: the i-th answer's status (0: no answer), once ended[i] is closed
	wg      sync.WaitGroup  // ends with the senders
	release func()          // sends the last bytes; may be called more than once
}

// holdBodies starts n syncs to srv with the headers hdr, each a heldBody
// of size bytes whose last byte waits for h.release. A test that stops
// before it calls release has it called by its cleanup (which then waits
// for the senders), before the server's: httptest.Server.Close waits for
// the handlers, which wait for the bodies' last bytes, so a failed check
// hung the package's tests there until go test's timeout, and its message
// was never printed.
func holdBodies(t *testing.T, srv *httptest.Server, n, size int, hdr map[string]string) *heldBodies {
	h := &heldBodies{status: make([]int, n)}
	ch := make(chan struct{})
	var once sync.Once
	h.release = func() { once.Do(func() { close(ch) }) }
	t.Cleanup(func() { h.release(); h.wg.Wait() })
	for i := range n {
		s, e := make(chan struct{}), make(chan struct{})
		h.sent, h.ended = append(h.sent, s), append(h.ended, e)
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			defer close(e)
			req, _ := http.NewRequest("POST", srv.URL+"/v1/sync", &heldBody{n: size, sent: s, release: ch})
			req.ContentLength = int64(size)
			req.Header.Set("Content-Type", MsgpackContentType)
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				return
			}
			if resp.StatusCode == 503 && resp.Header.Get("Retry-After") == "" {
				t.Errorf("503 without Retry-After")
			}
			resp.Body.Close()
			h.status[i] = resp.StatusCode
		}()
	}
	return h
}

// mostHeld waits until every body of h was sent but its last byte, or was
// answered (refused busy before the client wrote it all: under load the
// server may answer and close first), 20 s at most, then returns the most
// body bytes c held over the next 2 s.
func mostHeld(t *testing.T, c *Coordinator, h *heldBodies) int64 {
	t.Helper()
	for i := range h.sent {
		select {
		case <-h.sent[i]:
		case <-h.ended[i]:
		case <-time.After(20 * time.Second):
			t.Fatal("the bodies were not sent")
		}
	}
	var held int64
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		held = max(held, c.bodies.used.Load()+c.bodies.allowed.Load())
	}
	return held
}

// TestBodiesInMemoryBounded: 12 clients each send a body of 4 MiB (the
// largest a sync takes) and hold back its last byte, on a coordinator sized
// for 128 MiB (bodies beyond 64 KiB each bounded by 8 MiB). The bodies the
// coordinator holds stay within the bound (it held every byte of all 12,
// 48 MiB, before), the others are answered 503 busy with Retry-After at
// once, and a batch of ordinary size from another isolate is applied while
// they hold theirs.
func TestBodiesInMemoryBounded(t *testing.T) {
	c, clk, srv := newTestServer(t, func(o *Options) { o.MaxMemory = MinMaxMemory })
	const n, size = 12, 4 << 20
	h := holdBodies(t, srv, n, size, nil)
	// Each body is sent but its last byte, or answered (refused before it
	// sent everything). (Before, answers were taken from one channel for
	// all: a body answered could have its answer taken in another's turn,
	// and its own turn waited out the time allowed: 2 of 4 runs under load.)
	busy := 0
	deadline := time.After(60 * time.Second)
	for i := range n {
		select {
		case <-h.sent[i]:
		case <-h.ended[i]:
			if h.status[i] != 503 {
				t.Fatalf("a held body answered %d before its last byte, want 503", h.status[i])
			}
			busy++
		case <-deadline:
			t.Fatal("the bodies were not read")
		}
	}
	time.Sleep(100 * time.Millisecond) // the server reads what was sent
	limit := c.bodies.max
	if used := c.bodies.used.Load(); used > limit+size {
		t.Errorf("bodies in flight hold %d bytes past their allowance, bound %d", used, limit)
	}
	if busy == 0 {
		t.Errorf("every body of 4 MiB was taken in: none answered busy")
	}
	st, body := httpPost(t, srv, MsgpackContentType, batch("honest", 1, clk.now(), wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: 1}).AppendMsg(nil), nil)
	if st != 200 {
		t.Fatalf("an ordinary batch while bodies are held: %d %s", st, body)
	}
	h.release()
	h.wg.Wait()
	for _, st := range h.status {
		if st != 503 && st != 400 {
			t.Errorf("a held body: %d, want 503 (busy) or 400 (not msgpack)", st)
		}
	}
	if used := c.bodies.used.Load(); used != 0 {
		t.Errorf("%d body bytes still counted after every request ended", used)
	}
}

// TestManySmallBodiesBounded: 250 clients each hold a body of 60 KiB (under
// the allowance of 64 KiB each) on a coordinator sized for 128 MiB. The
// allowances have a pool of their own, bounded: what the bodies hold stays
// within the pool and the bound (before, every allowance was outside any
// bound: 8,000 such connections held 715 MB, with their own buffers), the
// bodies past it are refused busy (their clients, still sending, may not
// read that answer before they end), and once they end an ordinary batch is
// applied.
func TestManySmallBodiesBounded(t *testing.T) {
	c, clk, srv := newTestServer(t, func(o *Options) { o.MaxMemory = MinMaxMemory })
	const n, size = 250, 60 << 10
	h := holdBodies(t, srv, n, size, nil)
	// The server reads what was sent, up to the bound.
	bound := c.bodies.max + c.bodies.allowMax
	held := mostHeld(t, c, h)
	if held > bound+32<<10 || held < bound/2 {
		t.Errorf("bodies in flight hold %d bytes, want up to the bound %d (allowances %d, the rest %d) and no further", held, bound, c.bodies.allowMax, c.bodies.max)
	}
	t.Logf("%d bodies of %d bytes sent (%d in all): %d bytes held, bound %d", n, size, n*size, held, bound)
	h.release()
	h.wg.Wait()
	if used, allowed := c.bodies.used.Load(), c.bodies.allowed.Load(); used != 0 || allowed != 0 {
		t.Errorf("%d + %d body bytes still counted after every request ended", used, allowed)
	}
	st, body := httpPost(t, srv, MsgpackContentType, batch("honest", 1, clk.now(), wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: 1}).AppendMsg(nil), nil)
	if st != 200 {
		t.Fatalf("an ordinary batch after the held bodies ended: %d %s", st, body)
	}
}

// TestOneTokenHoldsOnlyItsShareOfBodies: one edge token holds 200 uploads
// of 200 KiB open (the last byte held back) on a coordinator sized for
// 256 MiB, far past both body pools. Its bodies take at most its share
// (half of each pool), so another token's ordinary batch, and a batch of
// 1 MiB, are applied while the uploads hang. Before, the held uploads took
// both pools whole and every client's sync was answered 503.
func TestOneTokenHoldsOnlyItsShareOfBodies(t *testing.T) {
	c, clk, srv := newTestServer(t, func(o *Options) {
		o.MaxMemory = 256 << 20
		o.Tokens = []string{"holder", "other"}
	})
	const n, size = 200, 200 << 10
	h := holdBodies(t, srv, n, size, map[string]string{"Authorization": "Bearer holder"})
	// The server reads what was sent, up to the holder's share.
	share := c.bodies.shareMax + c.bodies.shareAllowMax
	held := mostHeld(t, c, h)
	if held > share+size || held < share/2 {
		t.Errorf("the holder's bodies hold %d bytes, want up to its share %d and no further", held, share)
	}
	t.Logf("%d uploads of %d bytes held: at most %d bytes in the pools (share %d, pools %d + %d)", n, size, held, share, c.bodies.max, c.bodies.allowMax)
	as := func(token string) map[string]string { return map[string]string{"Authorization": "Bearer " + token} }
	small := batch("other-1", 1, clk.now(), wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: 1}).AppendMsg(nil)
	if st, body := httpPost(t, srv, MsgpackContentType, small, as("other")); st != 200 {
		t.Errorf("another token's ordinary batch while the uploads hang: %d %s", st, body)
	}
	var ds []wire.Delta
	for i := 0; len(ds)*200 < 1<<20; i++ {
		ds = append(ds, wire.Delta{Limiter: "fw", Key: fmt.Sprintf("%0190d", i), Window: 1000, Delta: 1})
	}
	large := batch("other-2", 1, clk.now(), ds...).AppendMsg(nil)
	if st, body := httpPost(t, srv, MsgpackContentType, large, as("other")); st != 200 {
		t.Errorf("another token's batch of %d bytes while the uploads hang: %d %.200s", len(large), st, body)
	}
	h.release()
	h.wg.Wait()
	if used, allowed := c.bodies.used.Load(), c.bodies.allowed.Load(); used != 0 || allowed != 0 {
		t.Errorf("%d + %d body bytes still counted after every request ended", used, allowed)
	}
	c.bodies.mu.Lock()
	defer c.bodies.mu.Unlock()
	if len(c.bodies.shares) != 0 {
		t.Errorf("%d token shares kept after every request ended", len(c.bodies.shares))
	}
}
