package main

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"testing"
	"time"
)

// TestAllowedHostsFlag: `edgelimit coordinator` and `edgelimit edge` on
// loopback refuse a Host that is not loopback (DNS rebinding) and answer
// one given with --allowed-hosts (the edge through EDGELIMIT_ALLOWED_HOSTS).
func TestAllowedHostsFlag(t *testing.T) {
	t.Setenv("EDGELIMIT_ALLOWED_HOSTS", "edge.example")
	for _, args := range [][]string{
		{"coordinator", "--in-memory", "--listen", "127.0.0.1:0", "--allowed-hosts", "proxy.example:443, coord.example"},
		{"edge", "--listen", "127.0.0.1:0", "--isolates", "1"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		var stderr syncBuffer
		done := make(chan error, 1)
		go func() { done <- Main(ctx, args, &bytes.Buffer{}, &stderr) }()
		re := regexp.MustCompile(`listening on (127\.0\.0\.1:\d+)`)
		var addr string
		for deadline := time.Now().Add(10 * time.Second); addr == ""; time.Sleep(10 * time.Millisecond) {
			if m := re.FindStringSubmatch(stderr.String()); m != nil {
				addr = m[1]
			} else if time.Now().After(deadline) {
				cancel()
				t.Fatalf("%s: no listen address in %q", args[0], stderr.String())
			}
		}
		want := map[string]int{"evil.example": 403, "127.0.0.1": 200, "localhost:7070": 200}
		if args[0] == "coordinator" {
			want["proxy.example"], want["coord.example:8443"], want["edge.example"] = 200, 200, 403
		} else {
			want["edge.example:80"], want["coord.example"] = 200, 403
		}
		for host, code := range want {
			req, _ := http.NewRequest("GET", "http://"+addr+"/healthz", nil)
			req.Host = host
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != code {
				t.Errorf("%s: GET /healthz with Host %s: %d, want %d", args[0], host, resp.StatusCode, code)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: %v", args[0], err)
		}
	}
}
