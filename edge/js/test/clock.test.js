// An isolate whose clock is off by seconds runs on the coordinator's time
// (the Edgelimit-Time header of its answers), against the real Go
// coordinator on loopback: under-limit traffic is admitted and its
// answers name the coordinator's window; two isolates, one skewed, never
// admit more than a strict key's limit in a window.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeLimit } from '../src/index.js';
import { wasmModule, offBoundary } from './helpers.js';
import { startCoordinator } from './coordinator.js';

const coords = [];
after(async () => { for (const c of coords) await c.stop(); });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Each limiter in turn decides one request on strict key every 30 ms for
// ms; returns, per second of the real clock and per window the answers
// name (their reset), how many each admitted.
async function admitted(limiters, key, ms, ctx) {
  const perSecond = new Map(); const perWindow = new Map();
  const count = (m, k, i) => { const n = m.get(k) ?? limiters.map(() => 0); n[i]++; m.set(k, n); };
  for (const end = Date.now() + ms; Date.now() < end;) {
    for (const [i, rl] of limiters.entries()) {
      const d = await rl.limit({ limiter: 's', key }, ctx);
      if (d.success) {
        count(perSecond, Math.floor(Date.now() / 1000), i);
        count(perWindow, d.reset, i);
      }
    }
    await sleep(30);
  }
  return { perSecond, perWindow };
}

// What a strict key of limit 10 promises two isolates: never more than 10
// in a window the answers name. Counted by the real second in which
// limit() returned, an isolate's admission may fall on either side of a
// second's edge (its clock is off by up to the offset tolerance plus its
// drift since the last reading, and the time is read after the answer),
// so each isolate may add one there.
function assertWithinLimit({ perSecond, perWindow }, what) {
  for (const [w, n] of perWindow) assert.ok(n[0] + n[1] <= 10, `${what}: window ending ${w}: ${n} admitted, over the limit of 10`);
  for (const [s, n] of perSecond) assert.ok(n[0] + n[1] <= 12, `${what}: second ${s}: ${n} admitted, over the limit of 10 and one per isolate at the second's edge`);
}

const config = { limiters: [{ name: 's', algorithm: 'fixed_window', limit: 10, period: '1s', mode: 'strict', fail_policy: 'closed' }] };

// Before this, on its own clock: 3 s ahead every batch was refused
// (clock_skew) and 0 of 12 admitted; 1.5 s and 3 s behind every request
// waited for a lease of a window it never reached, 0 of 12.
for (const off of [3000, 1500, -1500, -3000]) {
  test(`background requests, clock ${off > 0 ? '+' : ''}${off} ms: runs on the coordinator's time`, async () => {
    const c = await startCoordinator(config); coords.push(c);
    const ctx = { waitUntil() {} };
    const skewed = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, background: 'requests',
      clock: () => Date.now() + off });
    const honest = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, background: 'requests' });
    try {
      let alone = 0; let wrongWindow = 0;
      for (let i = 0; i < 12; i++) {
        await offBoundary();
        const d = await skewed.limit({ limiter: 's', key: 'alone' }, ctx);
        const now = Date.now();
        if (d.success) alone++;
        if (d.success && now % 1000 > 100 && now % 1000 < 900 && d.reset !== Math.floor(now / 1000) * 1000 + 1000) wrongWindow++;
        await sleep(250);
      }
      const got = await admitted([honest, skewed], 'shared', 3000, ctx);
      console.log(`# clock ${off} ms: alone ${alone} of 12 admitted (${wrongWindow} naming another window); [honest, skewed] per second ${JSON.stringify([...got.perSecond.values()])}, per window ${JSON.stringify([...got.perWindow.values()])}; lastError ${skewed.lastError?.message ?? 'none'}`);
      assert.ok(alone >= 11, `clock ${off} ms: the skewed isolate alone admitted ${alone} of 12 at a quarter of the limit`);
      assert.equal(wrongWindow, 0, `clock ${off} ms: answers naming another window than the coordinator's`);
      assertWithinLimit(got, `clock ${off} ms`);
    } finally { skewed.close(); honest.close(); }
  });
}

