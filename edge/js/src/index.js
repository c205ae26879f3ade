// edgelimit for JavaScript: a global rate limiter for Cloudflare Workers
// and Node. Decisions are taken locally by the edgelimit Wasm module
// through its scalar exports (well under a microsecond); the module's
// deltas are synced in msgpack batches to the edgelimit coordinator
// (POST /v1/sync) in the background.

import { Module, MAX_KEY_LEN } from './module.js';
import { EdgeLimitError, ERROR_CODES, codeError, CODES } from './errors.js';
import { normalizeConfig, toWire, parseDuration } from './config.js';
import { checkOptions } from './options.js';
import { readReply, discardBody } from './replybody.js';
import { misconfigured, notAReply, refusal, unreachable } from './syncerror.js';
import { Scheduler, SLOW_ATTEMPT_MS } from './scheduler.js';
import { nextAsk, ASK_AMEND, ASK_BATCH, MAX_AMENDS } from './amend.js';
import { Retry } from './retry.js';
import { Share, OPEN, LOCAL_SHARE, CLOSED } from './failpolicy.js';
import { VERSION, PROTOCOL_VERSION } from './version.js';
import { steadyClock } from './steadyclock.js';

export { Module, EdgeLimitError, ERROR_CODES, CODES, parseDuration, Scheduler, Share, VERSION, PROTOCOL_VERSION };

const MAX_ISOLATE_ID = 128;
const te = new TextEncoder();
const tdFatal = new TextDecoder('utf-8', { fatal: true });
const DEFAULT_MAX_KEYS = 100000; // the module's key table without max_keys (config.js)

// The coordinator's time on its answers (ns since the epoch): the isolate
// runs on it (_observeTime; the Go host's clock.Header and clock.Offset).
const TIME_HEADER = 'edgelimit-time';
const OFFSET_TOLERANCE_MS = 5; // readings within this of the offset change nothing (as clock.DefaultOffsetTolerance)
const MAX_OFFSET_MS = 24 * 3600 * 1000; // a reading further apart is taken only when the next agrees (clock.MaxOffset)
const MAX_READING_NS = 2 ** 62; // a reading of the coordinator's clock past it, or before the epoch, is ignored (clock.MaxReading)
const FAR_AGREE_MS = 1000; // how close that next reading must be (clock.FarAgree)
const MAX_TOLD_UNCOUNTED = 16; // lists of uncounted limiters said (_uncounted)

// What _waitSync resolves to when no reply came (in time, or the sync
// failed), and for a second reply to the last batch.
const NO_REPLY = Object.freeze({ ok: false, second: false, timeout: true });
const SECOND_REPLY = Object.freeze({ ok: true, second: true });

function randomHex(n) {
  const b = new Uint8Array(Math.ceil(n / 2));
  crypto.getRandomValues(b);
  let s = '';
  for (const x of b) s += x.toString(16).padStart(2, '0');
  return s.slice(0, n);
}

// The id base + suffix, base cut at a character's boundary so that the id
// fits MAX_ISOLATE_ID bytes as UTF-8 (restarts and incarnations derive
// their ids from the first; the module refuses a longer one).
function derivedId(base, suffix) {
  const room = MAX_ISOLATE_ID - te.encode(suffix).length;
  if (te.encode(base).length <= room) return base + suffix;
  let out = '';
  let n = 0;
  for (const ch of base) {
    n += te.encode(ch).length;
    if (n > room) break;
    out += ch;
  }
  return out + suffix;
}

function inWorkers() {
  return typeof navigator !== 'undefined' && navigator.userAgent === 'Cloudflare-Workers';
}

// The error of a wait whose signal aborted: code "aborted", the signal's
// reason as its cause (and in its message).
const aborted = (signal) => {
  const r = signal.reason;
  return new EdgeLimitError(`wait: aborted${r === undefined ? '' : `: ${r?.message ?? r}`}`, 'aborted', { cause: r });
};

const sleep = (ms, signal) => new Promise((resolve, reject) => {
  if (signal?.aborted) { reject(aborted(signal)); return; }
  const t = setTimeout(() => { signal?.removeEventListener('abort', onAbort); resolve(); }, Math.max(0, ms));
  const onAbort = () => { clearTimeout(t); reject(aborted(signal)); };
  signal?.addEventListener('abort', onAbort, { once: true });
});

// A check's cost: an integer from 0 to 2^40 (default 1).
function checkCost(cost) {
  if (cost === undefined) return 1;
  if (typeof cost !== 'number' || !Number.isInteger(cost) || cost < 0 || cost > 2 ** 40) {
    throw new EdgeLimitError(`cost must be an integer between 0 and 2^40, got ${typeof cost === 'string' ? JSON.stringify(cost) : String(cost)}`, 'bad_cost');
  }
  return cost;
}

function checkOpts(op, opts) {
  if (opts === null || typeof opts !== 'object' || Array.isArray(opts)) {
    throw new EdgeLimitError(`${op}: takes an object ({limiter, key, cost} or {checks}), got ${opts === null ? 'null' : Array.isArray(opts) ? 'an array' : typeof opts}`, 'bad_input');
  }
}

/**
 * A rate limiter backed by one instance of the edgelimit module (one
 * isolate). Create it with EdgeLimit.create.
 */
export class EdgeLimit {
  /**
   * Creates a limiter. The module is instantiated lazily, at the first
   * decision (workerd refuses random numbers at global scope), or by ready().
   *
   * @param {import('./index.d.ts').EdgeLimitOptions} opts
   * @returns {Promise<EdgeLimit>}
   */
  static async create(opts) {
    return new EdgeLimit(opts);
  }

  constructor(opts) {
    checkOptions(opts);
    this._wasm = opts.wasm instanceof WebAssembly.Module ? opts.wasm : compile(opts.wasm);
    const exports = new Set(WebAssembly.Module.exports(this._wasm).map((e) => e.name));
    if (!exports.has('el_decide') || !exports.has('el_configure')) {
      throw new EdgeLimitError('create: option wasm: not the edgelimit module (no el_decide export): use edgelimit/edgelimit.wasm', 'bad_module');
    }
    // One coordinator URL, or several sharing one store (Redis Cluster):
    // the isolate prefers the one its id hashes to, a batch one cannot
    // take goes to the next at once, and it returns to its own later.
    const coords = (Array.isArray(opts.coordinator) ? opts.coordinator : [opts.coordinator])
      .filter((u) => u).map((u) => String(u).replace(/\/+$/, ''));
    this._norm = normalizeConfig(opts.config, coords.length > 0);
    this._index = new Map(this._norm.limiters.map((l, i) => [l.name, i]));
    // Limiters decided by the isolate alone (approximate, no read-through:
    // no lease or view to wait for): limit() on them alone does not wait
    // for the coordinator's time (see _localOnly).
    this._local = this._norm.limiters.map((l) => l.mode === 'approximate' && !l.readThrough);
    // Each isolate prefers the coordinator its id hashes to (set by ready():
    // preferredIndex), fails over from it and returns to it (see _post).
    this._coordinators = coords;
    this._coordIdx = 0;
    this._prefIdx = 0;
    this._coordinator = coords[0] ?? '';
    this._returnAfter = 5000; // ms after leaving the preferred coordinator before trying it again (doubled per failed try, at most 8x)
    this._returnTimeout = 250; // ms a try of the preferred coordinator while away from it waits (syncloop.DefaultReturnTimeout)
    this._returnGap = 0; // ms: the wait before _returnAt
    this._returnAt = 0; // ms: when to try the preferred coordinator again
    this._token = opts.token ?? '';
    this._fetch = opts.fetch ?? ((...a) => fetch(...a));
    this._interval = opts.syncInterval ?? 100;
    this._syncTimeout = opts.syncTimeout ?? 5000;
    this._retryWait = opts.retryWait ?? 1000;
    this._defaultPolicy = opts.failPolicy ?? OPEN;
    this._policies = this._norm.limiters.map((l) => l.failPolicy || this._defaultPolicy);
    this._periodMs = this._norm.limiters.map((l) => Math.max(Number(l.periodNs) / 1e6, 1e-6));
    this._shareIsolates = Math.max(opts.shareIsolates ?? 1, 1);
    this._share = new Share(this._norm.maxKeys);
    this._idPrefix = opts.isolateId ?? null;
    // The isolate runs on the coordinator's time: its own clock plus the
    // offset read from the coordinator's answers (_observeTime).
    // Without a clock given: with a coordinator a steady one (a system
    // clock set back does not move it: steadyclock.js), else Date.now.
    this._ownClock = opts.clock ?? (coords.length > 0 ? steadyClock() : Date.now);
    this._offset = 0; // ms added to _ownClock
    this._timeRead = null; // the promise of the one reading of the coordinator's time (_readTime)
    this._timeKnown = false; // an answer's time was read (_observeTime)
    this._answered = false; // a coordinator answered anything: one whose answers carry no time is not waited for (_syncAttempt)
    this._timeFailed = false; // the first reading failed (not: timed out): batches wait for an answer (_syncAttempt)
    this._timeUntil = 0; // ms (own clock): how long limit() and wait() wait for it
    this._timeWait = true; // until it came or that wait ended
    // What the module decided before the reading settled, on the isolate's
    // own clock, while no batch was cut (see _track, _replay): {mod,
    // keys}, or null once settled or cut.
    this._early = coords.length > 0 ? { mod: null, keys: new Map() } : null;
    this._clock = this._coordinator ? () => this._ownClock() + this._offset : this._ownClock;
    this._background = opts.background ?? (inWorkers() ? 'requests' : 'timers');
    this._onError = opts.onError ?? null;
    this._saidForeign = false; // _sayForeign
    this._saidRefused = false; // _fail
    this._schedOpts = {
      interval: this._interval, staleAfter: opts.staleAfter, backoffMax: opts.backoffMax, jitter: opts.jitter,
      probeInterval: opts.probeInterval ?? 500,
    };
    this._mod = null;
    this._lastMs = -1;
    this._lastNs = 0n;
    this._inflight = null; // the promise of the sync in flight
    this._inflightDeadline = 0; // ms: the sync in flight is abandoned after it (see _busy)
    this._cur = null; // the state of the sync in flight, or of the last one (see _sync)
    this._posting = null; // the attempt's POST (or GET of the time: _readAny) in flight: {ac, url, at} (_abandonHung)
    this._amends = []; // the amendments in flight (see _amendNow), of the last batch and the one before
    // The amendments sent of the last cut amended (any attempt of it) and
    // those refused for their times: a batch refused for its times is
    // taken back only when all were (_syncAttempt).
    this._amendTally = { cut: -1, sent: 0, refused: 0 };
    this._inc = 0; // incarnations since creation: an amendment of an earlier one is void (_sendAmendment)
    this._cuts = 0; // batches cut, a resend not counted (see _asked)
    this._lastCut = null; // the state of the last sync that sent a batch (see _lastAmends)
    this._unanswered = false; // the module's batch was sent and no reply to it applied (a resend is no new cut)
    this._held = 0; // requests limit() holds for a reply
    this._calls = 0; // limit() calls not finished yet
    this._refreshUntil = 0; // until when requests wait for the refresh probe in flight (_refresh)
    this._syncGen = 0; // syncs ended (requests mode polls it)
    this._replyGen = 0; // second replies applied (requests mode polls it)
    this._lastSyncOk = false;
    this._kicked = false;
    this._tail = null; // the promise of the tail sync (_tailSync), or null
    this._timer = null;
    this._closed = false;
    this._closing = null; // close()'s promise, once called
    this._waiters = [];
    this.counters = { syncs: 0, syncErrors: 0, reincarnations: 0, policyDenials: 0, restarts: 0, failovers: 0, abandoned: 0, amendments: 0, clockSteps: 0, recalls: 0 };
    this.lastError = null;
  }

  /** Instantiates and configures the module now (it is otherwise done at the first decision). */
  ready() {
    if (this._mod) return this;
    const mod = new Module(this._wasm);
    const id = this._restartId ?? this._idPrefix ?? `js-${randomHex(12)}`;
    // Each incarnation (this one, a restart after a trap, a reincarnation)
    // has its own secret, which its batches carry: the coordinator refuses
    // a batch for the id without it, so no other client can take the id.
    mod.configure(toWire(this._norm, id, this._interval, randomHex(32)));
    mod.clockOffset(this._offset);
    this._mod = mod;
    this._unanswered = false;
    // A restart drops the early decisions with the old instance's state.
    if (this._early) this._early = this._early.mod === null ? { mod, keys: this._early.keys } : null;
    if (this._firstId === undefined) {
      this._firstId = id; // restarts and incarnations derive their ids from it
      this._prefIdx = preferredIndex(id, this._coordinators.length);
      this._coordIdx = this._prefIdx;
      this._coordinator = this._coordinators[this._prefIdx] ?? '';
    }
    this.isolateId = id;
    if (this._coordinator && !this._sched) {
      this._sched = new Scheduler(this._schedOpts, this._clock());
      if (this._background === 'timers') this._arm();
    }
    return this;
  }

  /** The module instance (instantiated on first use). */
  get module() { return this.ready()._mod; }

  _ns(ms) {
    if (ms !== this._lastMs) {
      if (typeof ms !== 'number' || !(ms >= 0) || ms > 9e15) throw new EdgeLimitError(`the clock gave ${String(ms)}: want ms since the epoch, >= 0`, 'bad_time');
      this._lastMs = ms; const whole = Math.floor(ms); this._lastNs = BigInt(whole) * 1000000n + BigInt(Math.round((ms - whole) * 1e6));
    }
    return this._lastNs;
  }

  _limiterIndex(name) {
    const i = typeof name === 'number' ? name : typeof name === 'string' ? this._index.get(name) : undefined;
    if (i === undefined || !Number.isInteger(i) || !(i >= 0 && i < this._norm.limiters.length)) {
      // JSON.stringify names NaN "null" and a String object as the string
      // it holds, which names a limiter that exists.
      const shown = typeof name === 'string' ? JSON.stringify(name) : typeof name === 'number' ? String(name) : `of type ${name === null ? 'null' : typeof name}`;
      throw new EdgeLimitError(`unknown limiter ${shown} (want a limiter name or index)`, 'unknown_limiter');
    }
    return i;
  }

  /**
   * Decides at once, without waiting for a sync: {success, limit,
   * remaining, reset (ms since the epoch), retryAfterMs (-1: the cost
   * can never pass), limiter, syncRetry, stale, policy}. With
   * opts.checks ([{limiter, key, cost}], up to 8) the limiters are checked
   * together, all or nothing. ctx (Workers' ExecutionContext) receives the
   * background sync through waitUntil.
   */
  decide(opts, ctx) {
    if (this._closing) throw new EdgeLimitError('decide: the limiter is closed (close())', 'closed');
    return this._decide(opts, ctx, false, false);
  }

  // decide; failing: a sync this request waited for failed, so the view
  // counts as stale for it (the fail policy decides) whatever its age.
  // final: limit()'s last decision of a held request; answered syncRetry
  // again, it is denied for good and its ask is withdrawn before anything
  // can cut a batch with it (Module.withdraw).
  _decide(opts, ctx, failing, final) {
    checkOpts('decide', opts);
    if (!this._mod) this.ready();
    const now = this._clock();
    const checks = opts.checks;
    const stale = this._sched ? failing || this._sched.stale(now) : false;
    let st;
    let d = null;
    if (checks === undefined) {
      const li = this._limiterIndex(opts.limiter ?? 0);
      const cost = checkCost(opts.cost);
      if (stale) d = this._policyDeny(li, opts.key, cost, now);
      if (!d) {
        try {
          st = this._mod.decide(li, opts.key, cost, this._ns(now));
        } catch (e) { this._trapped('decide', e); }
        if (st < 0) this._throwCode('decide', st, opts.key);
        d = this._result(st, stale);
        if (stale) d = this._decideAlone(li, opts.key, cost, now, d);
        if (this._early) this._track(li, opts.key, d.success ? cost : 0);
      }
    } else {
      if (!Array.isArray(checks) || checks.length < 1 || checks.length > 8) {
        throw new EdgeLimitError(`decide: checks must be an array of 1 to 8 {limiter, key, cost}, got ${Array.isArray(checks) ? `${checks.length} checks` : typeof checks}`, 'bad_checks');
      }
      const cs = checks.map((c) => {
        if (c === null || typeof c !== 'object') throw new EdgeLimitError('decide: each check must be an object {limiter, key, cost}', 'bad_checks');
        return { limiter: this._limiterIndex(c.limiter ?? 0), key: c.key, cost: checkCost(c.cost) };
      });
      if (stale) d = this._policyDenyMulti(cs, now);
      if (!d) {
        try {
          st = this._mod.decideMulti(cs, this._ns(now));
        } catch (e) { this._trapped('decide', e); }
        if (st < 0) this._throwCode('decide', st, st === -3 || st === -4 ? cs.find((c) => !this._keyFits(c.key))?.key : undefined);
        d = this._result(st, stale);
        if (this._early) for (const c of cs) this._track(c.limiter, c.key, d.success ? c.cost : 0);
      }
    }
    if (final && d.syncRetry && !stale) {
      try {
        this._mod.withdraw();
      } catch (e) { this._trapped('withdraw', e); }
      st &= ~2; // nothing to sync for it
    }
    if (this._sched) {
      // A stale isolate probes the coordinator (past the backoff, at most
      // once per probeInterval): the next request after it answers again
      // decides on a fresh view.
      if (stale) this._abandonHung(now);
      const wanted = (st & 2) !== 0 || stale;
      this._background === 'requests' ? this._pump(now, wanted, ctx) : wanted && this._kick(now);
    }
    // A denial on a stale view, or for want of a lease or a view (a sync
    // may bring one), is worth retrying after the next probe or sync: its
    // retryAfterMs is at most probeInterval, not a share of the period.
    if ((stale || d.syncRetry) && !d.success && d.retryAfterMs > this._schedOpts.probeInterval && this._schedOpts.probeInterval > 0) {
      d.retryAfterMs = this._schedOpts.probeInterval;
    }
    return d;
  }

  // A request on a stale view ends a POST in flight for over hungAfter
  // (twice probeInterval, at least SLOW_ATTEMPT_MS, at most syncTimeout),
  // as the Go edge host does: an attempt started in a partition that drops
  // packets silently waited out the whole syncTimeout, the probes held
  // behind it, after the coordinator was back. The attempt then tries the
  // next coordinator of the list, or fails; its batch is sent again
  // (applied once). Only the attempt's own request is ended (its batch's
  // POST, or its reading of the time before the first batch: _readAny),
  // never an amendment's: before, an amendment sent while the batch was
  // in flight took its place here, and the batch's POST to a hung
  // coordinator ran out the whole syncTimeout (5 s) behind it: the view
  // was stale that long with a second coordinator answering.
  _abandonHung(now) {
    const p = this._posting;
    const hungAfter = Math.min(Math.max(2 * this._schedOpts.probeInterval, SLOW_ATTEMPT_MS), this._syncTimeout);
    if (!p || now - p.at <= hungAfter) return;
    this._posting = null;
    p.ac.abort(new EdgeLimitError(`sync: ${p.method} ${p.url}: no answer within ${Math.round(now - p.at)} ms (abandoned as hung)`, 'sync_timeout'));
  }

  // The module's result for status word st.
  _result(st, stale) {
    const m = this._mod;
    const li = m.resultInt(6);
    const ra = m.resultInt(4);
    return {
      success: (st & 1) === 1,
      limit: m.resultInt(1),
      remaining: m.resultInt(2),
      reset: m.resultInt(3) / 1e6,
      retryAfterMs: ra < 0 ? -1 : ra / 1e6,
      limiter: this._norm.limiters[li].name,
      syncRetry: (st & 4) !== 0,
      stale,
      policy: stale ? this._policies[li] : null,
    };
  }

  // On a stale view, a leased limiter (auto, strict) or a read-through one
  // gets no lease or view: the module denies past the lease it holds
  // (syncRetry). The fail policy then decides in its place (as
  // edge/failpolicy Leased): open admits within the key's whole limit per
  // window counted on this isolate alone (what the module admitted within
  // its lease on the stale view counts too), local-share admits what its
  // share let through. Returns d or the policy's admission.
  _decideAlone(li, key, cost, now, d) {
    const l = this._norm.limiters[li];
    if (l.mode === 'approximate' && !l.readThrough) return d;
    const p = this._policies[li];
    const k = this._shareKey(li, key);
    const limit = this._limitFor(li, key);
    const period = this._periodMs[li];
    let share = limit;
    if (p === OPEN && (d.success || d.syncRetry)) {
      if (!this._share.take(k, cost, limit, period, now) && !d.success) return d;
    } else if (p === LOCAL_SHARE && d.syncRetry && !d.success) {
      share = Math.max(Math.floor(limit / this._shareIsolates), 1);
    } else {
      return d;
    }
    if (d.success) return d;
    // Recorded in the module, so its next batch reports it and the
    // coordinator counts it once back.
    try {
      this._mod.admit(li, key, cost, this._ns(now));
    } catch (e) { this._trapped('admit', e, false); }
    return {
      ...d, success: true, limit, remaining: this._share.remaining(k, share, period, now),
      reset: (Math.floor(now / period) + 1) * period, retryAfterMs: 0, syncRetry: false,
    };
  }

  // A trap inside the module (a WebAssembly.RuntimeError) leaves its state
  // unusable: the instance is dropped, the next decision instantiates a new
  // one under the base id + "/r" + the restart count (as the Go edge host
  // does), and the caller gets an EdgeLimitError with code "trap". What the
  // old instance had not synced is lost. Other errors are rethrown.
  _trapped(op, e, rethrow = true) {
    if (!(e instanceof WebAssembly.RuntimeError)) throw e;
    this.counters.restarts++;
    this._restartId = derivedId(this._firstId, `/r${this.counters.restarts}`);
    this._mod = null;
    const err = new EdgeLimitError(`${op}: the module trapped (restarting as ${JSON.stringify(this._restartId)}): ${e.message}`, 'trap', { cause: e });
    this.lastError = err;
    if (rethrow) throw err;
    return err;
  }

  // Whether a decision of opts needs no reading of the coordinator's time
  // first: every limiter it checks is approximate without read-through.
  // Such a decision is the isolate's own (no lease, no view to wait for),
  // so its own clock makes it as right as the coordinator's within a
  // round trip; no batch is cut before the reading settled (_syncAttempt),
  // and what it recorded is moved to the coordinator's time then
  // (_replay). Bad opts: false (decide says why, after the reading).
  _localOnly(opts) {
    if (opts === null || typeof opts !== 'object') return false;
    const cs = opts.checks === undefined ? [opts] : opts.checks;
    if (!Array.isArray(cs) || cs.length < 1) return false;
    for (const c of cs) {
      if (c === null || typeof c !== 'object') return false;
      const n = c.limiter ?? 0;
      const i = typeof n === 'number' ? n : typeof n === 'string' ? this._index.get(n) : undefined;
      if (this._local[i] !== true) return false;
    }
    return true;
  }

  // Records that the module decided cost (admitted; 0 if denied) of
  // (limiter index li, key) before the reading of the coordinator's time
  // settled, while no batch was cut (see _replay). Past the module's key
  // count it gives up (those decisions stay where the own clock put them).
  _track(li, key, cost) {
    const e = this._early;
    // By the key's bytes, as the module holds it: a string and its UTF-8
    // bytes (or a string with a lone surrogate and its U+FFFD form) are
    // one key, reset and admitted again once.
    const k = this._shareKey(li, key);
    const t = e.keys.get(k);
    if (t) { t.cost += cost; return; }
    if (e.keys.size >= (this._norm.maxKeys || DEFAULT_MAX_KEYS)) { this._early = null; return; }
    e.keys.set(k, { li, key: typeof key === 'string' ? te.encode(key) : Uint8Array.from(key), cost });
  }

  // The reading of the coordinator's time settled (see _settleTime): the
  // decisions before it were recorded at the isolate's own time, in its
  // windows. When the reading moved the clock, each key they touched is
  // recorded again at the coordinator's time (reset, then what was
  // admitted admitted again, all in its current window: more than that
  // window had when they spanned two, never less), before any batch is
  // cut: a batch naming a window past the coordinator's skew would be
  // refused (400 clock_skew) until its clock caught up, and one in a
  // window it left would have its counts dropped as stale. What the early
  // denials asked for is dropped (the next decisions ask again); no view
  // or lease is lost, as none came before the first batch.
  _replay() {
    const e = this._early;
    this._early = null;
    if (!e || e.mod !== this._mod || this._offset === 0 || e.keys.size === 0) return;
    const now = this._ns(this._clock());
    try {
      for (const t of e.keys.values()) {
        e.mod.reset(t.li, t.key);
        if (t.cost > 0) e.mod.admit(t.li, t.key, t.cost, now);
      }
    } catch (err) {
      this._fail(err instanceof WebAssembly.RuntimeError ? this._trapped('replay', err, false) : err);
    }
  }

  // Whether key is 1 to MAX_KEY_LEN bytes (a string as UTF-8).
  _keyFits(key) {
    const n = typeof key === 'string' ? new TextEncoder().encode(key).length : key?.length;
    return n >= 1 && n <= MAX_KEY_LEN;
  }

  _throwCode(op, st, key) {
    if (st === -4 || st === -3) {
      const n = typeof key === 'string' ? new TextEncoder().encode(key).length : key?.length;
      throw new EdgeLimitError(`${op}: key must be 1 to ${MAX_KEY_LEN} bytes, got ${n}`, 'bad_key');
    }
    throw codeError(op, st);
  }

  // The key's limit, its override applied: a key given as bytes finds the
  // override of the string they encode, as the module does.
  _limitFor(li, key) {
    const l = this._norm.limiters[li];
    if (l.overrides.size === 0) return l.limit;
    let k = key;
    if (typeof k !== 'string') {
      try { k = tdFatal.decode(k); } catch { return l.limit; } // not UTF-8: no override's key
    }
    return l.overrides.has(k) ? l.overrides.get(k) : l.limit;
  }

  // One string per (limiter index, key) as the module holds it: by the
  // key's UTF-8 bytes, so a string and its bytes (or a string with a lone
  // surrogate and its U+FFFD form) are one key.
  _shareKey(li, key) {
    const bytes = typeof key === 'string' ? te.encode(key) : key;
    return `${li}\u0000${String.fromCharCode(...bytes)}`;
  }

  // The fail policy of a stale view for one check: a denial, or null (ask
  // the module). A key the module would refuse is refused first (bad_key),
  // as on a fresh view.
  _policyDeny(li, key, cost, now) {
    if (typeof key !== 'string' && !(key instanceof Uint8Array)) {
      throw new EdgeLimitError(`decide: key must be a string or a Uint8Array, got ${key === null ? 'null' : typeof key}`, 'bad_key');
    }
    if (!this._keyFits(key)) this._throwCode('decide', -3, key);
    const p = this._policies[li];
    if (p === OPEN) return null;
    const limit = this._limitFor(li, key);
    const period = this._periodMs[li];
    if (p === LOCAL_SHARE) {
      const share = Math.max(Math.floor(limit / this._shareIsolates), 1);
      if (this._share.take(this._shareKey(li, key), cost, share, period, now)) return null;
    }
    return this._policyDenial(li, limit, now);
  }

  _policyDenyMulti(cs, now) {
    const taken = [];
    for (const c of cs) {
      const d = this._policyDeny(c.limiter, c.key, c.cost, now);
      if (d) {
        for (const t of taken) this._share.give(this._shareKey(t.limiter, t.key), t.cost, this._periodMs[t.limiter], now);
        return d;
      }
      if (this._policies[c.limiter] === LOCAL_SHARE) taken.push(c);
    }
    return null;
  }

  // A denial of the fail policy: retry after one sync interval (closed:
  // until a sync succeeds), or at the window's end (local-share), capped
  // by decide at probeInterval (the next request probes again).
  _policyDenial(li, limit, now) {
    this.counters.policyDenials++;
    const period = this._periodMs[li];
    return {
      success: false, limit, remaining: 0, reset: (Math.floor(now / period) + 1) * period,
      retryAfterMs: this._policies[li] === CLOSED ? this._interval : (Math.floor(now / period) + 1) * period - now,
      limiter: this._norm.limiters[li].name, syncRetry: false, stale: true, policy: this._policies[li],
    };
  }

  /**
   * Decides (see decide); a request denied with syncRetry (a strict lease
   * miss, a read-through cold key) on a fresh view is held: it triggers a
   * sync (or, while a batch is in flight, amends it: see _ask), waits
   * for a reply and is decided again after each, up to three replies
   * (four once it is decided in a later window than before) within
   * retryWait (a sync already in flight may not carry its demand).
   * The isolate's first limit() waits for its reading of the coordinator's
   * time (see _awaitTime), unless every limiter it checks is approximate
   * (see _localOnly): it then decides at once and the reading runs beside
   * it.
   *
   * @returns {Promise<import('./index.d.ts').LimitResult>}
   */
  async limit(opts, ctx) {
    if (this._closing) throw new EdgeLimitError('limit: the limiter is closed (close())', 'closed');
    this._calls++; // close() lets it finish
    try {
      return await this._limit(opts, ctx);
    } finally {
      this._calls--;
    }
  }

  async _limit(opts, ctx) {
    if (this._timeWait && this._coordinator) {
      if (this._localOnly(opts)) this._startTime(ctx);
      else await this._awaitTime(ctx);
    }
    await this._refresh(ctx);
    let d = this._decide(opts, ctx, false, false);
    if (!d.syncRetry || d.stale || !this._coordinator || this._retryWait < 0) return d;
    // A sync already in flight may have left before this request's demand:
    // its batch is amended with it, and the request waits for the next
    // replies too, within retryWait in all (three at most; the second
    // reply of a batch, its amendment's or its own, answers the same
    // demand and is not counted). When the sync fails the fail policy
    // decides the request at once, as on a stale view; when no reply
    // comes within retryWait the module's answer stands (a denial), unless
    // the scheduler finds the view stale.
    //
    // The batch's own reply, made before the coordinator saw the
    // amendment, may grant none of its ask: the module then denies for a
    // dry spell (without syncRetry), which the amendment's reply ends
    // when it grants. So while the amendment carrying this request's ask
    // (mine) is in flight, a denial is not final: the request waits for
    // that reply and is decided again.
    //
    // A request decided again in a window after its last decision's (held
    // near a window's end: its ask, for that window, cannot admit it in the
    // next) waits for one reply more, once (syncloop.Retry.NewWindow).
    const end = this._clock() + this._retryWait;
    let mine = null;
    const held = this._cuts; // after its decision: a batch cut since asks for it
    const retry = new Retry(); // its replies: three, four once moved
    retry.decided(d.reset, this._clock());
    this._held++;
    try {
      while (retry.again() && !d.stale && (d.syncRetry || (!d.success && mine !== null && this._amends.includes(mine)))) {
        if (d.syncRetry) mine = this._ask(held, mine, ctx);
        const r = await this._waitSync(Math.max(end - this._clock(), 0), ctx, () => this._needsBatch(held, mine));
        if (!r.second) retry.replied();
        const at = this._clock();
        retry.newWindow(at);
        // No reply within retryWait is no failed sync (a slow
        // coordinator): the scheduler says whether the syncs fail.
        d = this._decide(opts, ctx, !r.ok && !r.timeout, !retry.again());
        retry.decided(d.reset, at);
      }
    } finally {
      this._held--;
    }
    return d;
  }

  // A view stale because syncs failed a while ago, with no attempt begun
  // or failed for twice probeInterval since (Scheduler.quiet: an idle
  // Worker in requests mode, where
  // nothing probes between requests; or a backoff longer than the quiet),
  // is refreshed before limit() decides: the request probes the
  // coordinator and waits for its answer, within retryWait, and is
  // decided on the fresh view, or by the fail policy when the probe fails
  // too. Requests that come while that probe is in flight wait for it as
  // well. (Before, such a request was decided by the fail policy at once,
  // however long the coordinator had been answering: 4 Workers idle 5 s
  // after a restart admitted 12 requests on a full strict 10/h key under
  // open, and closed denied requests far under the limit.) While requests
  // keep coming through an outage they probe every probeInterval as
  // before, and none of them waits for it.
  async _refresh(ctx) {
    const s = this._sched;
    if (!s || !this._coordinator || this._retryWait < 0) return;
    const now = this._clock();
    if (!s.stale(now)) return;
    if (now < this._refreshUntil && s.inflight) {
      await this._waitSync(this._refreshUntil - now, ctx, () => false);
      return;
    }
    const probe = this._schedOpts.probeInterval;
    if (probe < 0 || !s.quiet(now, 2 * probe) || this._holdOff(now)) return;
    this._refreshUntil = now + this._retryWait;
    let first = true;
    await this._waitSync(this._retryWait, ctx, () => { const go = first; first = false; return go; });
  }

  /**
   * Waits for a slot instead of failing: decides, and while denied sleeps
   * for retryAfterMs (at least minSleepMs) and decides again, until
   * allowed, until the next try would come after maxWaitMs (default 10 s;
   * it returns the denial at once then, as POST /v1/wait of the Go edge
   * host does), or until signal aborts (rejects with its reason). A cost
   * that can never pass (retryAfterMs -1) returns at once. The result has
   * waitedMs.
   */
  async wait(opts, ctx) {
    checkOpts('wait', opts);
    const maxWait = opts.maxWaitMs ?? 10000;
    if (typeof maxWait !== 'number' || !(maxWait >= 0)) throw new EdgeLimitError(`wait: maxWaitMs must be a number of ms >= 0, got ${String(maxWait)}`, 'bad_input');
    const minSleep = opts.minSleepMs ?? 1;
    if (typeof minSleep !== 'number' || !(minSleep >= 0 && minSleep <= 2 ** 31 - 1)) throw new EdgeLimitError(`wait: minSleepMs must be a number of ms from 0 to 2^31-1, got ${String(minSleep)}`, 'bad_input');
    const { signal } = opts;
    if (signal !== undefined && !(typeof signal?.addEventListener === 'function' && typeof signal.aborted === 'boolean')) throw new EdgeLimitError('wait: signal must be an AbortSignal', 'bad_input');
    if (this._timeWait && this._coordinator) await this._awaitTime(ctx); // before start: the clock may step
    const start = this._clock();
    for (;;) {
      const d = await this.limit(opts, ctx);
      const waited = this._clock() - start;
      if (d.success || d.retryAfterMs < 0) return { ...d, waitedMs: waited };
      const pause = Math.max(d.retryAfterMs, minSleep);
      // No slot before the deadline: answer now rather than at the deadline.
      if (pause > maxWait - waited) return { ...d, waitedMs: waited };
      await sleep(pause, signal);
    }
  }

  /**
   * Runs fn once a slot is free (see wait) and returns its result;
   * rejects with an EdgeLimitError (code "rate_limited", .result the
   * last decision) when none was free within maxWaitMs.
   */
  async schedule(opts, fn, ctx) {
    if (typeof opts === 'function') [opts, fn] = [fn, opts];
    if (typeof fn !== 'function') throw new EdgeLimitError('schedule: takes (opts, fn): fn must be a function', 'bad_input');
    const d = await this.wait(opts, ctx);
    if (!d.success) {
      const e = new EdgeLimitError(`rate limited on ${JSON.stringify(d.limiter)}: no slot within ${opts.maxWaitMs ?? 10000} ms`, 'rate_limited');
      e.result = d;
      throw e;
    }
    return fn();
  }

  /**
   * Tells the limiter what the upstream answered to a request of (limiter,
   * key): opts.response is a fetch Response (or {status, headers}), or give
   * opts.status and opts.headers (a Headers, a Map, [[name, value]...] or a
   * plain object); status 0 means no answer came. A 429 (or a 503 with
   * Retry-After) pauses the key here at once and, with the next sync, in
   * every isolate; quota headers (RateLimit, X-RateLimit-*) and failures
   * (5xx, status 0: the key's circuit) are read by the module. Resolves to
   * {pausedMs, circuit ("closed", "open", "half-open"), limit, ignored}.
   */
  observe(opts, ctx) {
    if (this._closing) throw new EdgeLimitError('observe: the limiter is closed (close())', 'closed');
    if (opts === null || typeof opts !== 'object') throw new EdgeLimitError('observe: takes an object {limiter, key, response} or {limiter, key, status, headers}', 'bad_input');
    if (!this._mod) this.ready();
    const li = this._limiterIndex(opts.limiter ?? 0);
    const res = opts.response;
    const status = res ? res.status : (opts.status ?? 0);
    if (!Number.isInteger(status) || status < 0 || status > 999) {
      throw new EdgeLimitError(`observe: status ${JSON.stringify(status)} must be 0 (no answer) or an HTTP status`, 'bad_input');
    }
    const h = [];
    const src = res ? res.headers : opts.headers;
    const add = (n, v) => {
      const name = String(n).toLowerCase();
      if (name === 'retry-after' || name.startsWith('ratelimit') || name.startsWith('x-ratelimit') || name.startsWith('x-rate-limit')) {
        if (h.length < 64) h.push([name, String(v).slice(0, 1024)]);
      }
    };
    if (src) {
      if (typeof src.forEach === 'function' && !Array.isArray(src)) src.forEach((v, n) => add(n, v));
      else if (Array.isArray(src)) for (const [n, v] of src) add(n, v);
      else for (const n of Object.keys(src)) add(n, src[n]);
    }
    if (typeof opts.key !== 'string' || opts.key === '') throw new EdgeLimitError('observe: key must be a non-empty string', 'bad_input');
    const now = this._clock();
    let o;
    try {
      o = this._mod.observe({ v: PROTOCOL_VERSION, limiter: this._norm.limiters[li].name, key: opts.key, now: this._ns(now), status, h });
    } catch (e) {
      if (e instanceof EdgeLimitError) throw e;
      this._trapped('observe', e);
    }
    if (o.sync && this._sched) this._background === 'requests' ? this._pump(now, true, ctx) : this._kick(now);
    return {
      pausedMs: Number(o.paused_ns) / 1e6,
      circuit: ['closed', 'open', 'half-open'][Number(o.circuit)] ?? 'closed',
      limit: Number(o.limit),
      ignored: o.ignored ?? '',
    };
  }

  /** Forgets this isolate's local state of (limiter, key). */
  reset(opts) {
    if (this._closing) throw new EdgeLimitError('reset: the limiter is closed (close())', 'closed');
    if (opts === null || typeof opts !== 'object') throw new EdgeLimitError('reset: takes an object {limiter, key}', 'bad_input');
    const { limiter, key } = opts;
    const st = this.module.reset(this._limiterIndex(limiter ?? 0), key);
    if (st < 0) this._throwCode('reset', st, key);
  }

  /** The module's counters with the sync counters, the isolate id and the memory size. */
  stats() {
    const s = this.module.stats();
    const now = this._clock();
    return {
      ...s, ...this.counters, isolateId: this.isolateId, memoryBytes: this._mod.memoryBytes(),
      lastSyncAgeMs: this._sched ? now - this._sched.lastOK : null, stale: this._sched ? this._sched.stale(now) : false,
      failures: this._sched ? this._sched.failures : 0,
    };
  }

