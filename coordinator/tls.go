package coordinator

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"sync/atomic"
	"time"
)

// CertReloader serves TLS with a certificate and key read from PEM files,
// read again by Reload (the CLI calls it on SIGHUP): handshakes after a
// successful Reload present the new certificate, connections already open
// keep theirs, and a Reload that fails (a missing file, a key that does
// not match) keeps the certificate in use. It is safe for concurrent use.
type CertReloader struct {
	certFile, keyFile string
	cert              atomic.Pointer[tls.Certificate]
}

// NewCertReloader reads the PEM certificate chain in certFile and its
// private key in keyFile.
func NewCertReloader(certFile, keyFile string) (*CertReloader, error) {
	r := &CertReloader{certFile: certFile, keyFile: keyFile}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload reads the files again and, when they hold a valid pair, serves
// it from the next handshake on; on error the certificate in use stays.
func (r *CertReloader) Reload() error {
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("coordinator: tls: %w", err)
	}
	if c.Leaf == nil {
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return fmt.Errorf("coordinator: tls: %s: %w", r.certFile, err)
		}
	}
	r.cert.Store(&c)
	return nil
}

// Certificate returns the certificate served now (its Leaf parsed).
func (r *CertReloader) Certificate() *tls.Certificate { return r.cert.Load() }

// GetCertificate implements tls.Config.GetCertificate.
func (r *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cert.Load(), nil
}

// TLSConfig returns a server configuration that serves r's certificate:
// TLS 1.2 or later, HTTP/1.1 (what Workers' fetch and the edge hosts
// speak to the coordinator).
func (r *CertReloader) TLSConfig() *tls.Config {
	return &tls.Config{GetCertificate: r.GetCertificate, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
}

// Listener wraps ln so that its connections speak TLS with r's
// certificate: pass it to Coordinator.Serve.
func (r *CertReloader) Listener(ln net.Listener) net.Listener {
	return tls.NewListener(ln, r.TLSConfig())
}

// Describe summarises the certificate served now for a log line: its
// subject, names and expiry.
func (r *CertReloader) Describe() string {
	c := r.cert.Load()
	if c == nil || c.Leaf == nil {
		return "no certificate"
	}
	names := append(append([]string{}, c.Leaf.DNSNames...), ipStrings(c.Leaf.IPAddresses)...)
	return fmt.Sprintf("subject %q, names %v, expires %s", c.Leaf.Subject.String(), names, c.Leaf.NotAfter.UTC().Format(time.RFC3339))
}

func ipStrings(ips []net.IP) []string {
	s := make([]string, len(ips))
	for i, ip := range ips {
		s[i] = ip.String()
	}
	return s
}
