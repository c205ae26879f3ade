// Isolates with background 'requests' (syncs only during requests, as in
// Workers) that go idle for longer than a window and then get traffic,
// against the real Go coordinator on loopback: what they denied before the
// idle spell must not be asked for again after it. (The module reports a
// denied request's cost as demand with its next batch; with syncs only on
// requests that batch left with the first request after the idle spell,
// and the coordinator leased the first isolates to ask for requests
// answered 429 seconds before, so the others were denied under the limit.)
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeLimit } from '../src/index.js';
import { wasmModule, offBoundary } from './helpers.js';
import { startCoordinator } from './coordinator.js';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const coords = [];
after(async () => { for (const c of coords) await c.stop(); });
const config = { limiters: [
  { name: 'gc', algorithm: 'gcra', limit: 6, period: '1s' },
  { name: 'tb', algorithm: 'token_bucket', limit: 6, period: '1s' },
  { name: 'fw', algorithm: 'fixed_window', limit: 6, period: '1s' },
  { name: 'min', algorithm: 'fixed_window', limit: 4, period: '1m' },
] };

async function fleet(c, n) {
  const rls = [];
  for (let i = 0; i < n; i++) rls.push(await EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, background: 'requests' }));
  return rls;
}
const ctx = { waitUntil() {} };

test('requests: 4 isolates fill a 6/s key (gcra, token bucket, fixed window), idle 2.5 s, then each admits its first request', async () => {
  const c = await startCoordinator(config); coords.push(c);
  const rls = await fleet(c, 4);
  const bad = [];
  try {
    for (const lim of ['gc', 'tb', 'fw', 'gc', 'tb', 'fw']) {
      await offBoundary();
      // 20 requests over 4 isolates on a 6/s key: full, every isolate denied some.
      await Promise.all(rls.map(async (rl) => { for (let i = 0; i < 5; i++) await rl.limit({ limiter: lim, key: 'k' }, ctx); }));
      await sleep(2500);
      await offBoundary();
      const first = await Promise.all(rls.map((rl) => rl.limit({ limiter: lim, key: 'k' }, ctx)));
      const n = first.filter((d) => d.success).length;
      if (n < 4) bad.push(`${lim}: ${n} of 4`);
    }
    console.log(`# filled, idle 2.5 s: ${bad.length} of 6 rounds with a first request denied (${bad.join('; ')})`);
    assert.deepEqual(bad, []);
  } finally { for (const rl of rls) rl.close(); }
});

// The isolates that only denied the key hold no cost from before the
// reset: each admits its first request after it. (The one that filled it
// may report cost it admitted before the reset, under a lease the reset
// cleared, after it: that cost counts in the key's window.)
test('requests: a 4/minute key filled by one isolate and denied by 3 others, idle 2.5 s, reset: the 3 admit their first request', async () => {
  const c = await startCoordinator(config); coords.push(c);
  const rls = await fleet(c, 4);
  try {
    let admitted = 0;
    for (let i = 0; i < 6; i++) if ((await rls[0].limit({ limiter: 'min', key: 'k' }, ctx)).success) admitted++;
    assert.equal(admitted, 4);
    for (const rl of rls.slice(1)) for (let i = 0; i < 2; i++) assert.equal((await rl.limit({ limiter: 'min', key: 'k' }, ctx)).success, false);
    await sleep(2500);
    assert.equal((await fetch(`${c.url}/v1/limiters/min/keys/k`, { method: 'DELETE' })).status, 204);
    const first = [];
    for (const rl of rls.slice(1)) first.push(await rl.limit({ limiter: 'min', key: 'k' }, ctx));
    console.log(`# reset after 2.5 s idle: ${first.filter((d) => d.success).length} of 3 isolates that had denied admit their first request`);
    assert.deepEqual(first.map((d) => d.success), [true, true, true], JSON.stringify(first));
  } finally { for (const rl of rls) rl.close(); }
});