  // --- sync ---------------------------------------------------------------

  // requests mode (Workers): each decision checks whether a sync is due or
  // was asked for, and hands it to ctx.waitUntil.
  _pump(now, wanted, ctx) {
    if (this._holdOff(now)) { this._tailSync(ctx); return; }
    if (wanted) this._kicked = true;
    let go = this._sched.due(now);
    if (!go && this._kicked && !this._cutWaits(now)) go = this._sched.want(now) || this._sched.probe(now);
    if (go) {
      this._kicked = false;
      const p = this._sync();
      ctx?.waitUntil?.(p);
    } else {
      this._tailSync(ctx);
    }
  }

  // requests mode: a decision made between syncs is reported by the next
  // regular sync, run within this request's ctx.waitUntil (one such tail
  // at a time), not by the next request's, which may come seconds later.
  // What the decision recorded then reaches the coordinator while it is
  // current: a denied request's cost, reported as demand after an idle
  // spell, had the coordinator lease the first isolates to ask after it
  // for requests answered long before, and deny the others under the
  // limit (test/idle.test.js). A sync with nothing to send sends nothing.
  _tailSync(ctx) {
    if (this._tail || this._closed || typeof ctx?.waitUntil !== 'function') return;
    // Within a few intervals: not while the syncs back off (an outage's
    // next attempt may be 30 s away; requests probe it then).
    // The deadline is on the isolate's own clock: a step of the
    // coordinator's time must not stretch the waitUntil.
    const deadline = this._ownClock() + 3 * this._interval;
    this._tail = (async () => {
      try {
        for (;;) {
          const now = this._clock();
          if (this._closed || this._sched.failures > 0 || this._ownClock() > deadline) return;
          if (this._holdOff(now)) { await (this._inflight ?? sleep(1)); continue; }
          if (this._sched.due(now)) { await this._sync(); return; }
          if (this._sched.next > deadline) return;
          await sleep(Math.max(this._sched.next - now, 1));
        }
      } catch { /* the sync reported its error */ } finally { this._tail = null; }
    })();
    ctx.waitUntil(this._tail);
  }

  // timers mode (Node): the module asked for an early sync.
  _kick(now) {
    if (this._holdOff(now) || this._closed) return;
    if (!this._cutWaits(now) && (this._sched.want(now) || this._sched.probe(now))) this._syncAndArm();
    else this._arm();
  }

  // Arms the timer of the next regular sync; not while one is in flight or
  // held off (its end arms it again).
  _arm() {
    if (this._closed || this._holdOff(this._clock())) return;
    if (this._timer) clearTimeout(this._timer);
    const delay = Math.max(this._sched.next - this._clock(), 0);
    this._timer = setTimeout(() => {
      this._timer = null;
      const now = this._clock();
      if (this._sched.due(now) && !this._holdOff(now)) this._syncAndArm();
      else this._arm();
    }, delay);
    this._timer.unref?.();
  }

  _syncAndArm() {
    if (this._timer) { clearTimeout(this._timer); this._timer = null; }
    this._sync().finally(() => this._arm());
  }

  /**
   * Sends what the module has to sync of the decisions so far: waits for
   * a sync in flight (its batch may predate the latest decisions), then
   * runs one more. Cost a strict or auto fixed-window key admitted within
   * its lease is reported lazily, with the isolate's next batch that has
   * something else to say (the coordinator holds it reserved already), and
   * by close(). Resolves to true when the reply was applied (or there was
   * nothing to sync), false when it failed (the error is in lastError and
   * counters.syncErrors).
   */
  async sync() {
    if (!this._coordinator) return true;
    this.ready();
    if (this._background === 'requests') {
      // Not the promise of a sync another request started (see _pollSync).
      while (this._holdOff(this._clock())) await new Promise((r) => setTimeout(r, 1));
      return this._sync();
    }
    while (this._holdOff(this._clock())) await (this._inflight ?? new Promise((r) => setTimeout(r, 1)));
    if (this._background === 'timers') {
      this._syncAndArm();
      return this._inflight;
    }
    return this._sync();
  }

  // Whether no new batch should be cut at now: a sync is in flight. (An
  // amendment in flight does not hold the next batch off: the module takes
  // its reply while the next batch is in flight too.)
  _holdOff(now) {
    return this._busy(now);
  }

  // Whether the next batch waits at now for a reply of the last batch's
  // amendments (amend.js): more than one is on its way, and the module
  // would refuse the second's reply after the cut (the regular syncs go
  // on).
  _cutWaits(now) {
    return nextAsk(false, this._lastAmends(now)) !== ASK_BATCH;
  }

  // Whether an attempt in flight at now asks for a request held when held
  // batches had been sent (read after its decision), whose amendment is
  // mine (or null): a batch cut since, or mine while on its way.
  _asked(held, mine, now) {
    if (this._busy(now) && this._cur.cut > held) return true;
    return mine !== null && this._amending(now).includes(mine);
  }

  // Makes an attempt in flight ask for a held request (see _asked) that
  // none asks for (amend.js): an amendment of the batch in flight, which it
  // returns, or the next batch (_needsBatch: _waitSync starts it). Returns
  // mine otherwise.
  _ask(held, mine, ctx) {
    const now = this._clock();
    if (this._asked(held, mine, now) || nextAsk(this._busy(now), this._lastAmends(now)) !== ASK_AMEND) return mine;
    return this._amendNow(ctx) ?? mine;
  }

  // Whether a held request (see _asked) needs the next batch cut now.
  _needsBatch(held, mine) {
    const now = this._clock();
    return !this._asked(held, mine, now) && nextAsk(this._busy(now), this._lastAmends(now)) === ASK_BATCH;
  }

  // Starts a sync (or returns the one in flight): its promise resolves to
  // true at its first applied reply (the batch's or its amendment's; see
  // _amendNow) or when there was nothing to send, false when it failed.
  // Its state sy: done once it ended (or was abandoned: see _busy),
  // target the coordinator its batch was sent to.
  _sync() {
    const now = this._clock();
    if (this._busy(now)) return this._inflight;
    const sy = { done: false, abandoned: false, target: null, resolve: null, cut: 0 };
    const p = new Promise((r) => { sy.resolve = r; });
    this._cur = sy;
    this._syncAttempt(sy).then((ok) => {
      this._end(sy, ok);
      sy.resolve(ok); // an abandoned attempt's end changes nothing else
    });
    this._inflight = p;
    // Plus what is left of the reading of the coordinator's time, which
    // the attempt waits for before it cuts its batch (_syncAttempt).
    // Before any coordinator answered, the attempt may also probe each
    // (_readAny) before it posts.
    const reading = this._timePending() ? Math.max(this._timeUntil - this._ownClock(), 0) : 0;
    const probes = this._timeFailed && !this._timeKnown && !this._answered ? 2 : 1;
    this._inflightSpan = probes * this._syncTimeout * Math.max(this._coordinators.length, 1) + 100 + Math.ceil(reading);
    this._inflightDeadline = now + this._inflightSpan;
    return p;
  }

  // Ends sync sy (once): ok, its first reply was applied (or there was
  // nothing to send); else it failed.
  _end(sy, ok) {
    if (sy.done) return;
    sy.done = true;
    this._ended(ok);
    sy.resolve(ok);
  }

  _ended(ok) {
    this._inflight = null;
    this._syncGen++;
    this._lastSyncOk = ok;
    this._wake({ ok, second: false });
  }

  // Hands ev ({ok, second}) to the requests waiting for a reply (_waitSync).
  _wake(ev) {
    const ws = this._waiters;
    this._waiters = [];
    for (const w of ws) w(ev);
  }

  // Whether a sync is in flight at now. One past its deadline (syncTimeout
  // per coordinator after it began, plus 100 ms: a live attempt has ended
  // by then) was cancelled by the runtime (in Workers, I/O started by a
  // request that ended without ctx.waitUntil never completes) or hangs:
  // it is abandoned as a failed attempt (counters.abandoned, lastError),
  // its end, if it ever comes, is ignored (the module keeps its batch
  // outstanding, and the next sync sends it again under the same sequence
  // number, which the coordinator applies once), and a new sync may start.
  _busy(now) {
    if (!this._inflight) return false;
    if (now < this._inflightDeadline) return true;
    this._cur.done = this._cur.abandoned = true;
    this.counters.abandoned++;
    this._sched.failure(now);
    this._fail(new EdgeLimitError(`sync abandoned: it did not end within ${this._inflightSpan} ms (cancelled by the runtime, e.g. a Worker request without ctx, or hanging)`, 'sync_abandoned'));
    this._ended(false);
    return false;
  }

  // Waits for the next reply applied, or the end of the next sync (starting
  // one when cut() says so), for at most ms. Resolves to
  // {ok, second}: ok, a reply was applied; second, it was a second reply
  // to the last batch (its amendment's, or its own after its amendment's),
  // not the end of a sync.
  //
  // The held request starts a sync when cut() says it needs one
  // (_needsBatch, as the edge host's); else it waits for the attempt in
  // flight that asks for it, or for a reply.
  _waitSync(ms, ctx, cut) {
    if (this._background === 'requests') return this._pollSync(ms, ctx, cut);
    return new Promise((resolve) => {
      const t = setTimeout(() => resolve(NO_REPLY), ms);
      this._waiters.push((ev) => { clearTimeout(t); resolve(ev); });
      if (cut()) {
        const p = this._background === 'timers' ? (this._syncAndArm(), this._inflight) : this._sync();
        ctx?.waitUntil?.(p);
      }
    });
  }

