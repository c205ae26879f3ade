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
import { EdgeLimit, preferredIndex } from '../src/index.js';
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

// load sends limit() of the limiters in turn from 4 clients every 10 ms
// for ms and returns every answer: {at, took (ms), d}.
async function load(rl, limiters, ms, ctx) {
  const t0 = Date.now();
  const rs = [];
  await Promise.all([0, 1, 2, 3].map(async (c) => {
    for (let i = 0; Date.now() - t0 < ms; i++) {
      const at = Date.now() - t0;
      const d = await rl.limit({ limiter: limiters[(c + i) % limiters.length], key: `k${c % 2}` }, ctx);
      rs.push({ at, took: Date.now() - t0 - at, d });
      await new Promise((r) => setTimeout(r, 10));
    }
  }));
  return rs;
}

// A coordinator that hangs from the isolate's start, or one that refused
// the first reading of its time and hangs from then on (a coordinator
// that was restarting and came back stopped, or the first of two listed
// down and the second hung): past the first two seconds, auto and strict
// keys under open admit every request at once. Before, after a refused
// first reading, the attempt read the time again (_readAny) before its
// first batch, for the whole syncTimeout (5 s): no attempt was in flight
// for the scheduler, so nothing was stale and no request could abandon
// it; every request on those keys was denied after waiting its retryWait
// (1 s), open or not.
for (const background of ['requests', 'timers']) {
  for (const start of ['hung from the start', 'refused, then hung']) {
    test(`${background}: a coordinator ${start}: auto and strict keys under open admit at once past 2 s`, { timeout: 20000 }, async () => {
      const config = { limiters: [
        { name: 'auto', algorithm: 'fixed_window', limit: 100_000, period: '1h', mode: 'auto', fail_policy: 'open' },
        { name: 'strict', algorithm: 'fixed_window', limit: 100_000, period: '1h', mode: 'strict', fail_policy: 'open' }] };
      let gets = 0;
      const blackHole = (url, init) => (start !== 'hung from the start' && !init?.body && gets++ === 0
        ? Promise.reject(new TypeError('fetch failed: connect ECONNREFUSED'))
        : hangUntilAborted(init));
      const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: 'http://127.0.0.1:9', fetch: blackHole, background });
      const ctx = { waitUntil: (p) => p?.catch?.(() => {}) };
      try {
        const rs = await load(rl, ['auto', 'strict'], 4000, ctx);
        const late = rs.filter((r) => r.at >= 2000);
        const bad = late.filter((r) => r.took >= 500 || !r.d.success);
        console.log(`# ${background}, ${start}, seconds 2-4: ${late.length} decisions, ${bad.length} waited 500 ms or more or were denied`);
        assert.ok(late.length > 100, `${late.length} decisions in seconds 2-4`);
        assert.deepEqual(bad.slice(0, 5).map((r) => `at ${r.at} ms took ${r.took} ms: ${r.d.limiter} success ${r.d.success} stale ${r.d.stale}`), [],
          `${bad.length} of ${late.length} decisions in seconds 2-4 waited or were denied; want none (open)`);
      } finally { rl._closed = true; rl.close(); }
    });
  }
}

// Two coordinators, the isolate's own hangs while an amendment of its
// batch is on its way (a strict key's request held for a lease): a
// request on the stale view abandons the batch's POST a second after it
// began, and the batch goes to the second coordinator, which answers:
// decisions are fresh again within about a second. Before, the amendment's
// POST took the batch's place as the one to abandon: the batch's POST ran
// out the sync timeout (5 s) and every decision until then was the fail
// policy's.
for (const background of ['requests', 'timers']) {
  test(`${background}: a hung coordinator with an amendment in flight: the isolate moves to the next within about a second`, { timeout: 30000 }, async () => {
    const config = { limiters: [
      { name: 's', algorithm: 'fixed_window', limit: 200, period: '1s', mode: 'strict', fail_policy: 'closed' },
      { name: 'a', algorithm: 'fixed_window', limit: 200, period: '1s', mode: 'auto', fail_policy: 'closed' }] };
    const coord = await startCoordinator(config);
    const port = new URL(coord.url).port;
    // Two URLs of one coordinator (one store, as coordinators sharing
    // Redis); the first, the isolate's own, hangs from the fetch below.
    const urls = [`http://127.0.0.1:${port}`, `http://localhost:${port}`];
    const isolateId = Array.from({ length: 64 }, (_, i) => `hung-amend-${background}-${i}`).find((id) => preferredIndex(id, 2) === 0);
    let hung = false;
    const f = (url, init) => (hung && url.startsWith(urls[0]) ? hangUntilAborted(init) : fetch(url, init));
    const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: urls, fetch: f, background, isolateId });
    const ctx = { waitUntil: (p) => p?.catch?.(() => {}) };
    try {
      for (let i = 0; i < 3; i++) assert.ok((await rl.limit({ limiter: 's', key: 'warm' }, ctx)).success);
      const amendments = rl.counters.amendments;
      hung = true;
      const rs = await load(rl, ['s', 'a'], 4000, ctx);
      const late = rs.filter((r) => r.at >= 2000);
      const stale = late.filter((r) => r.d.stale);
      console.log(`# ${background}: ${rl.counters.amendments - amendments} amendments, ${rl.counters.failovers} failovers; seconds 2-4: ${stale.length} of ${late.length} decisions on a stale view`);
      assert.ok(rl.counters.amendments > amendments, 'no amendment was sent: the test tests nothing');
      assert.equal(rl._coordinator, urls[1], 'on the second coordinator');
      assert.equal(stale.length, 0, `${stale.length} of ${late.length} decisions in seconds 2-4 on a stale view: the batch's POST to the hung coordinator was not abandoned`);
    } finally {
      hung = false;
      await rl.close();
      await coord.stop();
    }
  });
}
