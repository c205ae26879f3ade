// An isolate whose clock is set 30 s forward while it runs, against the
// real Go coordinator on loopback: its next batch is cut on the clock
// ahead, past the coordinator's 2 s skew, and refused (400 clock_skew,
// nothing applied). The refusal carries the coordinator's time: the
// isolate steps back to it, the module takes the batch back (recall) and
// cuts it again at once, in the same attempt, which the coordinator
// applies. Every unit admitted is counted in the coordinator's window
// within a second, with no failed sync. Without the recall the batch was
// resent as cut and refused until the coordinator's clock caught up, 28 s
// later.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeLimit } from '../src/index.js';
import { wasmModule, earlyInWindow } from './helpers.js';
import { startCoordinator, globalView } from './coordinator.js';

const coords = [];
after(async () => { for (const c of coords) await c.stop(); });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const config = { limiters: [{ name: 'a', algorithm: 'fixed_window', limit: 1000, period: '10s', mode: 'approximate' }] };


test('a batch refused for its times is taken back and cut again at the coordinator\'s time', async () => {
  const c = await startCoordinator(config); coords.push(c);
  let jump = 0;
  await earlyInWindow();
  const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, syncInterval: 50, clock: () => Date.now() + jump });
  try {
    let admitted = 0;
    const decide = async (n) => {
      for (let i = 0; i < n; i++) {
        if ((await rl.limit({ limiter: 'a', key: 'k' })).success) admitted++;
        await sleep(10);
      }
    };
    const counted = async (what) => {
      const end = Date.now() + 1000;
      let n = -1;
      while (Date.now() < end) {
        n = (await globalView(c.url, 'a', 'k')).body.count;
        if (n === admitted) return;
        await sleep(20);
      }
      assert.fail(`${what}: the coordinator counts ${n} of ${admitted} admitted after 1 s (recalls ${rl.counters.recalls}, sync errors ${rl.counters.syncErrors}, ${rl.lastError?.message ?? 'no error'})`);
    };
    await decide(5);
    await counted('before the jump');
    const errors = rl.counters.syncErrors;
    jump = 30_000;
    await decide(5);
    await counted('after the clock jumped 30 s forward');
    console.log(`# clock set 30 s forward: ${admitted} admitted and counted; recalls ${rl.counters.recalls}, clock steps ${rl.counters.clockSteps}, sync errors ${rl.counters.syncErrors - errors}`);
    assert.ok(rl.counters.recalls >= 1, 'no batch was taken back');
    assert.equal(rl.counters.syncErrors, errors, `failed syncs after the jump: ${rl.lastError?.message}`);
  } finally { rl.close(); }
});