  // Workers: the sync in flight may have been started by another request,
  // whose I/O this request may not wait on (workerd fails it with "Promise
  // will never complete"); so wait for the end of the next sync, or a
  // second reply, by polling with this request's own timers. Whenever
  // cut() says the request needs the next batch (at the start, or after
  // the reply to its ask, or after its amendment was lost) it starts it:
  // without ctx the sync is this request's own I/O, and it polls for its
  // end, so the runtime keeps it alive meanwhile.
  async _pollSync(ms, ctx, cut) {
    const end = this._clock() + ms;
    const gen = this._syncGen, rgen = this._replyGen;
    for (;;) {
      if (this._syncGen !== gen) return { ok: this._lastSyncOk, second: false };
      if (this._replyGen !== rgen) return SECOND_REPLY;
      const now = this._clock();
      if (now >= end) return NO_REPLY;
      if (cut()) {
        const p = this._sync();
        ctx?.waitUntil?.(p);
        continue; // nothing to send ends it at once
      }
      await new Promise((r) => setTimeout(r, 1));
    }
  }

  // One attempt of sync sy. Once sy ended, by its amendment's reply, its
  // batch's reply is a second one (_second); once abandoned (see _busy)
  // it changes nothing more (no reply applied, no scheduler update).
  //
  // No batch is cut before the reading of the coordinator's time settled
  // (a limit() on approximate limiters does not wait for it): the attempt
  // waits for it first, so a clock ahead past the coordinator's skew
  // never puts a refused batch in flight. Every batch is cut here (the
  // scheduler's, the tail syncs', sync(), close()); amendments and
  // resends repeat a batch cut here.
  async _syncAttempt(sy) {
    if (this._timePending()) await this._awaitTime();
    if (sy.done) return false; // abandoned meanwhile
    const s = this._sched;
    const mod = this._mod;
    if (this._timeFailed && !this._timeKnown && !this._answered) {
      // The first reading of the coordinator's time failed (it was down)
      // and no coordinator has answered since: no batch is cut before one
      // does. The cost decided meanwhile is in windows of the isolate's
      // own clock; told the step, the module moves it to the
      // coordinator's (wasm/core retime.go), which a batch cut before
      // would not carry. The reading is this attempt's first request:
      // it is in flight for the scheduler (stale past SLOW_ATTEMPT_MS)
      // and a request on the stale view abandons it as hung
      // (_abandonHung). Before, a coordinator that hung after refusing the
      // first reading held it for the whole syncTimeout (5 s) with
      // nothing stale: strict and auto keys denied every request after
      // its retryWait (1 s), under every fail policy, open too.
      s.begin(this._clock());
      const err = await this._readAny();
      if (sy.done) return false;
      if (err) {
        s.failure(this._clock());
        this._fail(err);
        return false;
      }
    }
    let now = this._clock();
    let batch;
    if (!mod) { s.idle(now); return true; } // restarting after a trap: nothing to send yet
    try {
      batch = mod.syncOut(this._ns(now));
    } catch (e) {
      s.failure(now);
      this._fail(e instanceof WebAssembly.RuntimeError ? this._trapped('sync out', e, false) : e);
      return false;
    }
    if (batch === null) {
      s.idle(now);
      return true;
    }
    this._early = null; // the batch carries them (see _replay)
    s.begin(now);
    // A batch sent again after a failed attempt asks for nothing new: the
    // requests held since it was cut still need an ask (_asked).
    sy.cut = this._unanswered ? this._cuts : ++this._cuts;
    this._unanswered = true;
    this._lastCut = sy;
    try {
      let r = await this._post(batch, sy);
      if (sy.done) return this._late(sy, mod, r);
      if (r.seqProblem) {
        // The coordinator refused the sequence number or the isolate's
        // secret and applied nothing (it lost this isolate's state, or a
        // restart or another client used its id): a new incarnation, with
        // a new id and secret, resends the same deltas as its batch 1.
        // The amendments on their way are of the old incarnation: void
        // (_inc: neither their replies nor their refusals count; those
        // dropped past their deadline too), none is waited for, and the
        // tally of the batch's cut starts afresh (refused for their
        // sequence number as the batch was, they say nothing of the new
        // incarnation's batch 1, the same cut), as in the Go host.
        const id = derivedId(this._firstId, `~${randomHex(12)}`);
        if (this._mod !== mod) throw new EdgeLimitError('the module restarted during the sync', 'sync');
        this._amends = [];
        this._amendTally = { cut: sy.cut, sent: 0, refused: 0 };
        this._inc++;
        mod.reincarnate(id, randomHex(32));
        this.isolateId = id;
        this.counters.reincarnations++;
        batch = mod.syncOut(this._ns(this._clock()));
        if (batch === null) throw new EdgeLimitError(`no batch to resend after reincarnating (${r.detail})`, 'internal');
        r = await this._post(batch, sy);
        if (sy.done) return this._late(sy, mod, r);
        if (r.seqProblem) throw new EdgeLimitError(`coordinator refused the new incarnation's batch: ${r.detail}`, 'sync_refused');
      }
      if (r.skewProblem) {
        // The coordinator refused the batch for times ahead of its clock
        // and applied nothing; its answer carried its time (_observeTime,
        // which told the module the step: it moved the keys' windows).
        // The module takes the batch back and cuts it again at that time,
        // under the same sequence number; it carries the asks of the
        // requests held since the refused one was cut (a new cut). A
        // batch that was amended is taken back only when every amendment
        // of it was refused for its times too (one applied, or whose
        // answer was lost, may have counted the batch): the amendments on
        // their way are awaited first (sent after the batch, their
        // answers come just after its refusal). Else it is resent as it
        // is, later.
        for (let flying = this._amendsOf(sy.cut); flying.length > 0; flying = this._amendsOf(sy.cut)) {
          await Promise.all(flying.map((a) => a.sent));
          if (sy.done) return this._late(sy, mod, r); // an amendment was applied: so was the batch
        }
        if (this._mod !== mod) throw new EdgeLimitError('the module restarted during the sync', 'sync');
        const t = this._amendTally;
        const amendsRefused = t.cut !== sy.cut || t.refused === t.sent;
        if (!mod.recall(this._ns(this._clock()), amendsRefused)) throw new EdgeLimitError(`sync: coordinator refused the batch's times: ${r.detail}`, 'sync_refused');
        for (const a of this._amends) if (a.sy === sy || a.cut === sy.cut) a.void = true;
        this._amends = this._amends.filter((a) => a.sy !== sy);
        this.counters.recalls++;
        batch = mod.syncOut(this._ns(this._clock()));
        if (batch === null) { // nothing left to report (a heartbeat's recheck that went stale)
          this._unanswered = false;
          s.idle(this._clock());
          return true;
        }
        sy.cut = ++this._cuts;
        r = await this._post(batch, sy);
        if (sy.done) return this._late(sy, mod, r);
        if (r.seqProblem || r.skewProblem) throw new EdgeLimitError(`coordinator refused the batch cut again at its time: ${r.detail}`, 'sync_refused');
      }
      now = this._clock();
      // A reply for an instance that trapped since does not fit the new one.
      if (this._mod !== mod) throw new EdgeLimitError('the module restarted during the sync', 'sync');
      mod.syncIn(r.body, this._ns(now));
      return this._applied(sy, mod);
    } catch (e) {
      if (sy.done) return false; // ended by its amendment's reply, or abandoned
      s.failure(this._clock());
      this._fail(e instanceof WebAssembly.RuntimeError ? this._trapped('sync', e, false) : e);
      return false;
    }
  }

  // The first reply of sync sy (its batch's or its amendment's) was
  // applied to mod: the sync succeeded.
  _applied(sy, mod) {
    this._unanswered = false;
    this._saidRefused = false;
    this._sched.success(this._clock());
    this.counters.syncs++;
    if (!this._saidForeign) this._sayForeign(mod);
    this._end(sy, true);
    return true;
  }

  // The batch's answer r after sync sy ended (its amendment's reply came
  // first): a reply is taken as a second one; a failure is nothing.
  _late(sy, mod, r) {
    if (sy.abandoned || r.seqProblem || r.skewProblem) return false;
    return this._second(mod, r.body);
  }

  // Applies a second reply to the last batch (wire/amend.go): its views and
  // leases, after which the held requests are decided again (an
  // amendment's reply is taken while the next batch is in flight too). One
  // the module refuses as stale (the next batch's reply came, or a batch
  // not amended was cut since) is dropped silently
  // (of one it takes, it keeps only the views newer than the keys'): the requests it would have
  // answered ask in the next batch (_resume). Returns whether it applied.
  _second(mod, body) {
    if (this._mod !== mod) return false;
    try {
      mod.syncIn(body, this._ns(this._clock()));
    } catch (e) {
      if (e instanceof WebAssembly.RuntimeError) this._fail(this._trapped('sync', e, false));
      else if (!e.stale) this._fail(e);
      this._resume();
      return false;
    }
    this._replyGen++;
    this._wake(SECOND_REPLY);
    return true;
  }

  // The amendments in flight at now. One past its deadline (syncTimeout
  // after it was sent, plus 100 ms) was cancelled by the runtime or hangs:
  // it is dropped (the batch may be amended again).
  _amending(now) {
    if (this._amends.some((a) => now >= a.deadline)) this._amends = this._amends.filter((a) => now < a.deadline);
    return this._amends;
  }

  // How many amendments of the last batch (the one in flight, or the one
  // answered last) are in flight at now. A sync that sent nothing is not
  // the last batch's (_cur is, _lastCut is not).
  _lastAmends(now) {
    let n = 0;
    for (const a of this._amending(now)) if (a.sy === this._lastCut) n++;
    return n;
  }