// Requests that come together to an isolate that has not read the
// coordinator's time yet all wait for its one reading: none is decided on
// the isolate's own clock.
test('concurrent first requests on an isolate 3 s ahead all run on the coordinator\'s time', async () => {
  const c = await startCoordinator(config); coords.push(c);
  const ctx = { waitUntil() {} };
  const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, background: 'requests', clock: () => Date.now() + 3000 });
  try {
    await offBoundary();
    const ds = await Promise.all(Array.from({ length: 4 }, () => rl.limit({ limiter: 's', key: 'together' }, ctx)));
    const end = Math.floor(Date.now() / 1000) * 1000 + 1000;
    console.log(`# 4 concurrent first requests, clock +3 s: ${ds.filter((d) => d.success).length} admitted, resets ${ds.map((d) => d.reset - end).join(', ')} ms from the coordinator's window end`);
    assert.deepEqual(ds.map((d) => [d.success, d.reset]), ds.map(() => [true, end]), JSON.stringify(ds));
  } finally { rl.close(); }
});

// Two isolates whose clocks drift 5% fast and 5% slow (200 ms in the 4 s of
// the test), syncing only during requests: the readings the sync answers
// carry pull each back (several clock steps), and together they never
// admit more than the strict key's limit in a second.
test('background requests, clocks drifting 5% fast and slow: the readings pull them back', async () => {
  const c = await startCoordinator(config); coords.push(c);
  const ctx = { waitUntil() {} };
  const t0 = Date.now();
  const drift = (rate) => () => t0 + (Date.now() - t0) * rate;
  const fast = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, background: 'requests', clock: drift(1.05) });
  const slow = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, background: 'requests', clock: drift(0.95) });
  try {
    const got = await admitted([fast, slow], 'drift', 4000, ctx);
    const total = [...got.perWindow.values()].reduce((a, n) => a + n[0] + n[1], 0);
    console.log(`# drift 5%: [fast, slow] per second ${JSON.stringify([...got.perSecond.values()])}, per window ${JSON.stringify([...got.perWindow.values()])}; clock steps ${fast.counters.clockSteps}, ${slow.counters.clockSteps}; sync errors ${fast.counters.syncErrors}, ${slow.counters.syncErrors}`);
    assert.ok(fast.counters.clockSteps >= 3 && slow.counters.clockSteps >= 3, `clock steps ${fast.counters.clockSteps}, ${slow.counters.clockSteps}: the drift was not followed`);
    assert.ok(total >= 30, `${total} admitted in 4 s of a 10/s key at 6x the limit`);
    assertWithinLimit(got, 'drift 5%');
  } finally { fast.close(); slow.close(); }
});

// An isolate whose clock is 25 h behind (a dead real-time clock, a
// restored snapshot) is put right by its second reading, which agrees with
// the first: its syncs then pass and its answers name the coordinator's
// window. Before, a reading past 24 h was ignored, and every batch was
// refused (clock_skew) for good.
test('an isolate a day and more off is put right by two readings that agree', async () => {
  const c = await startCoordinator(config); coords.push(c);
  const ctx = { waitUntil() {} };
  const off = -25 * 3600 * 1000;
  const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, background: 'requests', clock: () => Date.now() + off });
  try {
    let d;
    for (let i = 0; i < 6; i++) {
      d = await rl.limit({ limiter: 's', key: 'far' }, ctx);
      await rl.sync();
      await sleep(50);
    }
    await offBoundary();
    d = await rl.limit({ limiter: 's', key: 'far' }, ctx);
    const end = Math.floor(Date.now() / 1000) * 1000 + 1000;
    console.log(`# clock -25 h: clock steps ${rl.counters.clockSteps}, sync errors ${rl.counters.syncErrors}, last: ${JSON.stringify({ success: d.success, reset: d.reset - end })}`);
    assert.ok(rl.counters.clockSteps >= 1, 'the offset never moved');
    assert.equal(d.success, true, JSON.stringify(d));
    assert.equal(d.reset, end, 'the answer names another window than the coordinator\'s');
  } finally { rl.close(); }
});
