// Module is one instance of the edgelimit Wasm module (one isolate's
// state) driven through its scalar el_* exports: the key is copied into
// the module's key buffer, el_decide returns a status word, and the
// result is read from the result buffer (layouts: wasm/guest/abi.go).
// No msgpack and no Extism SDK on the decision path.

import { makeImports } from './imports.js';
import { encode, decode } from './msgpack.js';
import { EdgeLimitError, codeError, CODES } from './errors.js';

export { EdgeLimitError, codeError, CODES };

export const MAX_KEY_LEN = 256;
// The module's status code of a reply that does not answer the batch
// (core.ErrStaleReply).
const STALE_REPLY = -8;
const SMALL_COSTS = Array.from({ length: 257 }, (_, i) => BigInt(i));
const te = new TextEncoder();

export class Module {
  /**
   * @param {WebAssembly.Module} wasmModule the compiled edgelimit module
   * @param {{random?: (b: Uint8Array) => void}} [opts]
   */
  constructor(wasmModule, opts = {}) {
    let memory = null;
    this._kernel = makeImports(() => memory, opts);
    let inst;
    try {
      inst = new WebAssembly.Instance(wasmModule, this._kernel.imports);
    } catch (e) {
      throw new EdgeLimitError(`the module does not instantiate with the edgelimit imports (is it edgelimit.wasm?): ${e?.message ?? e}`, 'bad_module', { cause: e });
    }
    const x = inst.exports;
    // el_admit and el_amend are optional: a module older than them still
    // drives (admit records nothing, amend has nothing to send).
    for (const name of ['el_key_buf', 'el_result_buf', 'el_io_buf', 'el_io_ptr', 'el_decide', 'el_decide_multi',
      'el_reset', 'el_configure', 'el_sync_out', 'el_sync_in', 'el_reincarnate', 'el_stats', 'el_observe', 'el_release', '_initialize']) {
      if (typeof x[name] !== 'function') throw new EdgeLimitError(`the module does not export ${name}`, 'bad_module');
    }
    this.exports = x;
    this.memory = x.memory;
    memory = x.memory;
    x._initialize();
    this._decide = x.el_decide;
    this.keyBuf = x.el_key_buf();
    this.resBuf = x.el_result_buf();
    this._res32 = this.resBuf >> 2;
    this._refresh();
  }

  _refresh() {
    this._buf = this.memory.buffer;
    this.u8 = new Uint8Array(this._buf);
    this.u32 = new Uint32Array(this._buf);
    this.i32 = new Int32Array(this._buf);
  }

  /**
   * Writes key (a string, as UTF-8, or a Uint8Array) into the module's
   * memory at off and returns its length in bytes; -3 when it is longer
   * than MAX_KEY_LEN. An ASCII string is copied a char at a time (no
   * allocation, no call out of JavaScript), others through encodeInto.
   */
  putKey(key, off) {
    if (typeof key === 'string') {
      const n = key.length;
      const u8 = this.u8;
      if (n <= MAX_KEY_LEN) {
        let i = 0;
        for (; i < n; i++) {
          const c = key.charCodeAt(i);
          if (c > 0x7f) break;
          u8[off + i] = c;
        }
        if (i === n) return n;
      }
      // Room for one more UTF-8 sequence than fits: a longer key is seen
      // as one (it did not fit, or took more than MAX_KEY_LEN bytes).
      const { read, written } = te.encodeInto(key, u8.subarray(off, off + MAX_KEY_LEN + 4));
      return read < n || written > MAX_KEY_LEN ? -3 : written;
    }
    if (!(key instanceof Uint8Array)) throw new EdgeLimitError(`key must be a string or a Uint8Array, got ${key === null ? 'null' : typeof key}`, 'bad_key');
    if (key.length > MAX_KEY_LEN) return -3;
    this.u8.set(key, off);
    return key.length;
  }

  /**
   * Decides (limiter index, key, cost) at nowNs (a BigInt). Returns the
   * status word: >= 0 is bit 0 allowed, bit 1 sync wanted, bit 2 sync
   * retry; < 0 an error code (see codeError). Read the rest with
   * resultInt.
   */
  decide(limiter, key, cost, nowNs) {
    const n = this.putKey(key, this.keyBuf);
    if (n < 0) return n;
    const st = this._decide(limiter, n, cost <= 256 && cost >= 0 && Number.isInteger(cost) ? SMALL_COSTS[cost] : BigInt(cost), nowNs);
    if (this.memory.buffer !== this._buf) this._refresh();
    return st;
  }

