import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeLimit, EdgeLimitError, Module } from '../src/index.js';
import { encode, decode } from '../src/msgpack.js';
import { wasmBytes, wasmModule, fakeClock } from './helpers.js';
import { normalizeConfig } from '../src/config.js';

const fixed = (limit, extra = {}) => ({ limiters: [{ name: 'llm', algorithm: 'fixed_window', limit, period: '1s', ...extra }] });

test('a fixed window admits exactly its limit per window, then resets', async () => {
  const clock = fakeClock(1_800_000_000_000);
  const rl = await EdgeLimit.create({ wasm: wasmBytes, config: fixed(6), clock });
  const got = [];
  for (let i = 0; i < 9; i++) got.push((await rl.limit({ limiter: 'llm', key: 'user-1' })).success);
  assert.deepEqual(got, [true, true, true, true, true, true, false, false, false]);
  const d = rl.decide({ limiter: 'llm', key: 'user-1' });
  assert.equal(d.limit, 6);
  assert.equal(d.remaining, 0);
  assert.equal(d.reset, 1_800_000_001_000);
  assert.equal(d.retryAfterMs, 1000);
  assert.equal(rl.decide({ limiter: 'llm', key: 'user-2' }).success, true, 'another key has its own count');
  clock.now += 1000;
  assert.equal(rl.decide({ limiter: 'llm', key: 'user-1' }).success, true, 'a new window');
});

test('cost, peeks, overrides and keys as bytes or non-ASCII strings', async () => {
  const clock = fakeClock();
  const rl = await EdgeLimit.create({ wasm: wasmModule, clock, config: fixed(10, { overrides: { vip: 100 } }) });
  assert.equal(rl.decide({ limiter: 'llm', key: 'a', cost: 7 }).remaining, 3);
  assert.equal(rl.decide({ limiter: 'llm', key: 'a', cost: 4 }).success, false);
  assert.equal(rl.decide({ limiter: 'llm', key: 'a', cost: 0 }).remaining, 3, 'cost 0 peeks');
  assert.equal(rl.decide({ limiter: 'llm', key: 'vip', cost: 50 }).limit, 100);
  // The same key as a string (cached encoding) and as bytes counts once.
  rl.decide({ limiter: 'llm', key: 'clé-ü', cost: 2 });
  const d = rl.decide({ limiter: 'llm', key: new TextEncoder().encode('clé-ü'), cost: 1 });
  assert.equal(d.remaining, 7);
  // A cost that can never pass says so.
  assert.equal(rl.decide({ limiter: 'llm', key: 'b', cost: 11 }).retryAfterMs, -1);
});

test('bad input is a clear error and loses nothing', async () => {
  const rl = await EdgeLimit.create({ wasm: wasmBytes, config: fixed(3), clock: fakeClock() });
  rl.decide({ limiter: 'llm', key: 'k' });
  const err = (fn, re) => assert.throws(fn, (e) => e instanceof EdgeLimitError && re.test(e.message));
  err(() => rl.decide({ limiter: 'nope', key: 'k' }), /unknown limiter "nope"/);
  err(() => rl.decide({ limiter: NaN, key: 'k' }), /unknown limiter NaN/);
  err(() => rl.decide({ limiter: new String('llm'), key: 'k' }), /unknown limiter of type object/);
  err(() => rl.decide({ limiter: 'llm', key: '' }), /key must be 1 to 256 bytes, got 0/);
  err(() => rl.decide({ limiter: 'llm', key: 'x'.repeat(257) }), /key must be 1 to 256 bytes, got 257/);
  err(() => rl.decide({ limiter: 'llm', key: 'k', cost: -1 }), /cost must be an integer between 0 and 2\^40, got -1/);
  err(() => rl.decide({ limiter: 'llm', key: 'k', cost: 2 ** 41 }), /cost must be an integer between 0 and 2\^40/);
  err(() => rl.decide({ limiter: 'llm', key: 42 }), /key must be a string or a Uint8Array/);
  assert.equal(rl.decide({ limiter: 'llm', key: 'k' }).remaining, 1, 'the errors consumed nothing');
  assert.equal(rl.stats().decisions, 2);
});

