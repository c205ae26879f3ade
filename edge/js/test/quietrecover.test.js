// An isolate whose syncs failed and that then went quiet (a Worker with
// no requests, background 'requests': nothing probes between requests)
// decides its next limit() on a fresh view once the coordinator is back,
// not by the fail policy: the request probes the coordinator first and
// waits for its answer (EdgeLimit._refresh). Real coordinator on Pebble,
// killed (SIGKILL) and restarted on the same data.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import os from 'node:os';
import path from 'node:path';
import { mkdtempSync } from 'node:fs';
import { EdgeLimit } from '../src/index.js';
import { wasmModule } from './helpers.js';
import { startCoordinator, globalView } from './coordinator.js';

const coords = [];
after(async () => { for (const c of coords) await c.stop(); });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const config = { limiters: [
  // A strict key filled before the outage: open must not let it pass its limit after.
  { name: 'full', algorithm: 'fixed_window', limit: 10, period: '1h', mode: 'strict', fail_policy: 'open' },
  // A key far under its limit: closed must admit it after.
  { name: 'room', algorithm: 'fixed_window', limit: 1e9, period: '1h', fail_policy: 'closed' },
] };

for (const background of ['requests', 'timers']) {
  test(`${background}: quiet after a failed sync, the next requests are decided on a fresh view once the coordinator is back`, async () => {
    const args = ['--data', mkdtempSync(path.join(os.tmpdir(), 'edgelimit-pebble-'))];
    const c = await startCoordinator(config, args);
    coords.push(c);
    // Two isolates: a fills the strict key, b later asks on it.
    const opts = { wasm: wasmModule, config, coordinator: c.url, background, backoffMax: 60000 };
    const a = await EdgeLimit.create(opts);
    const b = await EdgeLimit.create(opts);
    try {
      for (let i = 0; i < 10; i++) assert.equal((await a.limit({ limiter: 'full', key: 'k' })).success, true, `a ${i}: ${a.lastError}`);
      assert.equal((await b.limit({ limiter: 'room', key: 'k' })).success, true, b.lastError);
      assert.equal(await a.sync(), true, a.lastError);
      await c.kill();
      // b fails a sync, then is quiet (no request) while the coordinator comes back.
      b.decide({ limiter: 'room', key: 'other' });
      assert.equal(await b.sync(), false, 'a sync to a dead coordinator fails');
      await sleep(600); // past staleAfter (300 ms)
      assert.equal(b.stats().stale, true);
      const back = await startCoordinator(config, args, c.port);
      coords.push(back);
      await sleep(1500); // quiet for longer than twice probeInterval (500 ms)
      const t0 = Date.now();
      const ds = await Promise.all([0, 1, 2].map(() => b.limit({ limiter: 'full', key: 'k' })));
      const waited = Date.now() - t0;
      for (const d of ds) assert.deepEqual([d.success, d.stale], [false, false], `a request on the full key after the quiet: ${JSON.stringify(d)} ${b.lastError}`);
      const r = await b.limit({ limiter: 'room', key: 'k' });
      assert.deepEqual([r.success, r.stale], [true, false], `closed, far under its limit: ${JSON.stringify(r)} ${b.lastError}`);
      console.log(`# ${background}: the first requests after the quiet waited ${waited} ms for the probe`);
      assert.equal(await a.close(), true, `a reports what it admitted: ${a.lastError}`);
      assert.equal((await globalView(back.url, 'full', 'k')).body.count, 10, 'the full key counts the 10 a admitted, no more');
    } finally { a.close(); b.close(); }
  });
}
