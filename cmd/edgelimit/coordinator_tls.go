package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/edgelimit/edgelimit/coordinator"
)

// coordinatorTLS wraps ln in TLS with the certificate in certFile and the
// key in keyFile when both are set (neither: ln as it is), and reloads
// them on every SIGHUP until ctx ends: a reload that fails is logged and
// the certificate in use stays.
func coordinatorTLS(ctx context.Context, ln net.Listener, certFile, keyFile string, log *slog.Logger) (net.Listener, error) {
	if certFile == "" && keyFile == "" {
		return ln, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, errors.New("coordinator: --tls-cert and --tls-key go together")
	}
	r, err := coordinator.NewCertReloader(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	log.Info("coordinator: serving TLS, reloaded on SIGHUP", "cert", certFile, "certificate", r.Describe())
	onHUP(ctx, func() {
		if err := r.Reload(); err != nil {
			log.Warn(fmt.Sprintf("coordinator: SIGHUP: keeping the certificate in use: %v", err), "error", err.Error())
			return
		}
		log.Info("coordinator: SIGHUP: certificate reloaded", "certificate", r.Describe())
	})
	return r.Listener(ln), nil
}