  /**
   * Checks several {limiter (index), key, cost} together, all or nothing.
   * Returns a status word as decide does.
   */
  decideMulti(checks, nowNs) {
    if (checks.length < 1 || checks.length > 8) return -7;
    let off = this.keyBuf;
    const dv = new DataView(this._buf);
    for (const c of checks) {
      const n = this.putKey(c.key, off + 16);
      if (n < 0) return n;
      dv.setUint32(off, c.limiter, true);
      dv.setUint32(off + 4, n, true);
      dv.setBigInt64(off + 8, BigInt(c.cost), true);
      off += 16 + n;
    }
    const st = this.exports.el_decide_multi(checks.length, nowNs);
    if (this.memory.buffer !== this._buf) this._refresh();
    return st;
  }

  /**
   * Field i of the last decision's result buffer as a Number:
   * 0 allowed, 1 limit, 2 remaining, 3 reset ns (Number: ~256 ns precision
   * at today's epoch), 4 retry-after ns (-1 never), 5 flags, 6 limiter index
   * (the slots of the Go package wasm/abi, which defines the ABI).
   */
  resultInt(i) {
    const j = this._res32 + 2 * i;
    return this.i32[j + 1] * 4294967296 + this.u32[j];
  }

  /**
   * Records cost of (limiter index, key) admitted by the host without a
   * decision (a fail policy admitting in the module's place, so the
   * coordinator counts it once back); returns 0 or an error code. A module
   * without el_admit records nothing (returns 0).
   */
  admit(limiter, key, cost, nowNs) {
    if (typeof this.exports.el_admit !== 'function') return 0;
    const n = this.putKey(key, this.keyBuf);
    if (n < 0) return n;
    const st = this.exports.el_admit(limiter, n, BigInt(cost), nowNs);
    if (this.memory.buffer !== this._buf) this._refresh();
    return st;
  }

  /** Forgets the local state of (limiter index, key); returns 0 or an error code. */
  reset(limiter, key) {
    const n = this.putKey(key, this.keyBuf);
    if (n < 0) return n;
    const st = this.exports.el_reset(limiter, n);
    if (this.memory.buffer !== this._buf) this._refresh();
    return st;
  }

  _writeIO(bytes, code) {
    const p = this.exports.el_io_buf(bytes.length);
    this._refresh();
    if (p === 0) throw new EdgeLimitError(`io buffer: ${bytes.length} bytes is too large`, code);
    this.u8.set(bytes, p);
  }

  _readIO(n) {
    const p = this.exports.el_io_ptr();
    this._refresh();
    return this.u8.slice(p, p + n);
  }

  /**
   * Configures the module with a wire configuration object (see
   * config.js toWire). Throws an EdgeLimitError with the module's own
   * message when it refuses it.
   */
  configure(wireConfig) {
    const b = encode(wireConfig);
    this._writeIO(b, 'bad_config');
    const c = this.exports.el_configure(b.length);
    this._refresh();
    if (c < 0) {
      // The scalar export only returns a code; the Extism-style export
      // says what is wrong.
      const detail = this.callExtism('configure', b).error ?? CODES[-c];
      const v = /field "v": version (-?\d+) is not supported \(want (-?\d+)\)/.exec(detail);
      if (v) {
        throw new EdgeLimitError(`this package (protocol version ${v[1]}) cannot drive this module, which speaks protocol version ${v[2]}: ` +
          'use the module the package ships (edgelimit/edgelimit.wasm) or the package of its version', 'version_mismatch');
      }
      throw new EdgeLimitError(`configure: ${detail}`, 'bad_config');
    }
  }

  /**
   * Calls an Extism-style export (configure, decide, sync_out, sync_in,
   * stats, reset) with msgpack input; returns {output, error}.
   */
  callExtism(name, input) {
    const f = this.exports[name];
    if (typeof f !== 'function') throw new EdgeLimitError(`the module does not export ${name}`, 'bad_module');
    this._kernel.begin(input);
    let rc;
    try {
      rc = f();
    } finally {
      this._refresh();
    }
    const r = this._kernel.end();
    if (rc !== 0 && r.error == null) r.error = `${name} returned ${rc}`;
    return r;
  }

  /**
   * Returns the batch to send (msgpack bytes, a copy), null when there is
   * nothing to sync; while a batch is unanswered, the same batch again.
   */
  syncOut(nowNs) {
    const n = this.exports.el_sync_out(nowNs);
    if (n < 0) { this._refresh(); throw codeError('sync out', n); }
    if (n === 0) { this._refresh(); return null; }
    return this._readIO(n);
  }

