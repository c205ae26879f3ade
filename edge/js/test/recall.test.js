// An isolate whose clock is set 30 s forward while it runs, against the
// real Go coordinator on loopback: its next batch is cut on the clock
// ahead, past the coordinator's 2 s skew, and refused (400 clock_skew,
// nothing applied). The refusal carries the coordinator's time: the
// isolate steps back to it, the module takes the batch back (recall) and
// cuts it again at once, in the same attempt, which the coordinator
// applies. Every unit admitted is counted in the coordinator's window
// within a second (or, on a strict key, held in the isolate's lease), with
// no failed sync. Without the recall the batch was
// resent as cut and refused until the coordinator's clock caught up, 28 s
// later.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeLimit } from '../src/index.js';
import { wasmModule, earlyInWindow, scriptedFetch, problem, hourConfig } from './helpers.js';
import { startCoordinator, globalView } from './coordinator.js';

const coords = [];
after(async () => { for (const c of coords) await c.stop(); });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const config = { limiters: [
  { name: 'a', algorithm: 'fixed_window', limit: 1000, period: '10s', mode: 'approximate' },
  { name: 's', algorithm: 'fixed_window', limit: 1000, period: '10s', mode: 'strict', fail_policy: 'open' }] };

// On the strict key, the requests after the jump are held for a lease of
// the new window, several at once, and the batch in flight is amended
// with their asks: the amendments are refused for their times too, and
// the batch is taken back all the same once every amendment of it was
// (before, an amended batch was never taken back: resent as cut, it was
// refused until the coordinator's clock caught up). A strict key's units
// admitted under a lease are reported lazily: the coordinator has them in
// its count or in the isolate's lease.
for (const limiter of ['a', 's']) {
  test(`a batch refused for its times is taken back and cut again at the coordinator's time (${limiter})`, async () => {
    const c = await startCoordinator(config); coords.push(c);
    let jump = 0;
    await earlyInWindow();
    const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, syncInterval: 50, clock: () => Date.now() + jump });
    try {
      let admitted = 0;
      const decide = async (n, together) => {
        for (let i = 0; i < n; i++) {
          const ds = await Promise.all(Array.from({ length: together }, () => rl.limit({ limiter, key: 'k' })));
          admitted += ds.filter((d) => d.success).length;
          await sleep(10);
        }
      };
      const counted = async (what) => {
        const end = Date.now() + 1000;
        let v = null;
        while (Date.now() < end) {
          v = (await globalView(c.url, limiter, 'k')).body;
          if (v.count <= admitted && admitted <= v.count + v.lease_sum) return;
          await sleep(20);
        }
        assert.fail(`${what}: the coordinator counts ${v.count} and holds ${v.lease_sum} in leases of ${admitted} admitted after 1 s (recalls ${rl.counters.recalls}, amendments ${rl.counters.amendments}, sync errors ${rl.counters.syncErrors}, ${rl.lastError?.message ?? 'no error'})`);
      };
      await decide(5, 1);
      await counted('before the jump');
      const errors = rl.counters.syncErrors;
      const amendments = rl.counters.amendments;
      jump = 30_000;
      await decide(5, 4);
      await counted('after the clock jumped 30 s forward');
      console.log(`# ${limiter}: clock set 30 s forward: ${admitted} admitted and counted; recalls ${rl.counters.recalls}, amendments ${rl.counters.amendments - amendments}, clock steps ${rl.counters.clockSteps}, sync errors ${rl.counters.syncErrors - errors}`);
      assert.ok(rl.counters.recalls >= 1, 'no batch was taken back');
      if (limiter === 's') assert.ok(rl.counters.amendments > amendments, 'no batch was amended after the jump: the test misses its case');
      assert.equal(rl.counters.syncErrors, errors, `failed syncs after the jump: ${rl.lastError?.message}`);
    } finally { rl.close(); }
  });
}


// An amendment sent during a failed first attempt of an amended batch is
// still on its way when the batch's resend is refused for its times; it
// is then applied. The package waits for the amendments of the batch's
// cut, whatever attempt sent them, before it takes a batch back: this one
// was applied, so it takes nothing back, and every unit is counted once.
// A first version counted the amendments of the attempt refused only: it
// took the batch back, the amendment's reply acknowledged the batch cut
// again, and 3 of 8 units were never counted.
test('an amendment of an earlier attempt, on its way when the resend is refused for its times, is waited for', async () => {
  const c = await startCoordinator(hourConfig); coords.push(c);
  const posts = [];
  const fetchFn = scriptedFetch(posts, async (n) => {
    if (n === 0) { await sleep(150); return problem(503, 'about:blank'); } // attempt 1's batch: fails
    if (n === 1) await sleep(400); // attempt 1's amendment: slow on its way, then applied
    if (n === 2) { await sleep(20); return problem(400, 'urn:edgelimit:problem:clock_skew'); } // attempt 2 (the amended batch resent): refused for its times
    if (n === 3) await sleep(800); // the batch cut again: after the amendment
    return undefined;
  });
  const rl = await EdgeLimit.create({ wasm: wasmModule, config: hourConfig, coordinator: c.url, syncInterval: 60000, fetch: fetchFn });
  try {
    let admitted = 0;
    for (let i = 0; i < 5; i++) if ((await rl.limit({ limiter: 'a', key: 'k' })).success) admitted++;
    const held = rl.limit({ limiter: 's', key: 'x' }); // held: cuts batch 1
    while (posts.length < 1) await sleep(5);
    const held2 = rl.limit({ limiter: 's', key: 'y' }); // held while batch 1 is in flight: amends it
    while (posts.length < 2) await sleep(5);
    while (rl._inflight) await sleep(5); // attempt 1 failed (503)
    for (let i = 0; i < 3; i++) if ((await rl.limit({ limiter: 'a', key: 'k' })).success) admitted++; // since the cut: the batch cut again carries them
    const p = rl._sync(); // attempt 2: the same cut
    while (posts.length < 3) await sleep(5);
    await sleep(100);
    console.log(`# recalls ${rl.counters.recalls} while the amendment of attempt 1 is on its way (posts ${JSON.stringify(posts)})`);
    await p;
    await Promise.allSettled([held, held2]);
    for (let i = 0; i < 20 && posts.length < 6; i++) { await rl._sync(); await sleep(100); }
    const v = (await globalView(c.url, 'a', 'k')).body;
    console.log(`# admitted ${admitted}, coordinator counts ${v.count}; recalls ${rl.counters.recalls}, reincarnations ${rl.counters.reincarnations}, sync errors ${rl.counters.syncErrors}, ${rl.lastError?.message}`);
    assert.equal(v.count, admitted, `the coordinator counts ${v.count} of ${admitted} admitted`);
  } finally { await rl.close(); }
});
