// rl.observe(): what the upstream answered, alone and across isolates
// through the real Go coordinator on loopback.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeLimit } from '../src/index.js';
import { wasmModule } from './helpers.js';
import { startCoordinator } from './coordinator.js';

const coords = [];
after(async () => { for (const c of coords) await c.stop(); });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const config = { limiters: [{ name: 'llm', algorithm: 'fixed_window', limit: 100, period: '1s', upstream: { circuit_failures: 2, circuit_open: '200ms' } }] };

test('a 429 with Retry-After pauses the key; bad header values are ignored with a reason', async () => {
  const rl = await EdgeLimit.create({ wasm: wasmModule, config });
  try {
    assert.equal(rl.decide({ limiter: 'llm', key: 'k' }).success, true);
    const o = rl.observe({ limiter: 'llm', key: 'k', response: new Response(null, { status: 429, headers: { 'Retry-After': '30', 'X-RateLimit-Reset': 'soon' } }) });
    assert.ok(o.pausedMs > 29000 && o.pausedMs <= 30000, JSON.stringify(o));
    assert.match(o.ignored, /x-ratelimit-reset/);
    const d = rl.decide({ limiter: 'llm', key: 'k' });
    assert.equal(d.success, false);
    assert.ok(d.retryAfterMs > 29000, JSON.stringify(d));
    assert.equal(rl.decide({ limiter: 'llm', key: 'other' }).success, true, 'the pause is per key');
    assert.throws(() => rl.observe({ limiter: 'llm', key: 'k', status: -1 }), /status/);
    assert.throws(() => rl.observe({ limiter: 'nope', key: 'k', status: 429 }), /unknown limiter/);
  } finally { rl.close(); }
});

test('failures open the circuit; alone, one probe passes after the open time', async () => {
  const rl = await EdgeLimit.create({ wasm: wasmModule, config });
  try {
    rl.observe({ limiter: 'llm', key: 'k', status: 502 });
    const o = rl.observe({ limiter: 'llm', key: 'k', status: 0 });
    assert.equal(o.circuit, 'open');
    assert.equal(rl.decide({ limiter: 'llm', key: 'k' }).success, false);
    await sleep(250);
    assert.equal(rl.decide({ limiter: 'llm', key: 'k' }).success, true, 'the probe');
    assert.equal(rl.decide({ limiter: 'llm', key: 'k' }).success, false, 'one probe at a time');
    assert.equal(rl.observe({ limiter: 'llm', key: 'k', status: 200 }).circuit, 'closed');
    assert.equal(rl.decide({ limiter: 'llm', key: 'k' }).success, true);
  } finally { rl.close(); }
});

test('one isolate hears 429: another learns it through the coordinator', async () => {
  const c = await startCoordinator(config);
  coords.push(c);
  const [a, b] = await Promise.all([0, 1].map(() => EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, syncInterval: 20 })));
  try {
    await a.limit({ limiter: 'llm', key: 'k' });
    await b.limit({ limiter: 'llm', key: 'k' });
    a.observe({ limiter: 'llm', key: 'k', status: 429, headers: [['retry-after', '30']] });
    assert.equal(await a.sync(), true, 'the pause reached the coordinator');
    // b has not synced since: its next decision may pass (it cannot know
    // yet); its next sync brings the pause, and from then on it denies.
    await b.limit({ limiter: 'llm', key: 'k' });
    assert.equal(await b.sync(), true);
    for (let i = 0; i < 5; i++) {
      const d = await b.limit({ limiter: 'llm', key: 'k' });
      assert.equal(d.success, false, `after its sync the other isolate admits: ${JSON.stringify(d)}`);
      assert.ok(d.retryAfterMs > 25000, JSON.stringify(d));
    }
  } finally { a.close(); b.close(); }
});
