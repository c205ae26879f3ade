// Package selfsigned writes self-signed TLS certificates for the tests of
// the coordinator's TLS (Go, Node and workerd clients on loopback).
package selfsigned

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Pair is a certificate and its key written as PEM files.
type Pair struct {
	CertFile, KeyFile string
	// Cert is the certificate, parsed.
	Cert *x509.Certificate
	// CertPEM is the certificate file's content (what a client trusts).
	CertPEM []byte
}

// Write creates a self-signed ECDSA P-256 certificate for hosts (IP
// addresses or DNS names), valid from an hour ago for 24 hours, for
// servers and clients alike (Redis Cluster nodes present theirs to each
// other), and writes it and its key to dir/name.pem and dir/name-key.pem.
func Write(dir, name string, hosts ...string) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("selfsigned: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return Pair{}, fmt.Errorf("selfsigned: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: hosts[0], Organization: []string{"edgelimit test"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return Pair{}, fmt.Errorf("selfsigned: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return Pair{}, fmt.Errorf("selfsigned: %w", err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, fmt.Errorf("selfsigned: %w", err)
	}
	p := Pair{CertFile: filepath.Join(dir, name+".pem"), KeyFile: filepath.Join(dir, name+"-key.pem"), Cert: cert,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	if err := os.WriteFile(p.CertFile, p.CertPEM, 0o644); err != nil {
		return Pair{}, fmt.Errorf("selfsigned: %w", err)
	}
	if err := os.WriteFile(p.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return Pair{}, fmt.Errorf("selfsigned: %w", err)
	}
	return p, nil
}
