package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// The ways to reach Redis (Options.Mode), each through go-redis's
// universal client interface: a Redis Cluster (the keys spread over its
// masters by bucket), one standalone server, or the master of a
// Sentinel-managed group (go-redis's failover client asks the Sentinels
// for the current master and follows a failover). Whatever the mode, the
// keys and scripts are the same: the hash tags keep a bucket's keys in one
// slot on a cluster and mean nothing elsewhere.

// Mode says how Options.Addrs are reached.
type Mode string

// The modes.
const (
	// ModeAuto is a cluster, unless a single address answers with
	// cluster_enabled:0: then a standalone server.
	ModeAuto Mode = ""
	// ModeCluster: Addrs are seed nodes of a Redis Cluster.
	ModeCluster Mode = "cluster"
	// ModeStandalone: Addrs is one standalone redis-server.
	ModeStandalone Mode = "standalone"
	// ModeSentinel: Addrs are Sentinels watching the master named
	// Options.SentinelMaster.
	ModeSentinel Mode = "sentinel"
)

// connect opens the client of o (o.Mode resolved first) and checks that
// it answers.
func connect(ctx context.Context, o *Options) (redis.UniversalClient, error) {
	timeouts := func(c *redis.Options) {
		c.Username, c.Password, c.TLSConfig = o.Username, o.Password, o.TLS
		c.DialTimeout, c.ReadTimeout, c.WriteTimeout = o.Timeout, 2*o.Timeout+o.WaitTimeout, o.Timeout
		c.PoolSize, c.MaxRetries, c.MinRetryBackoff, c.MaxRetryBackoff = o.PoolSize, 2, 10*time.Millisecond, 100*time.Millisecond
		// A context's deadline bounds a round trip's reads too: without it
		// a probe of a hung server (SIGSTOP) took the read timeout, 5 s,
		// past its own 2 s.
		c.ContextTimeoutEnabled = true
	}
	if o.Mode == ModeAuto {
		o.Mode = ModeCluster
		if len(o.Addrs) == 1 {
			opts := &redis.Options{Addr: o.Addrs[0]}
			timeouts(opts)
			c := redis.NewClient(opts)
			info, err := c.Info(ctx, "cluster").Result()
			c.Close()
			if err != nil {
				return nil, fmt.Errorf("redisstore: %s: %w%s", o.Addrs[0], err, tlsHint(o, err))
			}
			if !strings.Contains(info, "cluster_enabled:1") {
				o.Mode = ModeStandalone
			}
		}
	}
	var rdb redis.UniversalClient
	switch o.Mode {
	case ModeCluster:
		// Few redirects and short backoffs: a failover is retried by the
		// store itself, with a synchronous slot map reload (retry.go),
		// rather than for a second inside go-redis's pipeline.
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: o.Addrs, Username: o.Username, Password: o.Password,
			TLSConfig: o.TLS, DialTimeout: o.Timeout, ReadTimeout: 2*o.Timeout + o.WaitTimeout, WriteTimeout: o.Timeout,
			PoolSize: o.PoolSize, MaxRedirects: 3, MaxRetries: 2, MinRetryBackoff: 10 * time.Millisecond, MaxRetryBackoff: 100 * time.Millisecond,
			ContextTimeoutEnabled: true})
	case ModeStandalone:
		if len(o.Addrs) != 1 {
			return nil, fmt.Errorf("redisstore: a standalone server has one address, not %d", len(o.Addrs))
		}
		opts := &redis.Options{Addr: o.Addrs[0]}
		timeouts(opts)
		rdb = redis.NewClient(opts)
	case ModeSentinel:
		if o.SentinelMaster == "" {
			return nil, fmt.Errorf("redisstore: sentinel mode needs the master's name")
		}
		opts := &redis.Options{}
		timeouts(opts)
		rdb = redis.NewFailoverClient(&redis.FailoverOptions{MasterName: o.SentinelMaster, SentinelAddrs: o.Addrs,
			SentinelUsername: o.SentinelUsername, SentinelPassword: o.SentinelPassword,
			Username: opts.Username, Password: opts.Password, TLSConfig: opts.TLSConfig,
			DialTimeout: opts.DialTimeout, ReadTimeout: opts.ReadTimeout, WriteTimeout: opts.WriteTimeout,
			PoolSize: opts.PoolSize, MaxRetries: opts.MaxRetries, MinRetryBackoff: opts.MinRetryBackoff, MaxRetryBackoff: opts.MaxRetryBackoff,
			ContextTimeoutEnabled: true})
	default:
		return nil, fmt.Errorf("redisstore: unknown mode %q (want cluster, standalone or sentinel)", o.Mode)
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		if o.Mode == ModeSentinel && strings.Contains(err.Error(), "sentinels specified in configuration are unreachable") {
			// go-redis says so too when the Sentinels answer but know no
			// master of that name.
			return nil, fmt.Errorf("redisstore: sentinel %s: no Sentinel answered with the master named %q (is the name right?): %w", strings.Join(o.Addrs, ","), o.SentinelMaster, err)
		}
		return nil, fmt.Errorf("redisstore: %s %s: %w%s", o.Mode, strings.Join(o.Addrs, ","), err, tlsHint(o, err))
	}
	return rdb, nil
}

// tlsHint is what to add to err, the failure of a first round trip, when
// it looks like a scheme that does not match the port: a TLS client on a
// plain port waits for a handshake that never comes (the error said only
// "context deadline exceeded"), and a plain client on a TLS-only port is
// hung up on. Empty otherwise.
func tlsHint(o *Options, err error) string {
	var ne net.Error
	timeout := errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
	switch {
	case o.TLS != nil && timeout:
		return " (no TLS handshake answered within the timeout: if the port serves plain Redis, use redis://)"
	case o.TLS == nil && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)):
		return " (the server closed the connection: if the port serves TLS only, use rediss://)"
	}
	return ""
}

// masterFor returns the client of the master that holds key.
func (s *Store) masterFor(ctx context.Context, key string) (*redis.Client, error) {
	switch c := s.rdb.(type) {
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	case *redis.Client:
		return c, nil
	}
	return nil, fmt.Errorf("redisstore: unexpected client %T", s.rdb)
}

// forEachMaster calls fn for each master (concurrently on a cluster,
// whose slot map is reloaded first) and returns one of their errors.
func (s *Store) forEachMaster(ctx context.Context, fn func(ctx context.Context, c *redis.Client) error) error {
	switch c := s.rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, fn)
	case *redis.Client:
		return fn(ctx, c)
	}
	return fmt.Errorf("redisstore: unexpected client %T", s.rdb)
}

// reloadLazy asks a cluster client to reload its slot map in the
// background (no-op otherwise: a Sentinel client finds the new master on
// its own when it reconnects).
func (s *Store) reloadLazy(ctx context.Context) {
	if c, ok := s.rdb.(*redis.ClusterClient); ok {
		c.ReloadState(ctx)
	}
}

// isCluster reports whether the store is on a Redis Cluster.
func (s *Store) isCluster() bool {
	_, ok := s.rdb.(*redis.ClusterClient)
	return ok
}

// Mode returns how the store reaches Redis (ModeAuto resolved at Open).
func (s *Store) Mode() Mode { return s.opts.Mode }
