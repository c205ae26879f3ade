package coordinator_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"testing"

	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/edge/host"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// serveLoopback serves c on a loopback port until the test ends (then
// closes c) and returns its base URL.
func serveLoopback(t *testing.T, c *coordinator.Coordinator) string {
	t.Helper()
	url, _ := serveUntil(t, c)
	return url
}

// serveUntil serves c on loopback until the returned stop is called (or the
// test ends); stop also closes c.
func serveUntil(t *testing.T, c *coordinator.Coordinator) (string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- c.Serve(ctx, ln) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-served
			c.Close()
		}
	}
	t.Cleanup(stop)
	return "http://" + ln.Addr().String(), stop
}

// serveEdge starts an edge host with opts, serves it on a loopback port
// until the test ends (then closes it) and returns it and its base URL.
func serveEdge(t *testing.T, opts host.Options) (*host.Host, string) {
	t.Helper()
	h, err := host.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done; h.Close() })
	return h, "http://" + ln.Addr().String()
}

// postBatch POSTs b to the coordinator at url with token and returns the
// answer's status.
func postBatch(t *testing.T, url, token string, b *wire.Batch) int {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/v1/sync", bytes.NewReader(b.AppendMsg(nil)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", coordinator.MsgpackContentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
