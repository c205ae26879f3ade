// The configuration: the same JSON as the coordinator's config file
// (wire.FileConfig: "period" a Go duration string) or, for a limiter,
// "period_ns" as a Number or BigInt.

import { EdgeLimitError } from './errors.js';
import { PROTOCOL_VERSION } from './version.js';

const UNITS = { ns: 1n, us: 1000n, 'µs': 1000n, 'μs': 1000n, ms: 1000000n, s: 1000000000n, m: 60000000000n, h: 3600000000000n, d: 86400000000000n };

/** Parses a Go duration string ("1s", "1m30s", "1.5h", "250ms"), with days first as the Go tools read them ("1d", "1d12h"), into ns (BigInt). */
export function parseDuration(s) {
  if (typeof s !== 'string' || s === '') throw new EdgeLimitError(`invalid duration ${JSON.stringify(s)}`, 'bad_config');
  let rest = s;
  let neg = false;
  if (rest[0] === '-' || rest[0] === '+') { neg = rest[0] === '-'; rest = rest.slice(1); }
  if (rest === '0') return 0n;
  let total = 0n;
  const re = /^(\d*)(?:\.(\d*))?(ns|us|µs|μs|ms|s|m|h|d)/;
  if (rest === '') throw new EdgeLimitError(`invalid duration ${JSON.stringify(s)}`, 'bad_config');
  while (rest !== '') {
    const m = re.exec(rest);
    if (!m || (m[1] === '' && (m[2] ?? '') === '')) throw new EdgeLimitError(`invalid duration ${JSON.stringify(s)}`, 'bad_config');
    // Days ("1d", "1.5d12h"), as the Go side reads them: only first.
    if (m[3] === 'd' && rest !== s.replace(/^[-+]/, '')) throw new EdgeLimitError(`invalid duration ${JSON.stringify(s)} (days, "d", come first: "1d12h")`, 'bad_config');
    const unit = UNITS[m[3]];
    const frac = m[2] ?? '';
    total += BigInt(m[1] || '0') * unit + (frac ? (BigInt(frac) * unit) / 10n ** BigInt(frac.length) : 0n);
    rest = rest.slice(m[0].length);
  }
  return neg ? -total : total;
}

const ALGORITHMS = ['fixed_window', 'sliding_window', 'token_bucket', 'gcra'];
const BUCKETS = ['token_bucket', 'gcra'];
const MODES = ['', 'auto', 'approximate', 'strict'];
const POLICIES = ['open', 'closed', 'local-share'];
const MAX_LIMIT = 2 ** 50;
const MIN_PERIOD = 1000000n; // 1 ms, ns
const MAX_PERIOD = 31n * 24n * 3600n * 1000000000n; // 31 days, ns

// The fields of each object of the file (wire.FileConfig, FileLimiter,
// FileUpstream): any other is refused by its path, as the Go side refuses
// unknown fields. "coordinator" holds the coordinator's own settings.
const TOP_FIELDS = ['limiters', 'max_keys', 'coordinator'];
const LIMITER_FIELDS = ['name', 'algorithm', 'limit', 'period', 'period_ns', 'burst', 'mode', 'read_through', 'overrides', 'fail_policy', 'upstream'];
const UPSTREAM_FIELDS = ['max_pause', 'max_limit', 'circuit_failures', 'circuit_open', 'follow'];

const bad = (f, msg) => { throw new EdgeLimitError(`config: ${f}: ${msg}`, 'bad_config'); };
const show = (v) => (typeof v === 'string' ? JSON.stringify(v) : typeof v === 'bigint' ? `${v}n` : v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v === 'object' ? 'an object' : String(v));
const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const utf8Len = (s) => new TextEncoder().encode(s).length;

function known(obj, fields, path) {
  for (const k of Object.keys(obj)) {
    if (!fields.includes(k)) bad(`${path}${k}`, `unknown field (known: ${fields.join(', ')})`);
  }
}

// An integer field: a Number that is a safe integer in [min, max].
function int(v, path, min, max, what) {
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) bad(path, `must be an integer (${what}), got ${show(v)}`);
  if (v < min || v > max) bad(path, `must be ${what}, got ${v}`);
  return v;
}

function str(v, path, allowed, noun = 'value') {
  if (typeof v !== 'string') bad(path, `must be a string, got ${show(v)}`);
  if (allowed && !allowed.includes(v)) bad(path, `unknown ${noun} ${show(v)} (want ${allowed.filter((a) => a).join(', ')})`);
  return v;
}

