package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// WAIT. With Options.Wait > 0 every pipeline of writes ends with WAIT on
// the connection that sent it, so a batch is acknowledged only once that
// many replicas of each master it wrote to have its writes. What happens
// when they cannot (a master left with fewer replicas than Wait: after a
// failover with one replica per master, its promoted replica has none
// until the old master is back) is Options.WaitDegraded's choice:
//
//   - refusal (the default): WAIT is repeated, on the same connection,
//     until it is met or Options.RetryFor has passed; then the batch
//     answers 503 (nothing is lost: the isolate resends it, and what was
//     written is found by the marks). A replica that is merely catching up
//     (reconnecting to a newly promoted master) is waited for.
//   - degraded: the write is accepted with the replicas there are; the
//     shortfall is counted (Stats.WaitShortfalls, Stats.WaitDegraded) and,
//     until a WAIT on that master is met again, WAIT there waits only
//     degradedWait, so the shard keeps its throughput. Its writes are then
//     as durable as without WAIT.
//
// Either way the start of a shortfall on a master and its end are logged
// once each.

// degradedWait is the WAIT timeout on a master known to fall short, in
// degraded mode: 10 ms.
const degradedWait = 10 * time.Millisecond

// ErrWaitShortfall reports a WAIT answered by fewer replicas than
// Options.Wait (refusal mode): the write was applied on the master but is
// not known to be replicated.
var ErrWaitShortfall = errors.New("redisstore: WAIT not met")

// waitReplicas runs WAIT on conn (the connection of the writes of the
// master at addr), repeating it until end in refusal mode.
func (s *Store) waitReplicas(ctx context.Context, conn *redis.Conn, addr string, end time.Time) error {
	timeout := s.opts.WaitTimeout
	if _, short := s.short.Load(addr); short && s.opts.WaitDegraded {
		timeout = degradedWait
	}
	for {
		start := time.Now()
		n, err := conn.Wait(ctx, s.opts.Wait, max(timeout, time.Millisecond)).Result()
		s.stats.roundTrip(start)
		if err != nil {
			return fmt.Errorf("redisstore: WAIT on %s: %w", addr, err)
		}
		if n >= int64(s.opts.Wait) {
			if _, was := s.short.LoadAndDelete(addr); was {
				s.opts.Logger.Info("redisstore: WAIT met again", "master", addr, "replicas", n)
			}
			return nil
		}
		s.stats.waitShortfalls.Add(1)
		if _, was := s.short.LoadOrStore(addr, true); !was {
			mode := "refusing its writes (503) until it is met"
			if s.opts.WaitDegraded {
				mode = "accepting its writes with the replicas there are (degraded mode)"
			}
			s.opts.Logger.Warn("redisstore: WAIT falls short; "+mode, "master", addr, "replicas", n, "want", s.opts.Wait,
				"wait_timeout", timeout.String())
		}
		if s.opts.WaitDegraded {
			s.stats.waitDegraded.Add(1)
			return nil
		}
		if ctx.Err() != nil || time.Now().Add(timeout).After(end) {
			return fmt.Errorf("%w on %s: %d of %d replicas acknowledged (waited %s each time, until the retry bound)",
				ErrWaitShortfall, addr, n, s.opts.Wait, timeout)
		}
	}
}
