package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Health. The coordinator's GET /healthz asks the store (Probe) rather
// than remembering whether the last write failed: it answers 200 again as
// soon as Redis does, not after the next successful write. Errors are
// logged once per outage (the first failure, with the operation and the
// error) and once on recovery (how long it lasted and how many round
// trips failed), not per attempt.

// probeEvery is how long a probe's result is reused: 250 ms (health
// checks and metric scrapes share it).
const probeEvery = 250 * time.Millisecond

// outageQuiet is how long Redis must answer without a failed round trip
// for an outage to end: with one master down the others answer between
// failures, and ending the outage at the first answer logged one master's
// failure as 3 outages (19 and 21 in 11 s with WAIT and one replica per
// master, the probe failing on WAIT between writes that succeeded).
const outageQuiet = time.Second

// outage tracks the current run of failures, for the logs.
type outage struct {
	log   *slog.Logger
	stats *stats
	mu    sync.Mutex
	down  bool
	since time.Time
	last  time.Time // the last failed round trip
	nfail int64     // failed round trips in this outage
}

// failed records a failed round trip of op; the first of an outage is
// logged.
func (o *outage) failed(op string, err error) {
	o.stats.errors.Add(1)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.nfail++
	o.last = time.Now()
	if o.down {
		return
	}
	o.down, o.since, o.nfail = true, time.Now(), 1
	o.stats.outages.Add(1)
	o.log.Warn("redisstore: Redis unavailable; retrying (logged once, until it answers again)", "op", op, "err", err.Error())
}

// succeeded records a successful round trip; the first after an outage,
// outageQuiet or more after its last failure, ends it and is logged.
func (o *outage) succeeded() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.down || time.Since(o.last) < outageQuiet {
		return
	}
	o.down = false
	o.log.Info("redisstore: Redis answers again", "outage", time.Since(o.since).Round(time.Millisecond).String(), "failed_round_trips", o.nfail)
}

// prober caches the result of the last probe.
type prober struct {
	mu      sync.Mutex
	at      time.Time
	err     error
	masters []string // the masters the last successful probe saw, sorted
	// refusing is why the probes fail while Redis answers (logged once),
	// or "".
	refusing string
}

// Probe reports whether Redis serves writes now: every master (of the
// cluster's slot map, reloaded first; or the one master) answers, is a
// master, is not out of memory (memoryRefuses), and, when Options.Wait is
// set and Options.WaitDegraded is not,
// has at least Wait replicas online; and a cluster's state is ok. The result is reused for 250 ms. A
// change in the set of masters since the previous successful probe is
// counted as a failover (Stats.Failovers) and logged.
func (s *Store) Probe(ctx context.Context) error {
	s.pr.mu.Lock()
	defer s.pr.mu.Unlock()
	if time.Since(s.pr.at) < probeEvery {
		return s.pr.err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	var mu sync.Mutex
	var masters []string
	var errs []error
	err := s.forEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		if err := s.probeMaster(ctx, c, &mu, &masters); err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
		return nil
	})
	if err == nil {
		err = worstProbe(errs)
	}
	if err == nil {
		err = s.settingsOK(ctx)
	}
	s.pr.at = time.Now()
	if err != nil {
		s.pr.err = fmt.Errorf("redisstore: probe: %w", err)
		if unanswered(err) {
			s.health.failed("probe", err) // no answer: an outage
		} else if s.pr.refusing == "" {
			// Redis answers, and says no (too few replicas for WAIT, a
			// user without INFO, another coordinator's settings): not an
			// outage, which the next write that succeeds would end (the
			// outage log flapped every 1-2.5 s). Logged once, until the
			// probe passes.
			s.pr.refusing = err.Error()
			s.opts.Logger.Warn("redisstore: Redis answers but does not serve this coordinator's writes; /healthz answers 503 (logged once, until it does)", "err", err.Error())
		}
		s.reloadLazy(ctx)
		return s.pr.err
	}
	s.pr.err = nil
	if s.pr.refusing != "" {
		s.opts.Logger.Info("redisstore: Redis serves this coordinator's writes again", "was", s.pr.refusing)
		s.pr.refusing = ""
	}
	s.health.succeeded()
	slices.Sort(masters)
	if s.pr.masters != nil && !slices.Equal(masters, s.pr.masters) {
		s.stats.failovers.Add(1)
		s.opts.Logger.Info("redisstore: the cluster's masters changed", "before", strings.Join(s.pr.masters, ","), "now", strings.Join(masters, ","))
	}
	s.pr.masters = masters
	return nil
}

// unanswered reports whether a probe's error is Redis not answering
// (rather than answering no).
func unanswered(err error) bool {
	return retryable(err) || errors.Is(err, context.DeadlineExceeded)
}

// worstProbe is the error of errs, the masters' probes, that says most:
// a master that does not answer before one that answers no. With one
// master frozen past the node timeout, the others said at once that the
// cluster is not ok while its probe waited for the deadline, and the
// first error, which named a master that answered, was taken for a
// refusal, not an outage. Several that did not answer are all named. nil
// for none.
func worstProbe(errs []error) error {
	var silent []error
	for _, err := range errs {
		if unanswered(err) {
			silent = append(silent, err)
		}
	}
	switch {
	case len(silent) > 1:
		// Which did not answer is not known when the probe's deadline
		// passed for all (a slot map reload that waited on the frozen
		// master took it): name them all.
		rest := make([]string, len(silent)-1)
		for i, err := range silent[1:] {
			rest[i] = err.Error()
		}
		return fmt.Errorf("%w (also %s)", silent[0], strings.Join(rest, "; "))
	case len(silent) == 1:
		return silent[0]
	case len(errs) > 0:
		return errs[0]
	}
	return nil
}

// probeMaster probes the master of c for Probe, appending its address
// (or the replication id of a master behind Sentinels) to masters under
// mu when it passes.
func (s *Store) probeMaster(ctx context.Context, c *redis.Client, mu *sync.Mutex, masters *[]string) error {
	addr := c.Options().Addr
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return fmt.Errorf("master %s: %w", addr, err)
	}
	if !strings.Contains(info, "role:master") {
		return fmt.Errorf("master %s: no longer a master", addr)
	}
	mem, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return fmt.Errorf("master %s: %w", addr, err)
	}
	if err := memoryRefuses(mem); err != nil {
		return fmt.Errorf("master %s: %w", addr, err)
	}
	if s.opts.Wait > 0 && !s.opts.WaitDegraded {
		if n := strings.Count(info, "state=online"); n < s.opts.Wait {
			return fmt.Errorf("master %s: %d replicas online, WAIT needs %d", addr, n, s.opts.Wait)
		}
	}
	if s.isCluster() {
		ci, err := c.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("master %s: %w", addr, err)
		}
		if !strings.Contains(ci, "cluster_state:ok") {
			return fmt.Errorf("master %s: cluster_state is not ok", addr)
		}
	} else {
		// One master, behind a Sentinel client whose address is not the
		// master's: its replication id changes when a replica takes over.
		addr = "replid " + infoField(info, "master_replid")
	}
	mu.Lock()
	*masters = append(*masters, addr)
	mu.Unlock()
	return nil
}

// infoField returns the value of name in an INFO reply, or "".
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// memoryRefuses returns an error when an INFO memory reply says the master
// refuses writes: its maxmemory is set, its policy evicts nothing
// (noeviction), and the memory it counts for eviction (used_memory less
// mem_not_counted_for_evict) is past maxmemory, where Redis answers every
// write OOM. Before, /healthz answered 200 all the while (the probe asked
// only whether each master answered), and load balancers kept sending
// syncs that all failed.
func memoryRefuses(info string) error {
	num := func(name string) int64 {
		n, _ := strconv.ParseInt(strings.TrimSpace(infoField(info, name)), 10, 64)
		return n
	}
	limit := num("maxmemory")
	if limit <= 0 || strings.TrimSpace(infoField(info, "maxmemory_policy")) != "noeviction" {
		return nil
	}
	if used := num("used_memory") - num("mem_not_counted_for_evict"); used > limit {
		return fmt.Errorf("out of memory: %d bytes used of maxmemory %d under noeviction; every write is refused (OOM)", used, limit)
	}
	return nil
}

// refusal reports whether err is an error reply by which Redis refuses a
// write while it answers (out of memory, a failed background save, too few
// replicas, a busy script, a user without the permission): it fails every
// write until an operator or time ends it, so it counts as an outage for
// the logs and metrics (outage.failed), though retrying at once would not
// help.
func refusal(err error) bool {
	for _, p := range []string{"OOM", "MISCONF", "NOREPLICAS", "BUSY", "NOPERM"} {
		if redis.HasErrorPrefix(err, p) || strings.Contains(err.Error(), p+" ") {
			return true
		}
	}
	return false
}