function duration(v, path) {
  if (typeof v !== 'string') bad(path, `must be a Go duration string ("1s", "15m"), got ${show(v)}`);
  try { return parseDuration(v); } catch (e) { return bad(path, e.message.replace(/^edgelimit: /, '')); }
}

/**
 * Normalizes a user configuration (the coordinator's JSON config file,
 * wire.FileConfig, as an object or its text) into {maxKeys, limiters:
 * [{name, algorithm, limit, periodNs (BigInt), burst, mode, readThrough,
 * overrides: Map, failPolicy, upstream}]}. Every field is checked: an
 * unknown field, a value of the wrong type ("2" for 2) or out of range,
 * and burst on a window algorithm are refused with an EdgeLimitError code
 * "bad_config" naming the field's path ("limiters[0].limt"). A limiter
 * without a mode (or "auto") runs "auto" (leases, as the Go coordinator
 * reads the same file) when synced is true, and "approximate" when the
 * isolates never sync (no coordinator: leases would never come); without
 * a coordinator a strict or read-through limiter is refused (it would
 * deny every request).
 */
export function normalizeConfig(cfg, synced = false) {
  if (typeof cfg === 'string') {
    try { cfg = JSON.parse(cfg); } catch (e) { throw new EdgeLimitError(`config: not JSON: ${e.message}`, 'bad_config', { cause: e }); }
  }
  if (!isObject(cfg)) bad('(top)', `must be an object {"limiters": [...]}, got ${show(cfg)}`);
  known(cfg, TOP_FIELDS, '');
  if (!Array.isArray(cfg.limiters) || cfg.limiters.length === 0) bad('limiters', 'must be a non-empty array');
  if (cfg.limiters.length > 256) bad('limiters', 'more than 256 limiters');
  const maxKeys = cfg.max_keys === undefined ? 0 : int(cfg.max_keys, 'max_keys', 0, 1 << 24, 'between 0 (default: 100,000) and 16777216');
  if (cfg.coordinator !== undefined && !isObject(cfg.coordinator)) bad('coordinator', `must be an object (the coordinator's settings), got ${show(cfg.coordinator)}`);
  const seen = new Set();
  const limiters = cfg.limiters.map((l, i) => {
    const p = `limiters[${i}]`;
    if (!isObject(l)) bad(p, `must be an object, got ${show(l)}`);
    known(l, LIMITER_FIELDS, `${p}.`);
    str(l.name, `${p}.name`);
    if (l.name === '' || utf8Len(l.name) > 64) bad(`${p}.name`, 'must be 1 to 64 bytes');
    if (seen.has(l.name)) bad(`${p}.name`, `duplicate limiter name ${JSON.stringify(l.name)}`);
    seen.add(l.name);
    if (l.algorithm === undefined) bad(`${p}.algorithm`, `is required (want ${ALGORITHMS.join(', ')})`);
    str(l.algorithm, `${p}.algorithm`, ALGORITHMS, 'algorithm');
    int(l.limit, `${p}.limit`, 1, MAX_LIMIT, 'between 1 and 2^50');
    let periodNs;
    if (l.period !== undefined && l.period_ns !== undefined) bad(`${p}.period_ns`, 'give period or period_ns, not both');
    if (l.period_ns !== undefined) {
      const v = l.period_ns;
      if (!(typeof v === 'bigint' || Number.isSafeInteger(v))) bad(`${p}.period_ns`, `must be an integer of ns (a Number or BigInt), got ${show(v)}`);
      periodNs = BigInt(v);
    } else if (l.period !== undefined) {
      periodNs = duration(l.period, `${p}.period`);
    } else {
      bad(`${p}.period`, 'is required (a Go duration: "1s", "15m", "720h")');
    }
    if (periodNs < MIN_PERIOD || periodNs > MAX_PERIOD) bad(l.period_ns !== undefined ? `${p}.period_ns` : `${p}.period`, `must be between 1ms and 31 days, got ${periodNs} ns`);
    let burst = 0;
    if (l.burst !== undefined) {
      if (!BUCKETS.includes(l.algorithm)) bad(`${p}.burst`, `only token_bucket and gcra have a burst (a ${l.algorithm} admits its limit per window)`);
      burst = int(l.burst, `${p}.burst`, 0, MAX_LIMIT, 'between 0 (= the limit) and 2^50');
    }
    const mode = l.mode === undefined ? '' : str(l.mode, `${p}.mode`, MODES, 'mode');
    if (l.read_through !== undefined && typeof l.read_through !== 'boolean') bad(`${p}.read_through`, `must be true or false, got ${show(l.read_through)}`);
    // Alone, these would deny every request while the window has room
    // (as the Go host refuses them: wire.Config.Alone).
    if (!synced && mode === 'strict') bad(`${p}.mode`, 'strict admits only within leases from a coordinator, and there is none (give the coordinator option, or make the limiter approximate or auto)');
    if (!synced && l.read_through) bad(`${p}.read_through`, 'a cold key asks a coordinator, and there is none (give the coordinator option, or drop read_through)');
    if (l.fail_policy !== undefined) str(l.fail_policy, `${p}.fail_policy`, POLICIES, 'fail policy');
    const overrides = new Map();
    if (l.overrides !== undefined) {
      const o = l.overrides;
      if (!isObject(o) && !Array.isArray(o)) bad(`${p}.overrides`, `must be an object {"key": limit}, got ${show(o)}`);
      const entries = Array.isArray(o) ? o : Object.entries(o);
      if (entries.length > 4096) bad(`${p}.overrides`, 'more than 4096 overrides');
      entries.forEach((e, j) => {
        if (!Array.isArray(e) || e.length !== 2) bad(`${p}.overrides[${j}]`, 'must be a [key, limit] pair');
        const [k, v] = e;
        const q = Array.isArray(o) ? `${p}.overrides[${j}]` : `${p}.overrides.${k}`;
        if (typeof k !== 'string' || k === '' || utf8Len(k) > 256) bad(q, 'the key must be a string of 1 to 256 bytes');
        overrides.set(k, int(v, q, 1, MAX_LIMIT, 'between 1 and 2^50'));
      });
    }
    let upstream = null;
    if (l.upstream !== undefined) {
      const u = l.upstream;
      const q = `${p}.upstream`;
      if (!isObject(u)) bad(q, `must be an object, got ${show(u)}`);
      known(u, UPSTREAM_FIELDS, `${q}.`);
      upstream = {
        max_pause_ns: u.max_pause === undefined ? 0n : duration(u.max_pause, `${q}.max_pause`),
        max_limit: u.max_limit === undefined ? 0 : int(u.max_limit, `${q}.max_limit`, 0, MAX_LIMIT, 'between 0 (the limit) and 2^50'),
        circuit_failures: u.circuit_failures === undefined ? 0 : int(u.circuit_failures, `${q}.circuit_failures`, -1, 2 ** 31, '-1 (off), 0 (default) or a count'),
        circuit_open_ns: u.circuit_open === undefined ? 0n : duration(u.circuit_open, `${q}.circuit_open`),
      };
      if (u.follow !== undefined && str(u.follow, `${q}.follow`, ['', 'always', 'never'])) upstream.follow = u.follow;
    }
    return {
      upstream,
      name: l.name, algorithm: l.algorithm, limit: l.limit, periodNs, burst,
      mode: mode === '' || mode === 'auto' ? (synced ? 'auto' : 'approximate') : mode, readThrough: !!l.read_through, overrides, failPolicy: l.fail_policy ?? '',
    };
  });
  return { maxKeys, limiters, standalone: !synced };
}

