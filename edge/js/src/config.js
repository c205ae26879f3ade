// The configuration: the same JSON as the coordinator's config file
// (wire.FileConfig: "period" a Go duration string) or, for a limiter,
// "period_ns" as a Number or BigInt.

import { EdgeLimitError } from './module.js';

const UNITS = { ns: 1n, us: 1000n, 'µs': 1000n, 'μs': 1000n, ms: 1000000n, s: 1000000000n, m: 60000000000n, h: 3600000000000n };

/** Parses a Go duration string ("1s", "1m30s", "1.5h", "250ms") into ns (BigInt). */
export function parseDuration(s) {
  if (typeof s !== 'string' || s === '') throw new EdgeLimitError(`invalid duration ${JSON.stringify(s)}`, 'bad_config');
  let rest = s;
  let neg = false;
  if (rest[0] === '-' || rest[0] === '+') { neg = rest[0] === '-'; rest = rest.slice(1); }
  if (rest === '0') return 0n;
  let total = 0n;
  const re = /^(\d*)(?:\.(\d*))?(ns|us|µs|μs|ms|s|m|h)/;
  if (rest === '') throw new EdgeLimitError(`invalid duration ${JSON.stringify(s)}`, 'bad_config');
  while (rest !== '') {
    const m = re.exec(rest);
    if (!m || (m[1] === '' && (m[2] ?? '') === '')) throw new EdgeLimitError(`invalid duration ${JSON.stringify(s)}`, 'bad_config');
    const unit = UNITS[m[3]];
    const frac = m[2] ?? '';
    total += BigInt(m[1] || '0') * unit + (frac ? (BigInt(frac) * unit) / 10n ** BigInt(frac.length) : 0n);
    rest = rest.slice(m[0].length);
  }
  return neg ? -total : total;
}

const ALGORITHMS = ['fixed_window', 'sliding_window', 'token_bucket', 'gcra'];
const POLICIES = ['open', 'closed', 'local-share'];

/**
 * Normalizes a user configuration into {maxKeys, limiters: [{name,
 * algorithm, limit, periodNs (BigInt), burst, mode, readThrough,
 * overrides: Map, failPolicy}]}. A limiter without a mode (or "auto")
 * runs "auto" (leases, as the Go coordinator reads the same file) when
 * synced is true, and "approximate" when the isolates never sync (no
 * coordinator: leases would never come). Throws an EdgeLimitError naming
 * the field; the module validates the rest when configured.
 */
export function normalizeConfig(cfg, synced = false) {
  if (typeof cfg === 'string') cfg = JSON.parse(cfg);
  if (!cfg || !Array.isArray(cfg.limiters) || cfg.limiters.length === 0) {
    throw new EdgeLimitError('config: "limiters" must be a non-empty array', 'bad_config');
  }
  const bad = (f, msg) => { throw new EdgeLimitError(`config: ${f}: ${msg}`, 'bad_config'); };
  const seen = new Set();
  const limiters = cfg.limiters.map((l, i) => {
    const p = `limiters[${i}]`;
    if (typeof l.name !== 'string' || l.name === '') bad(`${p}.name`, 'must be a non-empty string');
    if (seen.has(l.name)) bad(`${p}.name`, `duplicate limiter name ${JSON.stringify(l.name)}`);
    seen.add(l.name);
    if (!ALGORITHMS.includes(l.algorithm)) bad(`${p}.algorithm`, `unknown algorithm ${JSON.stringify(l.algorithm)} (want ${ALGORITHMS.join(', ')})`);
    if (!Number.isSafeInteger(l.limit) || l.limit < 1) bad(`${p}.limit`, 'must be an integer >= 1');
    let periodNs;
    if (l.period_ns !== undefined) periodNs = BigInt(l.period_ns);
    else {
      try { periodNs = parseDuration(l.period); } catch (e) { bad(`${p}.period`, e.message.replace(/^edgelimit: /, '')); }
    }
    if (l.fail_policy !== undefined && !POLICIES.includes(l.fail_policy)) bad(`${p}.fail_policy`, `unknown fail policy ${JSON.stringify(l.fail_policy)} (want open, closed or local-share)`);
    const overrides = new Map();
    if (l.overrides) {
      const entries = Array.isArray(l.overrides) ? l.overrides : Object.entries(l.overrides);
      for (const [k, v] of entries) {
        if (!Number.isSafeInteger(v) || v < 1) bad(`${p}.overrides.${k}`, 'must be an integer >= 1');
        overrides.set(k, v);
      }
    }
    let upstream = null;
    if (l.upstream !== undefined) {
      const u = l.upstream;
      const q = `${p}.upstream`;
      if (!u || typeof u !== 'object' || Array.isArray(u)) bad(q, 'must be an object');
      upstream = { max_pause_ns: 0n, max_limit: u.max_limit ?? 0, circuit_failures: u.circuit_failures ?? 0, circuit_open_ns: 0n };
      for (const [f, w] of [['max_pause', 'max_pause_ns'], ['circuit_open', 'circuit_open_ns']]) {
        if (u[f] === undefined) continue;
        try { upstream[w] = parseDuration(u[f]); } catch (e) { bad(`${q}.${f}`, e.message.replace(/^edgelimit: /, '')); }
      }
      if (!Number.isSafeInteger(upstream.max_limit) || upstream.max_limit < 0) bad(`${q}.max_limit`, 'must be an integer >= 0');
      if (!Number.isSafeInteger(upstream.circuit_failures) || upstream.circuit_failures < -1) bad(`${q}.circuit_failures`, 'must be -1 (off), 0 (default) or a count');
      if (u.follow !== undefined) {
        if (!['always', 'never', ''].includes(u.follow)) bad(`${q}.follow`, `unknown value ${JSON.stringify(u.follow)} (want always or never)`);
        if (u.follow) upstream.follow = u.follow;
      }
    }
    return {
      upstream,
      name: l.name, algorithm: l.algorithm, limit: l.limit, periodNs, burst: l.burst ?? 0,
      mode: (l.mode ?? '') === '' || l.mode === 'auto' ? (synced ? 'auto' : 'approximate') : l.mode, readThrough: !!l.read_through, overrides, failPolicy: l.fail_policy ?? '',
    };
  });
  return { maxKeys: cfg.max_keys ?? 0, limiters, standalone: !synced };
}

/** The wire.Config message (msgpack field names) for a normalized config. */
export function toWire(norm, isolateId) {
  const w = {
    v: 1,
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
  return w;
}