  // A request is held (limit()): while a batch is in flight, its reply
  // would not answer the request (the batch was cut before it asked), so
  // the batch is amended at once (wire/amend.go: the same seq, time and
  // entries, with the asks of the requests held since the cut) and sent
  // as a second attempt to the coordinator the batch went to; its reply
  // is taken as well as the batch's, and the request waits one round trip
  // instead of two. At most MAX_AMENDS amendments of a batch are in flight
  // (the last batch's may be too: the module takes one's reply while this
  // one flies); with nothing new to ask (or a module without el_amend) the
  // request waits for a reply. Returns the amendment sent, or null.
  _amendNow(ctx) {
    const now = this._clock();
    const sy = this._cur;
    const mod = this._mod;
    if (!mod || !this._busy(now) || sy.done || sy.target === null || this._lastAmends(now) >= MAX_AMENDS) return null;
    let out;
    try {
      out = mod.amend(this._ns(now));
    } catch (e) {
      this._fail(e instanceof WebAssembly.RuntimeError ? this._trapped('amend', e, false) : e);
      return null;
    }
    if (out === null) return null;
    const a = { sy, cut: sy.cut, inc: this._inc, void: false, deadline: now + this._syncTimeout + 100, sent: null };
    this._amends.push(a);
    this.counters.amendments++;
    if (this._amendTally.cut !== sy.cut) this._amendTally = { cut: sy.cut, sent: 0, refused: 0 };
    this._amendTally.sent++; // and those refused for their times: see _sendAmendment and the recall in _syncAttempt
    a.sent = this._sendAmendment(a, mod, sy.target, out);
    ctx?.waitUntil?.(a.sent);
    return a;
  }

  // The amendments of the cut-th batch cut (any attempt of it) on their way.
  _amendsOf(cut) {
    return this._amends.filter((a) => a.cut === cut);
  }

  // Sends amendment a of mod's batch to coordinator url and applies its
  // reply: the first of the sync (it ends it) or a second one. Its failure
  // (unreachable, timed out, refused, 409) is not a sync failure: no
  // backoff, no new incarnation; its requests wait for the batch's reply
  // or ask in the next batch.
  async _sendAmendment(a, mod, url, out) {
    let r = null;
    try {
      r = await this._postTo(url, out, this._syncTimeout, false);
    } catch { /* lost: see above */ }
    this._amends = this._amends.filter((x) => x !== a);
    if (a.inc !== this._inc) a.void = true; // of an earlier incarnation (see the reincarnation in _syncAttempt)
    if (r?.skewProblem && !a.void && this._amendTally.cut === a.cut) this._amendTally.refused++;
    let taken = false;
    if (r !== null && !r.seqProblem && !r.skewProblem && !a.void && this._mod === mod) {
      // Its batch no reply was applied to yet (the batch's attempt, or
      // an attempt that failed since: the module takes this reply as the
      // batch's, its outstanding one) ends with it; else it is a second
      // reply.
      const first = !a.sy.done || (this._unanswered && this._cuts === a.cut);
      if (!first) {
        taken = this._second(mod, r.body);
      } else {
        try {
          mod.syncIn(r.body, this._ns(this._clock()));
          taken = this._amendAnswered(a, mod);
        } catch (e) {
          if (e instanceof WebAssembly.RuntimeError) this._fail(this._trapped('sync', e, false));
          else if (!e.stale) this._fail(e);
        }
      }
    }
    if (!taken) this._resume();
  }

  // The reply of amendment a was applied to mod as its batch's first: it
  // ends the sync that sent the batch, or the one sending it again after
  // that failed; with none in flight (the batch's attempt failed, or one
  // not cut yet is waiting for the time), the batch is answered all the
  // same: the next batch is a new cut, and the held requests decide again.
  _amendAnswered(a, mod) {
    if (!a.sy.done) return this._applied(a.sy, mod);
    const cur = this._cur;
    if (this._inflight && cur && !cur.done && cur.cut === a.cut) return this._applied(cur, mod);
    this._unanswered = false;
    this._saidRefused = false;
    this._sched.success(this._clock());
    if (this._background === 'timers') this._arm(); // not a backoff's timer any more
    this.counters.syncs++;
    this._replyGen++;
    this._wake(SECOND_REPLY);
    return true;
  }

  // Requests held for an amendment's reply or a refused second reply got
  // none: they ask in the next batch, at once, unless a sync is in flight.
  // (In requests mode the held requests start it themselves: _pollSync.)
  _resume() {
    if (this._closed || this._background !== 'timers') return;
    const now = this._clock();
    if (this._held > 0 && !this._holdOff(now) && !this._cutWaits(now)) this._syncAndArm();
    else this._arm();
  }

  // A coordinator configured with other limits tells each key's limit in
  // its views; the module answers and decides with it (stats
  // foreign_limits). Said once per instance, on the console.
  _sayForeign(mod) {
    const n = Number(mod.stats().foreign_limits ?? 0);
    if (n > 0) {
      this._saidForeign = true;
      console.warn(`edgelimit: the coordinator's limits differ from this isolate's configuration (${n} views); answers, headers and decisions use the coordinator's (keep the two configurations the same)`);
    }
  }

  _fail(e) {
    this.counters.syncErrors++;
    this.lastError = e;
    if (misconfigured(e) && !this._saidRefused) {
      // No retry mends it: said once on the console until a sync
      // succeeds. Before, a wrong token or a URL naming no coordinator
      // showed only in lastError, while the fail policies decided every
      // request: under open, each isolate admitted up to the limit alone.
      this._saidRefused = true;
      console.error(`edgelimit: ${e.message}; the fail policies decide every request until a sync succeeds (check the token and the coordinator URL)`);
    }
    if (this._onError) {
      try { this._onError(e); } catch { /* the callback's own errors are not ours */ }
    }
  }

  // POSTs a batch to the coordinator in use, or first to the preferred
  // one when a return to it is due (_returnDue), then, while they cannot
  // take it (unreachable, timed out, 502, 503, 504), to the next ones,
  // once each, staying with the first that answers; {body} on 200,
  // {seqProblem, detail} on a 409 sequence problem; throws otherwise (the
  // same batch is retried later). Resending is safe: coordinators sharing
  // a store apply a batch at most once per (isolate, sequence number).
  // counters.failovers counts the moves on from a coordinator that failed
  // (not a failed try of the preferred one while away from it, nor the
  // failure of a batch already answered by its amendment's reply: the
  // isolate stays). sy.target
  // is the coordinator tried (sync sy's amendments go there).
  async _post(batch, sy) {
    const n = this._coordinators.length;
    if (n < 2) return this._postTo(sy.target = this._coordinator, batch);
    const inUse = this._coordIdx, pref = this._prefIdx;
    const returning = inUse !== pref && this._returnDue(this._clock());
    const order = returning ? [pref] : [];
    for (let i = 0; i < n; i++) {
      const idx = (inUse + i) % n;
      if (!returning || idx !== pref) order.push(idx);
    }
    let err;
    for (const idx of order) {
      try {
        // A return try waits _returnTimeout at most: a preferred
        // coordinator that hangs is not back, and the batch goes to the
        // one in use in this sync (waiting the whole syncTimeout made
        // the view stale at every return try).
        const ms = returning && idx === pref ? Math.min(this._returnTimeout, this._syncTimeout) : this._syncTimeout;
        const r = await this._postTo(sy.target = this._coordinators[idx], batch, ms);
        this._use(idx);
        return r;
      } catch (e) {
        err = e;
        if (!e.failover) { this._use(idx); throw e; } // it answered
        // An attempt that ended meanwhile (its batch answered by an
        // amendment's reply, or abandoned: _busy) moves nowhere: its
        // batch needs no other coordinator. Before, a batch whose own
        // POST failed after its amendment's reply answered it was sent
        // to the next coordinator, and the isolate moved there.
        if (sy.done) throw e;
        if (returning && idx === pref) continue; // still down: no failover
        this.counters.failovers++;
        if (idx === pref) { this._returnGap = 0; this._returnAt = this._clock() + this._returnAfter; }
      }
    }
    throw err;
  }

  // Makes the coordinator at idx the one in use (it answered).
  _use(idx) {
    this._coordIdx = idx;
    this._coordinator = this._coordinators[idx];
  }

  // Whether a sync away from the preferred coordinator should try it
  // first at now (ms); if so the next try is scheduled, twice the last
  // wait later (at most 8 times _returnAfter), in case this one fails.
  _returnDue(now) {
    if (now < this._returnAt) return false;
    this._returnGap = Math.min(Math.max(2 * this._returnGap, this._returnAfter), 8 * this._returnAfter);
    this._returnAt = now + this._returnGap;
    return true;
  }

  // Takes a reading of the coordinator's clock (header: ns since the epoch,
  // as text) made between sent and recv (ms, on the isolate's own clock):
  // the true offset is within [remote - recv, remote - sent]; when the
  // current one is more than OFFSET_TOLERANCE_MS outside it, it moves to
  // the middle (as clock.Offset in the Go host).
  _observeTime(sent, recv, header) {
    if (typeof header !== 'string' || !/^-?[0-9]{1,19}$/.test(header) || !(recv >= sent)) return;
    // A time before the epoch or past 2^62 ns (the year 2116) is no
    // clock's: two such readings that agreed (a broken proxy's constant
    // near 2^63) were taken, and every decision after was refused as a
    // time out of range (as clock.MaxReading in the Go host).
    const ns = Number(header);
    if (!(ns >= 0 && ns <= MAX_READING_NS)) return;
    const remote = ns / 1e6;
    const lo = remote - recv; const hi = remote - sent; const mid = (lo + hi) / 2;
    if (!(Math.abs(mid) <= MAX_OFFSET_MS)) {
      // A day or more off (a dead real-time clock, a restored snapshot):
      // taken when the next reading agrees, so a garbled header moves
      // nothing (ignored, such an isolate stayed stale for good).
      const prev = this._far; this._far = mid;
      if (!prev || !(Math.abs(prev - mid) <= FAR_AGREE_MS + (hi - lo))) return;
    }
    this._far = 0;
    this._timeKnown = true;
    if (this._offset >= lo - OFFSET_TOLERANCE_MS && this._offset <= hi + OFFSET_TOLERANCE_MS) return;
    // The times held on the old clock move with it: the scheduler's, and
    // the deadline of the sync in flight (a sync that waited for this
    // reading is not abandoned for a step forward).
    const step = mid - this._offset;
    this._offset = mid;
    this._mod?.clockOffset(mid); // a step back ends leases on time
    this._sched?.shift(step);
    if (this._inflight) this._inflightDeadline += step;
    this.counters.clockSteps++;
  }