test('a configuration the module refuses names the field', async () => {
  const mk = (cfg) => () => new EdgeLimit({ wasm: wasmBytes, config: cfg }).ready();
  assert.throws(mk(fixed(6, { mode: 'bogus' })), /limiters\[0\]\.mode.*unknown mode "bogus"/);
  assert.throws(mk(fixed(6, { period: '1w' })), /limiters\[0\]\.period: invalid duration "1w"/);
  assert.throws(mk(fixed(6, { period: '100us' })), /limiters\[0\]\.period.*between 1ms and 31 days/);
  assert.throws(mk({ limiters: [] }), /config: limiters: must be a non-empty array/);
  assert.throws(mk(fixed(0)), /limiters\[0\]\.limit: must be between 1 and 2\^50, got 0/);
});

test('several limiters checked together, all or nothing', async () => {
  const rl = await EdgeLimit.create({
    wasm: wasmBytes, clock: fakeClock(),
    config: { limiters: [{ name: 'a', algorithm: 'fixed_window', limit: 5, period: '1s' }, { name: 'b', algorithm: 'fixed_window', limit: 2, period: '1m' }] },
  });
  const both = { checks: [{ limiter: 'a', key: 'k' }, { limiter: 'b', key: 'k' }] };
  assert.equal(rl.decide(both).success, true);
  assert.equal(rl.decide(both).success, true);
  const d = rl.decide(both);
  assert.equal(d.success, false);
  assert.equal(d.limiter, 'b');
  assert.equal(rl.decide({ limiter: 'a', key: 'k', cost: 0 }).remaining, 3, 'the denied check took nothing from a');
});

test('the scalar path and the Extism-style msgpack export agree', () => {
  // Two isolates of the same module: one decided through el_decide, one
  // through the Extism-style "decide" export with this package's kernel.
  const cfg = { v: 1, iso: 'x', max_keys: 0, limiters: [{ name: 'g', algorithm: 'gcra', limit: 10, period_ns: 1_000_000_000, burst: 3, mode: '', read_through: false, overrides: [] }] };
  const a = new Module(wasmModule);
  const b = new Module(wasmModule);
  a.configure(cfg);
  b.configure(cfg);
  let now = 1_800_000_000_000_000_000n;
  for (let i = 0; i < 40; i++) {
    now += BigInt(i % 3) * 37_000_000n;
    const st = a.decide(0, 'key', 1, now);
    const { output, error } = b.callExtism('decide', encode({ v: 1, now, c: [['g', 'key', 1]] }));
    assert.equal(error, null);
    const d = decode(output);
    assert.equal((st & 1) === 1, d.allowed, `decision ${i}`);
    assert.equal(a.resultInt(2), d.remaining, `remaining ${i}`);
    assert.equal(BigInt(a.resultInt(4)), BigInt(d.retry_after_ns), `retry-after ${i}`);
  }
  const { error } = b.callExtism('decide', encode({ v: 1, now, c: [['nope', 'key', 1]] }));
  assert.match(error, /unknown limiter/);
});

test('msgpack: int64 as BigInt, every width, round trip', () => {
  for (const v of [0, 1, 127, 128, 255, 256, 65535, 65536, 2 ** 32, -1, -32, -33, -128, -129, -32769, -(2 ** 31) - 1,
    2n ** 62n, -(2n ** 63n), 'x'.repeat(31), 'y'.repeat(300), [1, [2, 'z']], { a: true, b: false, c: null }]) {
    assert.deepEqual(decode(encode(v)), v);
  }
  assert.throws(() => encode(2 ** 53), /not a safe integer \(use a BigInt\)/);
  assert.throws(() => decode(Uint8Array.of(0x92, 1)), /too short/);
});

