import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeLimit, EdgeLimitError } from '../src/index.js';
import { wasmModule } from './helpers.js';

const config = { limiters: [{ name: 'w', algorithm: 'fixed_window', limit: 2, period: '200ms' }] };
const startOfWindow = (ms) => new Promise((r) => setTimeout(r, ms - (Date.now() % ms) + 5));

test('wait() sleeps until the next window instead of failing', async () => {
  const rl = await EdgeLimit.create({ wasm: wasmModule, config });
  await startOfWindow(200);
  assert.equal((await rl.limit({ limiter: 'w', key: 'k' })).success, true);
  assert.equal((await rl.limit({ limiter: 'w', key: 'k' })).success, true);
  const denied = await rl.limit({ limiter: 'w', key: 'k' });
  assert.equal(denied.success, false);
  const d = await rl.wait({ limiter: 'w', key: 'k', maxWaitMs: 1000 });
  assert.equal(d.success, true);
  assert.ok(Date.now() >= denied.reset, 'admitted once the denied window ended');
  assert.ok(d.waitedMs > 0);
});

test('wait() answers at once when no slot comes within maxWaitMs, or the cost can never pass', async () => {
  const rl = await EdgeLimit.create({ wasm: wasmModule, config: { limiters: [{ name: 'h', algorithm: 'fixed_window', limit: 1, period: '720h' }] } });
  await rl.limit({ limiter: 'h', key: 'k' });
  const d = await rl.wait({ limiter: 'h', key: 'k', maxWaitMs: 5000 });
  assert.equal(d.success, false);
  assert.ok(d.waitedMs < 1000, `answered without sleeping towards maxWaitMs (waited ${d.waitedMs} ms)`);
  assert.ok(d.retryAfterMs > 5000);
  const never = await rl.wait({ limiter: 'h', key: 'k', cost: 2, maxWaitMs: 5000 });
  assert.deepEqual([never.success, never.retryAfterMs], [false, -1]);
  assert.ok(never.waitedMs < 1000, `waited ${never.waitedMs} ms`);
});

test('schedule() runs fn once a slot is free, or rejects with rate_limited', async () => {
  const rl = await EdgeLimit.create({ wasm: wasmModule, config });
  await startOfWindow(200);
  const runs = [];
  const results = await Promise.all([1, 2, 3].map((i) => rl.schedule({ limiter: 'w', key: 's', maxWaitMs: 1000 }, () => { runs.push(i); return i * 10; })));
  assert.deepEqual(results, [10, 20, 30]);
  assert.equal(runs.length, 3);
  const h = await EdgeLimit.create({ wasm: wasmModule, config: { limiters: [{ name: 'h', algorithm: 'fixed_window', limit: 1, period: '720h' }] } });
  await h.limit({ limiter: 'h', key: 'k' });
  let ran = false;
  await assert.rejects(h.schedule({ limiter: 'h', key: 'k', maxWaitMs: 20 }, () => { ran = true; }),
    (e) => e instanceof EdgeLimitError && e.code === 'rate_limited' && e.result.success === false);
  assert.equal(ran, false);
});

test('wait() stops when its signal aborts', async () => {
  const rl = await EdgeLimit.create({ wasm: wasmModule, config: { limiters: [{ name: 'm', algorithm: 'fixed_window', limit: 1, period: '1s' }] } });
  await startOfWindow(1000);
  await rl.limit({ limiter: 'm', key: 'k' });
  const ac = new AbortController();
  setTimeout(() => ac.abort(new Error('client went away')), 30);
  await assert.rejects(rl.wait({ limiter: 'm', key: 'k', maxWaitMs: 9000, signal: ac.signal }), /client went away/);
});