  // Reads the coordinator's time once, before the isolate's first
  // decisions through limit() and wait() (GET /healthz, at most a second;
  // requests that come meanwhile wait for the same reading), so that it
  // neither decides nor cuts a batch on a clock that is off: a batch cut
  // ahead of the coordinator's clock by more than its allowed skew is
  // refused until the coordinator's clock catches up. One try; the syncs'
  // answers take readings from then on. A limit() on approximate
  // limiters alone only starts it (_startTime); the first batch waits
  // for it (_syncAttempt).
  async _awaitTime(ctx) {
    this._startTime(ctx);
    // Bounded: in Workers a reading started by a request that went away
    // may never end.
    const left = this._timeUntil - this._ownClock();
    if (this._timeWait && left > 0) {
      let t;
      await Promise.race([this._timeRead, new Promise((r) => { t = setTimeout(r, left); })]);
      clearTimeout(t);
    }
    this._settleTime();
  }

  // Starts the reading of the coordinator's time unless it was (ctx, the
  // request's ExecutionContext, keeps it alive in Workers).
  _startTime(ctx) {
    if (this._timeRead) return;
    const span = Math.min(this._syncTimeout, 1000);
    this._timeUntil = this._ownClock() + span;
    this._timeRead = this._readTime(span);
    ctx?.waitUntil?.(this._timeRead);
  }

  // Whether the reading was started and has not settled: neither answered
  // nor failed, and within its bound (past it, it settles now).
  _timePending() {
    if (!this._timeRead || !this._timeWait) return false;
    if (this._ownClock() < this._timeUntil) return true;
    this._settleTime();
    return false;
  }

  // The reading settled (answered, failed, or its bound passed): limit()
  // and the syncs wait no more, and the decisions before it are moved to
  // the coordinator's time (_replay). Once.
  _settleTime() {
    if (!this._timeWait) return;
    this._timeWait = false;
    this._replay();
  }

  // Reads the coordinator's time from the first coordinator of the list
  // that answers GET /healthz (the one in use first, each bounded by
  // syncTimeout, and abandoned as hung as a batch's POST is:
  // _abandonHung); returns null, or the last one's error when none
  // answered.
  async _readAny() {
    const n = this._coordinators.length;
    const start = Math.max(this._coordinators.indexOf(this._coordinator), 0);
    let err = null;
    for (let i = 0; i < n; i++) {
      const url = `${this._coordinators[(start + i) % n]}/healthz`;
      const ac = new AbortController();
      const t = setTimeout(() => ac.abort(new EdgeLimitError(`sync: GET ${url}: timed out after ${this._syncTimeout} ms`, 'sync_timeout')), this._syncTimeout);
      const get = { ac, url, at: this._clock(), method: 'GET' };
      this._posting = get;
      try {
        const sent = this._ownClock();
        const resp = await this._fetch(url, { signal: ac.signal, redirect: 'manual' });
        this._answered = true;
        this._observeTime(sent, this._ownClock(), resp.headers?.get?.(TIME_HEADER));
        await discardBody(resp);
        return null;
      } catch (e) {
        err = unreachable(url, ac.signal.aborted ? ac.signal.reason : e, 'GET');
      } finally {
        if (this._posting === get) this._posting = null;
        clearTimeout(t);
      }
    }
    return err;
  }

  async _readTime(span) {
    const ac = new AbortController();
    const t = setTimeout(() => ac.abort(), span);
    try {
      const sent = this._ownClock();
      const resp = await this._fetch(`${this._coordinator}/healthz`, { signal: ac.signal, redirect: 'manual' });
      this._answered = true;
      this._observeTime(sent, this._ownClock(), resp.headers?.get?.(TIME_HEADER));
      await discardBody(resp);
    } catch {
      // Unreachable: the syncs read it, and cut no batch before (_syncAttempt).
      this._timeFailed = !ac.signal.aborted;
    } finally { clearTimeout(t); this._settleTime(); }
  }

  // Says once per list (console.warn) that the coordinator took the
  // items of these limiters out of a batch and did not count them: the
  // token is not granted them, or the coordinator does not run them. The
  // rest of each batch is counted. At most MAX_TOLD_UNCOUNTED lists are
  // said and kept, each cut to 512 characters (a coordinator naming other
  // lists at every reply fills neither the log nor the memory).
  _uncounted(names) {
    if (!names) return;
    const told = (this._toldUncounted ??= new Set());
    const list = names.length > 512 ? `${names.slice(0, 512)}...` : names;
    if (told.has(list) || told.size > MAX_TOLD_UNCOUNTED) return;
    told.add(list);
    if (told.size > MAX_TOLD_UNCOUNTED) {
      console.warn(`edgelimit: the coordinator named more than ${MAX_TOLD_UNCOUNTED} lists of limiters it does not count; no more are said`);
      return;
    }
    console.warn(`edgelimit: the coordinator does not count limiters ${list} (not granted to this token, not in its configuration, or run there with another period); the rest is counted`);
  }

  // POSTs batch to coordinator's /v1/sync within ms. attempt: it is the
  // sync attempt's own POST, which a request on a stale view may abandon
  // as hung (_abandonHung); false for an amendment's.
  async _postTo(coordinator, batch, ms = this._syncTimeout, attempt = true) {
    const url = `${coordinator}/v1/sync`;
    const ac = new AbortController();
    const t = setTimeout(() => ac.abort(new EdgeLimitError(`sync: POST ${url}: timed out after ${ms} ms`, 'sync_timeout')), ms);
    const post = { ac, url, at: this._clock(), method: 'POST' }; // _abandonHung
    if (attempt) this._posting = post;
    try {
      const headers = { 'Content-Type': 'application/msgpack' };
      if (this._token) headers.Authorization = `Bearer ${this._token}`;
      const sent = this._ownClock();
      const resp = await this._fetch(url, { method: 'POST', body: batch, headers, signal: ac.signal, redirect: 'manual' }); // no redirect is followed (refusal)
      this._answered = true;
      this._observeTime(sent, this._ownClock(), resp.headers?.get?.(TIME_HEADER));
      const body = await readReply(resp, url);
      if (resp.status === 200) {
        const page = notAReply(url, resp.headers?.get?.('Content-Type'), body);
        if (page) throw page;
        this._uncounted(resp.headers?.get?.('Edgelimit-Uncounted'));
        return { body };
      }
      const r = refusal(url, resp.status, body, resp.headers?.get?.('Location'));
      if (r.seqProblem || r.skewProblem) return r;
      throw r;
    } catch (e) {
      if (e instanceof EdgeLimitError && e.code !== 'sync_timeout') throw e;
      throw unreachable(url, ac.signal.aborted ? ac.signal.reason : e);
    } finally {
      if (this._posting === post) this._posting = null;
      clearTimeout(t);
    }
  }

  /**
   * A graceful stop: from now on decides nothing (decide(), limit(),
   * wait() and schedule() throw code "closed"), lets the requests limit()
   * holds be decided on the replies they wait for, then stops the
   * background timers (Node) and gives the isolate's leases back to the
   * coordinator: what it admitted is reported and the rest returned, so a
   * restart strands nothing. Returns a promise (the same on every call)
   * that resolves to true when the coordinator took the last batch, false
   * when it could not be reached (the leases then expire on their own,
   * within the coordinator's lease life and grace, 2 s by default).
   * Pending syncs finish.
   */
  close() {
    if (this._closing) return this._closing;
    this._closing = this._drainAndRelease();
    return this._closing;
  }

  // close(): no new decision (decide() and limit() throw "closed"); the
  // limit() calls made before are decided first, on the replies they wait
  // for (each within retryWait, and the syncs go on meanwhile), so what
  // they admit is in the last batch. Released first, they were denied with
  // budget free, and what one admitted on a reply after the last batch was
  // cut was reported by nobody: a new isolate then admitted it again (12
  // of a strict 10 in some runs).
  async _drainAndRelease() {
    const end = Date.now() + Math.max(this._retryWait, 0) + 2 * this._syncTimeout; // real time: a test's clock may stand still
    while (this._calls > 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 2));
    this._closed = true;
    if (this._timer) { clearTimeout(this._timer); this._timer = null; }
    if (!this._coordinator || !this._mod) return true;
    try { this._mod.release(); } catch { return false; }
    return this._lastSyncs();
  }

  async _lastSyncs() {
    // The batch in flight, the last batch, and a margin for more leased
    // keys than one batch carries.
    for (let i = 0; i < 4; i++) {
      while (this._holdOff(this._clock())) await new Promise((r) => setTimeout(r, 1));
      try {
        if (!(await this._sync())) return false;
      } catch { return false; }
    }
    return true;
  }
}

// Compiles the module's bytes, or says why not (Workers refuse to compile
// at run time: they import the module instead).
function compile(bytes) {
  try {
    return new WebAssembly.Module(bytes);
  } catch (e) {
    throw new EdgeLimitError(`create: option wasm: the bytes do not compile (${e?.message ?? e}); ` +
      "in Workers import the module instead: import wasm from 'edgelimit/edgelimit.wasm'", 'bad_module', { cause: e });
  }
}

export default EdgeLimit;

/**
 * The index, in a list of n coordinators, of the one an isolate named id
 * prefers: FNV-1a 64 of id's UTF-8 bytes modulo n (0 when n is 1 or less,
 * or id is empty), as the Go host's syncloop.Preferred.
 */
export function preferredIndex(id, n) {
  if (n <= 1 || !id) return 0;
  let h = 0xcbf29ce484222325n;
  for (const b of new TextEncoder().encode(id)) {
    h ^= BigInt(b);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return Number(h % BigInt(n));
}
