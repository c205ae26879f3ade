// Validation of create()'s options: every option is checked for its type
// and range when the limiter is created, not at the first decision, and an
// unknown option is refused by name (a misspelt "syncIntreval" would
// otherwise leave the default in force without a word).

import { EdgeLimitError } from './errors.js';

const MAX_MS = 2 ** 31 - 1; // the longest setTimeout delay, ms (24.8 days)
const MAX_TOKEN_LEN = 4096; // wire.MaxTokenLen (a Go test checks they agree)

const bad = (name, msg) => { throw new EdgeLimitError(`create: option ${name}: ${msg}`, 'bad_options'); };
const show = (v) => (typeof v === 'string' ? JSON.stringify(v) : typeof v === 'bigint' ? `${v}n` : typeof v === 'object' ? (v === null ? 'null' : 'an object') : String(v));

// A number of ms: finite, in [min, MAX_MS].
function ms(name, v, min, what) {
  if (typeof v !== 'number' || !Number.isFinite(v)) bad(name, `must be a number of ms, got ${show(v)}`);
  if (v < min || v > MAX_MS) bad(name, `${what}, got ${v}`);
  return v;
}

function fn(name, v) {
  if (typeof v !== 'function') bad(name, `must be a function, got ${show(v)}`);
  return v;
}

// Each option: a check of its value (called when the option is given).
const CHECKS = {
  wasm: (v) => {
    const ok = v instanceof WebAssembly.Module || v instanceof ArrayBuffer || ArrayBuffer.isView(v);
    if (!ok) bad('wasm', `must be a WebAssembly.Module (Workers: import wasm from 'edgelimit/edgelimit.wasm'; Node: await loadWasm() from 'edgelimit/node') or the module's bytes, got ${show(v)}`);
  },
  config: () => {}, // config.js checks it, naming each field
  coordinator: (v) => {
    const list = Array.isArray(v) ? v : [v];
    list.forEach((u, i) => {
      const name = Array.isArray(v) ? `coordinator[${i}]` : 'coordinator';
      if (typeof u !== 'string') bad(name, `must be a URL string, got ${show(u)}`);
      let url;
      try { url = new URL(u); } catch { bad(name, `${JSON.stringify(u)} is not a URL (want "https://host[:port]")`); }
      if (url.protocol !== 'http:' && url.protocol !== 'https:') bad(name, `${JSON.stringify(u)}: want an http: or https: URL`);
      if (url.search || url.hash) bad(name, `${JSON.stringify(u)}: the base URL takes no query or fragment`);
      // fetch refuses a URL with credentials: every sync would fail.
      if (url.username || url.password) bad(name, 'the URL takes no user or password (fetch refuses it): give the token option');
    });
  },
  token: (v) => {
    if (typeof v !== 'string') bad('token', `must be a string, got ${show(v)}`);
    // As the Go host and coordinator (wire.CheckToken): a token fetch can
    // send in "Authorization: Bearer ..." and the coordinator can hold. The
    // message names the position, never the token.
    if (v.length > MAX_TOKEN_LEN) bad('token', `must be at most ${MAX_TOKEN_LEN} characters, got ${v.length}`);
    const i = v.search(/[^\x21-\x7e]/);
    if (i >= 0) bad('token', `character ${i + 1} of ${v.length} is U+${v.charCodeAt(i).toString(16).padStart(4, '0')}: want visible ASCII (0x21-0x7e), no spaces`);
  },
  syncInterval: (v) => ms('syncInterval', v, 1, 'must be from 1 ms to 2^31-1 ms'),
  syncTimeout: (v) => ms('syncTimeout', v, 1, 'must be from 1 ms to 2^31-1 ms'),
  retryWait: (v) => ms('retryWait', v, -MAX_MS, 'must be at most 2^31-1 ms (negative: never wait)'),
  staleAfter: (v) => ms('staleAfter', v, 1, 'must be from 1 ms to 2^31-1 ms'),
  probeInterval: (v) => ms('probeInterval', v, -MAX_MS, 'must be at most 2^31-1 ms (negative: no probes)'),
  backoffMax: (v) => ms('backoffMax', v, 1, 'must be from 1 ms to 2^31-1 ms'),
  jitter: (v) => {
    if (typeof v !== 'number' || !(v >= 0 && v < 1)) bad('jitter', `must be a fraction in [0, 1), got ${show(v)}`);
  },
  failPolicy: (v) => {
    if (!['open', 'closed', 'local-share'].includes(v)) bad('failPolicy', `unknown fail policy ${show(v)} (want open, closed or local-share)`);
  },
  shareIsolates: (v) => {
    if (!Number.isSafeInteger(v) || v < 1) bad('shareIsolates', `must be an integer >= 1, got ${show(v)}`);
  },
  isolateId: (v) => {
    if (typeof v !== 'string' || v === '') bad('isolateId', `must be a non-empty string, got ${show(v)}`);
    if (new TextEncoder().encode(v).length > 128) bad('isolateId', 'must be at most 128 bytes');
  },
  fetch: (v) => fn('fetch', v),
  clock: (v) => fn('clock', v),
  onError: (v) => fn('onError', v),
  background: (v) => {
    if (v !== 'timers' && v !== 'requests') bad('background', `must be "timers" or "requests", got ${show(v)}`);
  },
};

/** The names of create()'s options. */
export const OPTION_NAMES = Object.keys(CHECKS);

/**
 * Checks create()'s options: an object with wasm and config, no unknown
 * option, each given option of its type and range (undefined means the
 * default). Throws an EdgeLimitError code "bad_options" naming the option.
 */
export function checkOptions(opts) {
  if (opts === null || typeof opts !== 'object' || Array.isArray(opts)) {
    throw new EdgeLimitError(`create: takes an options object ({wasm, config, ...}), got ${show(opts)}`, 'bad_options');
  }
  for (const k of Object.keys(opts)) {
    if (!Object.hasOwn(CHECKS, k)) bad(k, `unknown option (known: ${OPTION_NAMES.join(', ')})`);
  }
  if (opts.wasm == null) bad('wasm', 'is required: the edgelimit module (Workers: import wasm from \'edgelimit/edgelimit.wasm\'; Node: await loadWasm() from \'edgelimit/node\')');
  if (opts.config == null) bad('config', 'is required: the limiters, as the coordinator\'s JSON config file (an object or its text)');
  for (const [k, v] of Object.entries(opts)) {
    // An absent coordinator may be given as undefined, null or "" (an
    // unset Workers variable): the isolate then decides alone.
    if (v === undefined || (k === 'coordinator' && (v === null || v === ''))) continue;
    CHECKS[k](v);
  }
}
