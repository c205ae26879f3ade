package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/internal/selfsigned"
)

// TestCoordinatorTLSAndSIGHUP: `edgelimit coordinator --tls-cert --tls-key`
// serves HTTPS with the certificate; after the files change, SIGHUP makes
// new connections get the new one; a SIGHUP with a broken key is logged
// and the certificate in use stays.
func TestCoordinatorTLSAndSIGHUP(t *testing.T) {
	dir := t.TempDir()
	first, err := selfsigned.Write(dir, "coord", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if err := runCoordinator(context.Background(), []string{"--in-memory", "--listen", "127.0.0.1:0", "--tls-cert", first.CertFile}, io.Discard, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "--tls-cert and --tls-key go together") {
		t.Fatalf("--tls-cert alone: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runCoordinator(ctx, []string{"--in-memory", "--listen", "127.0.0.1:0", "--tls-cert", first.CertFile, "--tls-key", first.KeyFile}, io.Discard, &stderr)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	addr := listenAddr(t, "coordinator", &stderr)
	// The serial number of the certificate a new connection gets.
	serial := func() string {
		t.Helper()
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) // the test reads the certificate; clients verify it (coordinator/tls_test.go)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	if got := serial(); got != first.Cert.SerialNumber.String() {
		t.Fatalf("serial %s, want %s", got, first.Cert.SerialNumber)
	}
	// The certificate verifies against itself for 127.0.0.1.
	pool := x509.NewCertPool()
	pool.AddCert(first.Cert)
	if conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool}); err != nil {
		t.Fatal(err)
	} else {
		conn.Close()
	}
	second, err := selfsigned.Write(dir, "coord", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	// hup sends SIGHUP and waits for want in a new log line. (The
	// configuration's handler logs its own line: waiting for any new
	// "SIGHUP" line read the log before the certificate's, once in CI.)
	hup := func(want string) {
		t.Helper()
		n := strings.Count(stderr.String(), want)
		if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(5 * time.Second); strings.Count(stderr.String(), want) == n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("after SIGHUP, want %q in a new line of:\n%s", want, stderr.String())
			}
		}
	}
	hup("certificate reloaded")
	if got := serial(); got != second.Cert.SerialNumber.String() {
		t.Fatalf("after SIGHUP: serial %s, want %s", got, second.Cert.SerialNumber)
	}
	if err := writeFile(second.KeyFile, "broken"); err != nil {
		t.Fatal(err)
	}
	hup("keeping the certificate in use")
	if got := serial(); got != second.Cert.SerialNumber.String() {
		t.Fatalf("after a failed reload: serial %s, want %s", got, second.Cert.SerialNumber)
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }
