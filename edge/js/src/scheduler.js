// When an isolate syncs: the same rules as the Go edge host's scheduler
// (edge/syncloop/scheduler.go), in milliseconds: a jittered interval, early
// syncs when the module asks (no closer than minSpacing), exponential
// backoff after failures, probes past the backoff when requests come
// (no closer than probeInterval), at most one attempt in flight, and a
// stale bound for the fail policies (reached only while syncs fail: an
// idle isolate is not stale).

import { EdgeLimitError } from './errors.js';

/**
 * How long an attempt may be in flight before the syncs count as failing
 * (stale), when staleAfter is shorter: 1000 ms (syncloop.SlowAttempt).
 * Counted from staleAfter (300 ms by default), replies 400-700 ms away let
 * the default policy, open, admit strict keys of 10/s at 12-40 a window.
 */
export const SLOW_ATTEMPT_MS = 1000;

export class Scheduler {
  /**
   * @param {{interval: number, jitter?: number, minSpacing?: number,
   *   backoffBase?: number, backoffMax?: number, staleAfter?: number,
   *   probeInterval?: number}} o ms
   * @param {number} now ms
   * @param {() => number} [rand] uniform in [0, 1)
   */
  constructor(o, now, rand = Math.random) {
    if (!(o.interval > 0)) throw new EdgeLimitError('create: option syncInterval: must be a positive number of ms', 'bad_options');
    this.interval = o.interval;
    this.jitterFrac = o.jitter ?? 0.1;
    this.minSpacing = o.minSpacing ?? o.interval / 10;
    this.backoffBase = o.backoffBase ?? o.interval;
    this.backoffMax = o.backoffMax ?? 30000;
    this.staleAfter = o.staleAfter ?? 3 * o.interval;
    this.probeInterval = o.probeInterval ?? 500;
    this.rand = rand;
    this.lastOK = now;
    this.lastStart = 0;
    this.lastEnd = 0; // when the last attempt failed (quiet)
    this.started = false;
    this.inflight = false;
    this.failures = 0;
    this.next = now + 1 + Math.floor(rand() * this.interval);
  }

  /** Whether a regular sync should start at now. */
  due(now) { return !this.inflight && now >= this.next; }

  /**
   * Whether the view is stale at now (the fail policies apply): the last
   * good sync is older than staleAfter and syncs fail (the last attempt
   * failed, or the one in flight began SLOW_ATTEMPT_MS ago or more, or
   * staleAfter if longer: a coordinator that answers slowly keeps the view
   * fresh, as in the Go host's syncloop.IsStale). An isolate that was
   * only idle is not stale: its next sync refreshes it. An attempt in
   * flight for SLOW_ATTEMPT_MS exactly counts: in workerd the clock stands
   * still between I/O, so a request that waited retryWait (1 s) for the
   * attempt its own ask began found it 1000 ms old to the millisecond, and
   * its denial for want of a lease stood under open.
   */
  stale(now) {
    if (now - this.lastOK <= this.staleAfter) return false;
    return this.failures > 0 || (this.inflight && now - this.lastStart >= Math.max(this.staleAfter, SLOW_ATTEMPT_MS));
  }

  /**
   * Whether the syncs fail and no attempt began or failed within d ms of
   * now: what the isolate knows of the coordinator is that old (an idle
   * Worker's, or one backing off). An attempt that ended by failing is as
   * recent a word as one that began: against a coordinator that hangs,
   * each attempt is abandoned a second after it began, and measured from
   * its start every request found the isolate quiet and waited for a
   * probe of its own (limit() took up to a second, every second).
   */
  quiet(now, d) {
    return !this.inflight && this.failures > 0 && now - Math.max(this.lastStart, this.lastEnd) >= d;
  }

  /**
   * A request found the syncs failing at now: true when an attempt should
   * start now, past the backoff (none in flight, the last one began at
   * least probeInterval ago). False while syncs succeed, or when
   * probeInterval is negative.
   */
  probe(now) {
    if (this.probeInterval < 0 || this.inflight || this.failures === 0) return false;
    return now - this.lastStart >= this.probeInterval;
  }

  /**
   * The module asked for an early sync at now: true when it should start
   * now; otherwise the next sync moves to the earliest time minSpacing
   * allows. Not while in flight or backing off.
   */
  want(now) {
    if (this.minSpacing < 0 || this.inflight || this.failures > 0) return false;
    const at = this.started ? Math.max(now, this.lastStart + this.minSpacing) : now;
    if (at <= now) return true;
    this.next = Math.min(this.next, at);
    return false;
  }

  /**
   * The clock its times were read on stepped by d ms (the isolate's
   * offset to the coordinator's time moved): the times it holds move
   * with it, so a step changes no wait (a step back of 3 s does not put
   * the next sync 3 s further off).
   */
  shift(d) {
    this.lastOK += d;
    this.lastStart += d;
    this.lastEnd += d;
    this.next += d;
  }

  begin(now) { this.inflight = true; this.started = true; this.lastStart = now; }

  success(now) {
    this.inflight = false; this.failures = 0; this.lastOK = now;
    this.next = now + this.jitter(this.interval);
  }

  /** Nothing to sync at now: as fresh as it needs to be (unless failing). */
  idle(now) {
    this.inflight = false;
    if (this.failures === 0) this.lastOK = now;
    this.next = now + this.jitter(this.interval);
  }

  // Doubling from backoffBase, capped at backoffMax and at how long the
  // syncs have failed (at least backoffBase): requests' probes during a
  // short outage must not push the next attempt 30 s away (the Go
  // syncloop.Scheduler.Failure).
  failure(now) {
    this.inflight = false;
    this.lastEnd = now;
    if (this.failures === 0) this.failedAt = now;
    this.failures++;
    let d = this.backoffBase;
    for (let i = 1; i < this.failures && d < this.backoffMax; i++) d *= 2;
    d = Math.min(d, this.backoffMax, Math.max(this.backoffBase, now - this.failedAt));
    this.next = now + Math.max(this.jitter(d), 1);
  }

  jitter(d) {
    if (this.jitterFrac <= 0 || d <= 0) return d;
    const span = d * this.jitterFrac;
    return d - span + this.rand() * 2 * span;
  }
}
