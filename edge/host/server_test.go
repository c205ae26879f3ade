package host

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestSlowBodyIsCut: clients that send headers and then trickle a body a
// byte at a time over real loopback connections are cut off once the read
// timeout passes (the server closes the connection), all of them within a
// bound; the host keeps answering others, and a body over the cap is 413.
func TestSlowBodyIsCut(t *testing.T) {
	s := serve(t, Options{Config: config(wire.Approximate, 100), Isolates: 1, RetryWait: -1,
		Server: ServerOptions{ReadHeaderTimeout: 200 * time.Millisecond, ReadTimeout: 300 * time.Millisecond,
			WriteTimeout: 2 * time.Second, IdleTimeout: time.Second, MaxBodyBytes: 1024}})
	addr := strings.TrimPrefix(s.url, "http://")
	const conns = 20
	const bound = 5 * time.Second // without a read timeout they trickle for all of it
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			fmt.Fprintf(c, "POST /v1/decide HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\n")
			closed := make(chan struct{})
			go func() { // read until the server closes the connection
				io.Copy(io.Discard, c)
				close(closed)
			}()
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			stop := time.After(bound)
			for {
				select {
				case <-closed:
					return
				case <-stop:
					errs <- fmt.Errorf("a connection trickling a body was still open after %v", bound)
					return
				case <-tick.C:
					c.Write([]byte("k")) // an error here also ends in closed
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if code, _, _ := s.decide(t, url.Values{"limiter": {"api"}, "key": {"after"}}); code != 200 {
		t.Errorf("after the slow clients: status %d", code)
	}
	resp, err := http.Post(s.url+"/v1/decide", "application/x-www-form-urlencoded",
		strings.NewReader("limiter=api&key="+strings.Repeat("k", 2000)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 2 KB body against a 1 KiB cap: status %d, want 413", resp.StatusCode)
	}
	resp, err = http.Post(s.url+"/v1/decide", "application/x-www-form-urlencoded", strings.NewReader("limiter=api&key=form"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("a small form body: status %d", resp.StatusCode)
	}
}

// TestWriteTimeoutMustExceedRetryWait: a host whose write timeout would cut
// requests waiting for a sync is refused at start.
func TestWriteTimeoutMustExceedRetryWait(t *testing.T) {
	_, err := New(t.Context(), Options{Config: config(wire.Strict, 1), RetryWait: 2 * time.Second, driven: true,
		Server: ServerOptions{WriteTimeout: time.Second}})
	if err == nil || !strings.Contains(err.Error(), "host: the write timeout") {
		t.Fatalf("err %v", err)
	}
}

// TestRepeatedKeyThroughHost: the probe, through the edge host: a
// multi-check naming one limiter and key three times at cost 3 against a
// limit of 6 is denied (the core judges the summed cost), twice is
// allowed, and nothing is left after.
func TestRepeatedKeyThroughHost(t *testing.T) {
	s := serve(t, Options{Config: config(wire.Approximate, 6), Isolates: 1})
	three := url.Values{"limiter": {"api", "api", "api"}, "key": {"y", "y", "y"}, "cost": {"3"}}
	if code, d, _ := s.decide(t, three); code != 429 || d.Allowed {
		t.Fatalf("3 x cost 3 on one key, limit 6: %d %+v, want 429", code, d)
	}
	two := url.Values{"limiter": {"api", "api"}, "key": {"y", "y"}, "cost": {"3"}}
	if code, d, _ := s.decide(t, two); code != 200 || d.Remaining != 0 {
		t.Fatalf("2 x cost 3 on one key, limit 6: %d %+v, want 200 with 0 remaining", code, d)
	}
	if code, _, _ := s.decide(t, url.Values{"limiter": {"api"}, "key": {"y"}}); code != 429 {
		t.Fatalf("after 6 of 6: status %d", code)
	}
}

// TestDeclaredBodyOverCapAnsweredAtOnce: a request whose Content-Length
// declares more than the body cap gets 413 without the host reading or
// waiting for the body: the client sends the headers only, over a real
// loopback connection, and the answer comes while the body never does (the
// read timeout, a minute here, would otherwise hold it; the connection's
// 30 s deadline only keeps a broken host from hanging the test).
func TestDeclaredBodyOverCapAnsweredAtOnce(t *testing.T) {
	s := serve(t, Options{Config: upstreamConfig(wire.Approximate), Isolates: 1, RetryWait: -1,
		Server: ServerOptions{ReadTimeout: time.Minute, WriteTimeout: 2 * time.Minute, MaxBodyBytes: 1024}})
	addr := strings.TrimPrefix(s.url, "http://")
	for _, path := range []string{"/v1/observe", "/v1/decide"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(30 * time.Second))
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n", path)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s: no answer before the body: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		c.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "1048576") {
			t.Fatalf("%s: %d %s, want 413 naming the declared length", path, resp.StatusCode, body)
		}
	}
}