/**
 * The wire.Config message (msgpack field names) for a normalized config,
 * the isolate's id, the sync interval (ms) and the incarnation's secret (32
 * random hex digits; see wire.Config.IsolateSecret).
 */
export function toWire(norm, isolateId, syncIntervalMs, secret) {
  const w = {
    v: PROTOCOL_VERSION,
    iso: isolateId,
    max_keys: norm.maxKeys,
    limiters: norm.limiters.map((l) => {
      const m = {
        name: l.name, algorithm: l.algorithm, limit: l.limit, period_ns: l.periodNs, burst: l.burst,
        mode: l.mode, read_through: l.readThrough,
        overrides: [...l.overrides].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, v]) => [k, v]),
      };
      if (l.failPolicy) m.fail_policy = l.failPolicy;
      if (l.upstream) m.upstream = l.upstream;
      return m;
    }),
  };
  // Isolates that never sync probe a half-open circuit on their own.
  if (norm.standalone) w.alone = true;
  // The sync interval (ms; 1 ms to 1 h): the module trusts a denial it
  // cached for two intervals after its last reply, then syncs first.
  if (!norm.standalone && syncIntervalMs > 0) w.sync_ns = Math.round(Math.min(Math.max(syncIntervalMs, 1), 3600e3) * 1e6);
  if (secret) w.secret = secret;
  return w;
}