test('the Extism-style exports keep working past 16,374 calls (the kernel store is per call)', () => {
  const m = new Module(wasmModule);
  m.configure({ v: 1, iso: 'x', max_keys: 0, limiters: [{ name: 'a', algorithm: 'fixed_window', limit: 1_000_000, period_ns: 60_000_000_000, burst: 0, mode: '', read_through: false, overrides: [] }] });
  const req = encode({ v: 1, now: 1_800_000_000_000_000_000n, c: [['a', 'k', 1]] });
  for (let i = 1; i <= 20_000; i++) {
    const { output, error } = m.callExtism('decide', req);
    if (error !== null) assert.fail(`call ${i}: ${error}`);
    if (i === 20_000) assert.equal(decode(output).remaining, 1_000_000 - 20_000);
  }
});

test('a trap in the module is an EdgeLimitError and the isolate restarts under a new id', async () => {
  const rl = await EdgeLimit.create({ wasm: wasmModule, config: fixed(3), clock: fakeClock(), isolateId: 'edge-a' });
  rl.decide({ limiter: 'llm', key: 'k' });
  // Corrupt the instance's memory: its next call traps.
  const m = rl.module;
  new Uint8Array(m.memory.buffer).fill(0xff, 1024);
  assert.throws(() => rl.decide({ limiter: 'llm', key: 'k' }),
    (e) => e instanceof EdgeLimitError && e.code === 'trap' && /restarting as "edge-a\/r1"/.test(e.message));
  const d = rl.decide({ limiter: 'llm', key: 'k' });
  assert.deepEqual([d.success, d.remaining], [true, 2], 'a fresh instance, its state lost');
  assert.equal(rl.isolateId, 'edge-a/r1');
  assert.equal(rl.stats().restarts, 1);
  assert.notEqual(rl.module, m);
});

test('a limiter without a mode runs auto when synced (as the Go coordinator reads the file), approximate alone; strict and read-through alone are refused', () => {
  const cfg = { limiters: [
    { name: 'a', algorithm: 'fixed_window', limit: 5, period: '1s' },
    { name: 's', algorithm: 'fixed_window', limit: 5, period: '1s', mode: 'strict' },
    { name: 'x', algorithm: 'fixed_window', limit: 5, period: '1s', mode: 'auto' },
  ] };
  assert.deepEqual(normalizeConfig(cfg, true).limiters.map((l) => l.mode), ['auto', 'strict', 'auto']);
  // Alone (no coordinator: an unset Workers variable), a strict limiter
  // would deny every request with syncRetry and no word why.
  assert.throws(() => normalizeConfig(cfg, false), (e) => e instanceof EdgeLimitError && e.code === 'bad_config' && /limiters\[1\]\.mode: strict admits only within leases from a coordinator/.test(e.message));
  const rt = { limiters: [cfg.limiters[0], { ...cfg.limiters[2], mode: 'approximate', read_through: true }] };
  assert.throws(() => normalizeConfig(rt, false), (e) => e.code === 'bad_config' && /limiters\[1\]\.read_through: a cold key asks a coordinator/.test(e.message));
  assert.deepEqual(normalizeConfig(rt, true).limiters.map((l) => [l.mode, l.readThrough]), [['auto', false], ['approximate', true]]);
  const alone = { limiters: [cfg.limiters[0], cfg.limiters[2]] };
  assert.deepEqual(normalizeConfig(alone, false).limiters.map((l) => l.mode), ['approximate', 'approximate']);
});

test('100,000 keys of 32 bytes fit in 32 MiB of linear memory (the module grows by doubling)', async () => {
  const rl = await EdgeLimit.create({ wasm: wasmModule, clock: fakeClock(), config: fixed(1_000_000_000) });
  for (let i = 0; i < 100_000; i++) rl.decide({ limiter: 'llm', key: `key-${String(i).padStart(28, '0')}` });
  const s = rl.stats();
  assert.equal(s.keys, 100_000);
  assert.ok(s.memoryBytes <= 32 * 2 ** 20, `linear memory ${s.memoryBytes} bytes for 100,000 keys, want <= 32 MiB`);
});
