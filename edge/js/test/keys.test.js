// Keys are written straight into the module's memory (no per-key cache):
// ASCII a char at a time, others through encodeInto. A key given as a
// string and as its UTF-8 bytes is the same key, and the 256-byte bound
// holds at every boundary.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeLimit, EdgeLimitError } from '../src/index.js';
import { wasmModule, fakeClock } from './helpers.js';

const config = { limiters: [{ name: 'k', algorithm: 'fixed_window', limit: 100, period: '1h' }] };
const te = new TextEncoder();

test('a string key and its UTF-8 bytes are one key, ASCII or not, at every length up to 256 bytes', async () => {
  const rl = await EdgeLimit.create({ wasm: wasmModule, config, clock: fakeClock() });
  const keys = ['a', 'x'.repeat(256), 'é'.repeat(128), `${'a'.repeat(100)}é${'b'.repeat(10)}`, `${'z'.repeat(252)}😀`, 'ü', '日本語のキー'];
  for (const key of keys) {
    assert.equal(rl.decide({ key, cost: 3 }).remaining, 97, `first decision of ${JSON.stringify(key.slice(0, 12))}`);
    assert.equal(rl.decide({ key: te.encode(key), cost: 0 }).remaining, 97, `the bytes of ${JSON.stringify(key.slice(0, 12))} name the same key`);
  }
  // A key after a longer non-ASCII one leaves none of its bytes behind.
  assert.equal(rl.decide({ key: 'ab', cost: 0 }).remaining, 100);
  assert.equal(rl.decide({ key: te.encode('ab'), cost: 2 }).remaining, 98);
  assert.equal(rl.decide({ key: 'ab', cost: 0 }).remaining, 98);
  assert.equal(rl.stats().keys, keys.length + 1);
});

test('keys over 256 bytes are refused, however they are encoded', async () => {
  const rl = await EdgeLimit.create({ wasm: wasmModule, config, clock: fakeClock() });
  for (const [key, bytes] of [['x'.repeat(257), 257], ['é'.repeat(129), 258], [`${'a'.repeat(255)}é`, 257], [`${'z'.repeat(253)}😀`, 257], ['😀'.repeat(1000), 4000]]) {
    assert.throws(() => rl.decide({ key }), (e) => e instanceof EdgeLimitError && e.code === 'bad_key' && e.message.includes(`got ${bytes}`), `${bytes} bytes`);
    assert.throws(() => rl.decide({ checks: [{ key: 'fine' }, { key }] }), (e) => e instanceof EdgeLimitError && e.code === 'bad_key' && e.message.includes(`got ${bytes}`));
  }
  assert.equal(rl.stats().decisions, 0, 'nothing was decided');
});

test('100,000 distinct keys each keep their own count (no key cache to outgrow)', async () => {
  const rl = await EdgeLimit.create({ wasm: wasmModule, config, clock: fakeClock() });
  const key = (i) => `key-${String(i).padStart(28, '0')}`;
  for (let i = 0; i < 100_000; i++) rl.decide({ key: key(i), cost: 1 + (i % 5) });
  for (const i of [0, 8191, 8192, 50_000, 99_999]) {
    assert.equal(rl.decide({ key: key(i), cost: 0 }).remaining, 100 - (1 + (i % 5)), `key ${i}`);
  }
});
