package coordinator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/internal/selfsigned"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// tlsClient trusts exactly the given certificates.
func tlsClient(pems ...[]byte) *http.Client {
	pool := x509.NewCertPool()
	for _, p := range pems {
		pool.AppendCertsFromPEM(p)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
}

// TestTLSServeAndReload: the coordinator serves sync batches over TLS with
// a self-signed certificate; after the files change, Reload serves the
// new certificate to new connections; a Reload of bad files keeps the one
// in use; a client that does not trust the certificate is refused.
func TestTLSServeAndReload(t *testing.T) {
	dir := t.TempDir()
	first, err := selfsigned.Write(dir, "coord", "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewCertReloader(first.CertFile, first.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	c, clk := newTestCoordinator(t, t0, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Serve(ctx, r.Listener(ln)) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	base := "https://" + ln.Addr().String()
	post := func(cl *http.Client, seq int64) (*http.Response, error) {
		body := batch("a", seq, clk.now(), wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: 1}).AppendMsg(nil)
		req, _ := http.NewRequest("POST", base+"/v1/sync", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", MsgpackContentType)
		return cl.Do(req)
	}
	resp, err := post(tlsClient(first.CertPEM), 1)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil || resp.TLS.PeerCertificates[0].SerialNumber.Cmp(first.Cert.SerialNumber) != 0 {
		t.Fatalf("sync over TLS: %d %v", resp.StatusCode, resp.TLS)
	}
	// A client that trusts nothing of ours is refused by its own check.
	if _, err := post(tlsClient(), 2); err == nil || !errors.As(err, new(*tls.CertificateVerificationError)) {
		t.Fatalf("an untrusting client: %v", err)
	}
	// New files (a renewed certificate), then Reload: new handshakes get it.
	second, err := selfsigned.Write(dir, "coord", "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Certificate().Leaf.SerialNumber; got.Cmp(first.Cert.SerialNumber) != 0 {
		t.Fatalf("the certificate changed before Reload: %v", got)
	}
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	resp, err = post(tlsClient(second.CertPEM), 2)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS.PeerCertificates[0].SerialNumber.Cmp(second.Cert.SerialNumber) != 0 {
		t.Fatalf("after Reload: %d, serial %v, want %v", resp.StatusCode, resp.TLS.PeerCertificates[0].SerialNumber, second.Cert.SerialNumber)
	}
	// A broken key file: Reload fails and the certificate in use stays.
	if err := os.WriteFile(second.KeyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); err == nil || !strings.HasPrefix(err.Error(), "coordinator: tls: ") {
		t.Fatalf("Reload of a broken key: %v", err)
	}
	resp, err = post(tlsClient(second.CertPEM), 3)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("after a failed Reload: %d", resp.StatusCode)
	}
	if !strings.Contains(r.Describe(), "127.0.0.1") {
		t.Fatalf("Describe: %s", r.Describe())
	}
}

// TestTLSMissingFiles: NewCertReloader says which file is wrong.
func TestTLSMissingFiles(t *testing.T) {
	if _, err := NewCertReloader("/nonexistent/cert.pem", "/nonexistent/key.pem"); err == nil || !strings.Contains(err.Error(), "/nonexistent/cert.pem") {
		t.Fatalf("err %v", err)
	}
}