  /**
   * Returns the batch in flight amended with the asks of the requests held
   * (syncRetry) since it was cut (msgpack bytes, a copy: the same seq, time
   * and entries with "ak"; wasm/wire/amend.go), to send at once as a second
   * attempt of that batch; null when there is none to send (no batch in
   * flight, nothing held since the last amendment, or a module without
   * el_amend).
   */
  amend(nowNs) {
    if (typeof this.exports.el_amend !== 'function') return null;
    const n = this.exports.el_amend(nowNs);
    if (n < 0) { this._refresh(); throw codeError('amend', n); }
    if (n === 0) { this._refresh(); return null; }
    return this._readIO(n);
  }

  /**
   * Applies a coordinator reply (msgpack bytes) at nowNs: the reply to the
   * outstanding batch, or a second reply to the last one (its amendment's,
   * or the batch's after its amendment's) until the next batch is cut, or
   * an amendment's reply while the next batch is in flight.
   * Throws an EdgeLimitError of code "sync_reply" when the module refuses
   * it; its stale property is true when the reply does not answer the
   * batch (a later batch was cut). Of a second reply the module keeps
   * only the views newer than the keys' (one made before the first).
   */
  syncIn(reply, nowNs) {
    this._writeIO(reply, 'sync_reply');
    const c = this.exports.el_sync_in(reply.length, nowNs);
    this._refresh();
    if (c < 0) {
      const e = codeError('sync in', c);
      e.stale = c === STALE_REPLY;
      throw e;
    }
  }

  /**
   * Tells the module that the host denies for good the request its last
   * decision answered syncRetry (its retries are used up): the asks that
   * decision recorded and no batch carried yet are taken back, so no lease
   * is granted for a request gone. Call it right after that decision. A
   * module without el_withdraw does nothing.
   */
  withdraw() {
    const f = this.exports.el_withdraw;
    if (typeof f !== 'function') return;
    const c = f();
    if (c < 0) throw codeError('withdraw', c);
  }

  /**
   * Tells the module that the times passed from now on are the isolate's
   * own clock plus ms (the coordinator's time, a Number of ms): a lower
   * offset than the last is a step back, and the module moves its lease
   * ends back with it, so a lease never outlives the coordinator's record
   * of it. A module without el_clock_offset is told nothing.
   */
  clockOffset(ms) {
    const f = this.exports.el_clock_offset;
    if (typeof f !== 'function') return;
    const c = f(BigInt(Math.round(ms * 1e6)));
    if (c < 0) throw codeError('clock offset', c);
  }

  /**
   * Starts a graceful stop: the next batches report every key holding a
   * lease, the last one giving the leases back to the coordinator.
   */
  release() {
    const c = this.exports.el_release();
    if (c < 0) throw codeError('release', c);
  }

  /**
   * Takes the outstanding batch back after the coordinator refused it for
   * its times (400 clock_skew) and applied nothing of it, at now (BigInt
   * ns, the isolate's time on the clock the refusal's reading put it on):
   * the next syncOut cuts it again under the same sequence number.
   * amendsRefused: every amendment of the batch (amend) was answered, each
   * refused for its times too. Returns whether a batch was taken back
   * (false: none outstanding, an amended one and amendsRefused false, or a
   * module without el_recall).
   */
  recall(now, amendsRefused = false) {
    const f = this.exports.el_recall;
    if (typeof f !== 'function') return false;
    const c = f(now, amendsRefused ? 1 : 0);
    this._refresh();
    if (c < 0) throw codeError('recall', c);
    return c === 1;
  }

  /**
   * Starts a new incarnation under id with its secret (ASCII, 16 to 64
   * bytes): sequence numbers restart at 1 and the outstanding batch becomes
   * batch 1 of the new id.
   */
  reincarnate(id, secret) {
    const idb = te.encode(id);
    const sb = te.encode(secret);
    const b = new Uint8Array(idb.length + sb.length);
    b.set(idb);
    b.set(sb, idb.length);
    this._writeIO(b, 'bad_options');
    const c = this.exports.el_reincarnate(idb.length, sb.length);
    this._refresh();
    if (c < 0) throw codeError('reincarnate', c);
  }

  /**
   * Applies an upstream's answer (a wire.Observation object: v, limiter,
   * key, now (BigInt ns), status, h: [[name, value]...]); returns the
   * decoded wire.Observed ({paused_ns, circuit, limit, sync, ignored}).
   */
  observe(observation) {
    const b = encode(observation);
    this._writeIO(b, 'bad_input');
    const n = this.exports.el_observe(b.length);
    if (n < 0) { this._refresh(); throw codeError('observe', n); }
    return decode(this._readIO(n));
  }

  /** The module's counters (wire.Stats: keys, decisions, denials, ...). */
  stats() {
    const n = this.exports.el_stats();
    if (n < 0) { this._refresh(); throw codeError('stats', n); }
    return decode(this._readIO(n));
  }

  /** Size of the module's linear memory, in bytes. */
  memoryBytes() { return this.memory.buffer.byteLength; }
}
