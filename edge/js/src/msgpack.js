// A minimal msgpack codec for the few messages the package itself builds
// (the module's configuration) and reads (stats, problem types are JSON).
// Batches and replies are produced and consumed by the module: the package
// only moves their bytes. Integers beyond 2^53 must be given as BigInt.

const te = new TextEncoder();
const td = new TextDecoder();

/** Encodes v (null, boolean, number, bigint, string, Uint8Array, array, plain object) as msgpack. */
export function encode(v) {
  const out = [];
  enc(v, out);
  return Uint8Array.from(out);
}

function u(out, n, bytes) {
  for (let i = bytes - 1; i >= 0; i--) out.push(Number((BigInt(n) >> BigInt(8 * i)) & 0xffn));
}

function encInt(n, out) {
  n = BigInt(n);
  if (n >= 0n) {
    if (n < 128n) out.push(Number(n));
    else if (n < 256n) { out.push(0xcc); u(out, n, 1); }
    else if (n < 65536n) { out.push(0xcd); u(out, n, 2); }
    else if (n < 4294967296n) { out.push(0xce); u(out, n, 4); }
    else if (n < 18446744073709551616n) { out.push(0xcf); u(out, n, 8); }
    else throw new RangeError(`edgelimit: msgpack: integer ${n} out of range`);
  } else {
    if (n >= -32n) out.push(Number(n & 0xffn));
    else if (n >= -128n) { out.push(0xd0); u(out, n & 0xffn, 1); }
    else if (n >= -32768n) { out.push(0xd1); u(out, n & 0xffffn, 2); }
    else if (n >= -2147483648n) { out.push(0xd2); u(out, n & 0xffffffffn, 4); }
    else if (n >= -9223372036854775808n) { out.push(0xd3); u(out, n & 0xffffffffffffffffn, 8); }
    else throw new RangeError(`edgelimit: msgpack: integer ${n} out of range`);
  }
}

function enc(v, out) {
  if (v === null || v === undefined) out.push(0xc0);
  else if (v === true) out.push(0xc3);
  else if (v === false) out.push(0xc2);
  else if (typeof v === 'bigint') encInt(v, out);
  else if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) throw new TypeError(`edgelimit: msgpack: ${v} is not a safe integer (use a BigInt)`);
    encInt(v, out);
  } else if (typeof v === 'string') {
    const b = te.encode(v);
    if (b.length < 32) out.push(0xa0 | b.length);
    else if (b.length < 256) out.push(0xd9, b.length);
    else if (b.length < 65536) { out.push(0xda); u(out, b.length, 2); }
    else { out.push(0xdb); u(out, b.length, 4); }
    for (const x of b) out.push(x);
  } else if (v instanceof Uint8Array) {
    if (v.length < 256) out.push(0xc4, v.length);
    else if (v.length < 65536) { out.push(0xc5); u(out, v.length, 2); }
    else { out.push(0xc6); u(out, v.length, 4); }
    for (const x of v) out.push(x);
  } else if (Array.isArray(v)) {
    header(out, v.length, 0x90, 0xdc);
    for (const x of v) enc(x, out);
  } else if (typeof v === 'object') {
    const keys = Object.keys(v);
    header(out, keys.length, 0x80, 0xde);
    for (const k of keys) { enc(k, out); enc(v[k], out); }
  } else throw new TypeError(`edgelimit: msgpack: cannot encode ${typeof v}`);
}

function header(out, n, fix, code16) {
  if (n < 16) out.push(fix | n);
  else if (n < 65536) { out.push(code16); u(out, n, 2); }
  else { out.push(code16 + 1); u(out, n, 4); }
}

/**
 * Decodes one msgpack value. Integers are Numbers when safe, BigInts
 * otherwise; str8/16/32 are strings; bin is Uint8Array.
 */
export function decode(bytes) {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let off = 0;
  const need = (n) => { if (off + n > bytes.length) throw new RangeError('edgelimit: msgpack: input too short'); };
  const big = (x) => (x >= BigInt(Number.MIN_SAFE_INTEGER) && x <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(x) : x);
  const str = (n) => { need(n); const s = td.decode(bytes.subarray(off, off + n)); off += n; return s; };
  const bin = (n) => { need(n); const b = bytes.slice(off, off + n); off += n; return b; };
  const arr = (n) => { const a = []; for (let i = 0; i < n; i++) a.push(val()); return a; };
  const map = (n) => { const m = {}; for (let i = 0; i < n; i++) { const k = val(); m[k] = val(); } return m; };
  function val() {
    need(1);
    const c = bytes[off++];
    if (c < 0x80) return c;
    if (c >= 0xe0) return c - 256;
    if ((c & 0xf0) === 0x80) return map(c & 0x0f);
    if ((c & 0xf0) === 0x90) return arr(c & 0x0f);
    if ((c & 0xe0) === 0xa0) return str(c & 0x1f);
    let r;
    switch (c) {
      case 0xc0: return null;
      case 0xc2: return false;
      case 0xc3: return true;
      case 0xc4: need(1); r = dv.getUint8(off); off += 1; return bin(r);
      case 0xc5: need(2); r = dv.getUint16(off); off += 2; return bin(r);
      case 0xc6: need(4); r = dv.getUint32(off); off += 4; return bin(r);
      case 0xcc: need(1); return dv.getUint8(off++);
      case 0xcd: need(2); r = dv.getUint16(off); off += 2; return r;
      case 0xce: need(4); r = dv.getUint32(off); off += 4; return r;
      case 0xcf: need(8); r = big(dv.getBigUint64(off)); off += 8; return r;
      case 0xd0: need(1); return dv.getInt8(off++);
      case 0xd1: need(2); r = dv.getInt16(off); off += 2; return r;
      case 0xd2: need(4); r = dv.getInt32(off); off += 4; return r;
      case 0xd3: need(8); r = big(dv.getBigInt64(off)); off += 8; return r;
      case 0xd9: need(1); r = dv.getUint8(off); off += 1; return str(r);
      case 0xda: need(2); r = dv.getUint16(off); off += 2; return str(r);
      case 0xdb: need(4); r = dv.getUint32(off); off += 4; return str(r);
      case 0xdc: need(2); r = dv.getUint16(off); off += 2; return arr(r);
      case 0xdd: need(4); r = dv.getUint32(off); off += 4; return arr(r);
      case 0xde: need(2); r = dv.getUint16(off); off += 2; return map(r);
      case 0xdf: need(4); r = dv.getUint32(off); off += 4; return map(r);
    }
    throw new RangeError(`edgelimit: msgpack: unsupported type 0x${c.toString(16)}`);
  }
  const v = val();
  if (off !== bytes.length) throw new RangeError('edgelimit: msgpack: trailing bytes');
  return v;
}
