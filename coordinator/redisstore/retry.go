package redisstore

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Failover. When a master dies, the commands sent to it fail (connection
// refused or reset, timeouts) until the cluster promotes one of its
// replicas (cluster-node-timeout, then an election: 2-3 s with a 1 s node
// timeout), and the other nodes answer CLUSTERDOWN meanwhile; then the
// slots have a new master, which the client learns from the slot map
// (CLUSTER SLOTS). go-redis refreshes its map lazily (at most every 200 ms
// after a failure, or every 10 s), and the write path addresses masters
// directly (a pipeline of scripts per master), so the store does it
// itself: a failed round trip whose error is retryable (see retryable)
// reloads the slot map at once (synchronously, shared by the concurrent
// callers: at most one reload per reloadEvery) and is tried again, with a
// short backoff, until it succeeds, the caller's context ends, or
// Options.RetryFor has passed. So a batch that arrives during a failover
// waits for the promotion instead of failing, and is written on the new
// master as soon as it answers.

// reloadEvery bounds how often the slot map is reloaded on failures: 50 ms.
const reloadEvery = 50 * time.Millisecond

// retryBackoff is the first wait between two attempts (doubling, at most
// retryBackoffMax).
const (
	retryBackoff    = 10 * time.Millisecond
	retryBackoffMax = 100 * time.Millisecond
)

// retryable reports whether err is worth another attempt after the slot
// map is reloaded: a connection error (refused, reset, EOF, timeout, a full
// pool) or a reply that says the cluster is changing (CLUSTERDOWN,
// TRYAGAIN, MOVED, ASK, LOADING, READONLY from a master demoted to
// replica, MASTERDOWN), or a script that named a key its node does not
// serve (countScript: a slot moved; it wrote nothing). Context errors,
// other script errors and other replies are not.
func retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	for _, p := range []string{"CLUSTERDOWN", "TRYAGAIN", "MOVED", "ASK", "LOADING", "READONLY", "MASTERDOWN"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	// Errors wrapped as text (a pipeline's joined errors).
	s := err.Error()
	return strings.Contains(s, "connection refused") || strings.Contains(s, "connection reset") ||
		strings.Contains(s, "broken pipe") || strings.Contains(s, "connection pool timeout") || strings.Contains(s, "CLUSTERDOWN") || strings.Contains(s, "TRYAGAIN") ||
		strings.Contains(s, "non local key")
}

// reloader reloads the slot map synchronously, at most once per
// reloadEvery; concurrent callers share one reload.
type reloader struct {
	mu   sync.Mutex
	last time.Time
}

// reload refreshes the cluster client's slot map from a node that answers
// (ForEachMaster reloads the map synchronously before visiting the
// masters; visiting them does nothing here).
func (s *Store) reload(ctx context.Context) {
	s.rl.mu.Lock()
	defer s.rl.mu.Unlock()
	if time.Since(s.rl.last) < reloadEvery {
		return
	}
	s.rl.last = time.Now()
	s.stats.slotReloads.Add(1)
	if s.rdb != nil {
		s.forEachMaster(ctx, func(context.Context, *redis.Client) error { return nil })
	}
}

// retryDeadline returns when the attempts started at start stop: at
// Options.RetryFor, or ctx's deadline when sooner.
func (s *Store) retryDeadline(ctx context.Context, start time.Time) time.Time {
	end := start.Add(s.opts.RetryFor)
	if d, ok := ctx.Deadline(); ok && d.Before(end) {
		end = d
	}
	return end
}

// retry runs attempt until it returns nil or an error retryable does not
// accept, ctx ends, or the deadline (retryDeadline) would pass during the
// next backoff; the slot map is reloaded before each new attempt. It
// returns attempt's last error. op names the operation in the logs.
func (s *Store) retry(ctx context.Context, op string, attempt func(ctx context.Context) error) error {
	start := time.Now()
	end := s.retryDeadline(ctx, start)
	wait := retryBackoff
	for {
		actx, cancel := context.WithDeadline(ctx, end)
		err := attempt(actx)
		cancel()
		switch {
		case err == nil || errors.Is(err, redis.Nil):
			s.health.succeeded()
			return err
		case retryable(err), errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			s.health.failed(op, err) // Redis did not answer
		default:
			if refusal(err) {
				s.health.failed(op, err) // Redis answers, and refuses writes
			}
			return err // Redis answered (an error reply), or the caller gave up
		}
		if !retryable(err) || ctx.Err() != nil || time.Now().Add(wait).After(end) {
			return err
		}
		if !s.backoff(ctx, &wait) {
			return err
		}
		s.reload(ctx)
	}
}

// backoff counts a retry and sleeps for *wait, then doubles it (at most
// retryBackoffMax). It reports false, at once, when ctx ends first.
func (s *Store) backoff(ctx context.Context, wait *time.Duration) bool {
	s.stats.retries.Add(1)
	t := time.NewTimer(*wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return false
	}
	*wait = min(2**wait, retryBackoffMax)
	return true
}
