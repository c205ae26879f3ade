// A coordinator that hangs (SIGSTOP, a black hole: no answer, no reset)
// costs the requests of its first second a wait for the sync in flight,
// and then none: each attempt is abandoned a second after it began, and
// requests decide at once by the fail policy. Before, an abandoned attempt
// left the isolate looking quiet (no attempt begun for twice
// probeInterval, measured from the hung attempt's start), every request
// after it started a probe of its own and waited for it: in real workerd
// with background 'requests', p50 about 600 ms and up to a second, every
// second, in every mode and policy.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeLimit } from '../src/index.js';
import { Scheduler, SLOW_ATTEMPT_MS } from '../src/scheduler.js';
import { startCoordinator } from './coordinator.js';
import { wasmModule, hangUntilAborted } from './helpers.js';

for (const mode of ['auto', 'approximate']) {
  test(`a hung coordinator: ${mode} requests decide at once past its first second, open admits`, async () => {
    const config = { limiters: [{ name: 'api', algorithm: 'fixed_window', limit: 100_000, period: '1h', mode, fail_policy: 'open' }] };
    const coord = await startCoordinator(config);
    let hung = false;
    const hangFetch = (url, init) => hung
      ? hangUntilAborted(init)
      : fetch(url, init);
    try {
      const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: coord.url, fetch: hangFetch, background: 'requests' });
      const key = `hung-${mode}-${Date.now()}`;
      const ctx = { waitUntil: (p) => p.catch(() => {}) };
      for (let i = 0; i < 5; i++) assert.ok((await rl.limit({ limiter: 'api', key }, ctx)).success);
      hung = true;
      const t0 = Date.now();
      const ps = [];
      for (let i = 0; i < 60; i++) { // 10 requests a second for 6 s
        const at = Date.now() - t0;
        ps.push(rl.limit({ limiter: 'api', key }, ctx).then((d) => ({ at, took: Date.now() - t0 - at, d })));
        await new Promise((r) => setTimeout(r, 100));
      }
      const rs = await Promise.all(ps);
      const denied = rs.filter((r) => !r.d.success);
      assert.deepEqual(denied.map((r) => `${r.at} ms: ${JSON.stringify(r.d)}`), [], 'open admits every request of a key with room');
      // Past the first second and a half (the attempt in flight at the
      // hang is abandoned a second after it began), no request waits.
      const slow = rs.filter((r) => r.at >= 1500 && r.took >= 500);
      assert.deepEqual(slow.map((r) => `at ${r.at} ms took ${r.took} ms`), [], 'requests waited for probes of their own');
      hung = false;
      await rl.close();
    } finally {
      await coord.stop();
    }
  });
}

test('Scheduler: an attempt failed is as recent a word as one begun; a second in flight is stale', () => {
  const s = new Scheduler({ interval: 100, jitter: 0 }, 0);
  s.begin(10);
  assert.equal(s.stale(10 + SLOW_ATTEMPT_MS - 1), false);
  assert.equal(s.stale(10 + SLOW_ATTEMPT_MS), true, 'in flight SLOW_ATTEMPT_MS exactly (workerd: the clock stands still between I/O)');
  s.failure(10 + SLOW_ATTEMPT_MS); // abandoned as hung
  assert.equal(s.quiet(10 + SLOW_ATTEMPT_MS + 999, 1000), false, 'quiet a second after the attempt began, though it failed just now');
  assert.equal(s.quiet(10 + SLOW_ATTEMPT_MS + 1000, 1000), true);
  s.begin(3000);
  assert.equal(s.quiet(9000, 1000), false, 'an attempt in flight');
});
