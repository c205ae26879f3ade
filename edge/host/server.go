package host

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Defaults of ServerOptions. A decision request is a few hundred bytes
// answered in microseconds (at most RetryWait when it waits for a sync), so
// the edge host's bounds are tighter than the coordinator's (60 s read,
// 4 MiB body): a client trickling a body holds a connection for at most
// DefaultReadTimeout.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 10 * time.Second
	DefaultWriteTimeout      = 10 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxBodyBytes      = 64 << 10
	DefaultShutdownTimeout   = 10 * time.Second
)

// ServerOptions bound the HTTP connections of Serve. Zero fields take the
// defaults; a negative timeout disables it.
type ServerOptions struct {
	// ReadHeaderTimeout bounds reading a request's headers. Default 5s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included, from its
	// first byte. Default 10s.
	ReadTimeout time.Duration
	// WriteTimeout bounds a request from the end of its headers to the end
	// of the answer; it must exceed Options.RetryWait. Default 10s.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle that long. Default 120s.
	IdleTimeout time.Duration
	// MaxBodyBytes caps a request body, in bytes; a larger one is answered
	// 413. Default 64 KiB (65536).
	MaxBodyBytes int64
	// AllowedHosts are the host names (no port; hostcheck.Any for all)
	// a host served on loopback answers besides the loopback ones
	// (localhost, *.localhost, 127.0.0.0/8, ::1): Serve refuses other
	// Host headers 403, against DNS rebinding (hostguard.go). Default
	// none. On another address any Host is answered.
	AllowedHosts []string
}

func (o *ServerOptions) ensureDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		switch {
		case *d == 0:
			*d = v
		case *d < 0:
			*d = 0 // net/http: no timeout
		}
	}
	def(&o.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&o.ReadTimeout, DefaultReadTimeout)
	def(&o.WriteTimeout, DefaultWriteTimeout)
	def(&o.IdleTimeout, DefaultIdleTimeout)
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
}

// Server returns an http.Server for the host's Handler with the timeouts
// of Options.Server; its Shutdown ends the host's waits and closes the
// connections that have not sent a request at once (stop.go).
func (h *Host) Server() *http.Server {
	o := h.opts.Server
	srv := &http.Server{Handler: h.Handler(), ReadHeaderTimeout: o.ReadHeaderTimeout, ReadTimeout: o.ReadTimeout,
		WriteTimeout: o.WriteTimeout, IdleTimeout: o.IdleTimeout, ConnState: h.stop.connState}
	srv.RegisterOnShutdown(h.stop.stop) // stop.go: waits answer, idle new connections close
	return srv
}

// Serve answers HTTP requests on ln until ctx is done, then shuts down
// gracefully (waiting at most DefaultShutdownTimeout for requests in
// flight). It returns nil after a shutdown, or the server's error. On a
// loopback ln, Host headers other than loopback ones and
// ServerOptions.AllowedHosts are refused 403 (hostguard.go).
func (h *Host) Serve(ctx context.Context, ln net.Listener) error {
	srv := h.Server()
	srv.Handler = h.guardHost(ln, srv.Handler) // hostguard.go
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("host: %w", err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), DefaultShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			return fmt.Errorf("host: shutdown: %w", err)
		}
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("host: %w", err)
		}
		return nil
	}
}
