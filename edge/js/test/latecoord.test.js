// An isolate created while its coordinator is down, with its clock 30 s
// ahead of the coordinator's (past its 2 s skew) or 11 s behind it (its
// 10 s windows always others than the coordinator's), admits alone on
// approximate limiters. Against the real Go coordinator started later on
// the same port: no batch is cut before a coordinator answered, the
// module moves the cost decided before to the coordinator's window when
// told the step, and every unit admitted is counted in the coordinator's
// current window within 2 s of it coming up, with no batch refused.
// Before, behind, the units decided before were counted in a window gone,
// and ahead every batch was refused until a recall.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeLimit } from '../src/index.js';
import { wasmModule, earlyInWindow } from './helpers.js';
import { startCoordinator, globalView, freePort } from './coordinator.js';

const coords = [];
after(async () => { for (const c of coords) await c.stop(); });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const config = { limiters: [{ name: 'a', algorithm: 'fixed_window', limit: 1000, period: '10s', mode: 'approximate' }] };


for (const off of [30_000, -11_000]) {
  test(`coordinator down at the start, clock ${off > 0 ? '+' : ''}${off / 1000} s: every unit counted in its window`, async () => {
    const port = await freePort();
    await earlyInWindow();
    const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: `http://127.0.0.1:${port}`, syncInterval: 50,
      probeInterval: 100, clock: () => Date.now() + off });
    try {
      let admitted = 0;
      for (let i = 0; i < 5; i++) {
        if ((await rl.limit({ limiter: 'a', key: 'k' })).success) admitted++;
        await sleep(20);
      }
      assert.equal(admitted, 5, 'admitted alone while the coordinator is down');
      const c = await startCoordinator(config, [], port); coords.push(c);
      const errors = rl.counters.syncErrors;
      const end = Date.now() + 2000;
      let n = -1;
      while (Date.now() < end) {
        if ((await rl.limit({ limiter: 'a', key: 'k' })).success) admitted++;
        await sleep(50);
        n = (await globalView(c.url, 'a', 'k')).body.count;
        if (n === admitted) break;
      }
      console.log(`# clock ${off} ms, coordinator down at the start: ${n} of ${admitted} counted; sync errors after it came up ${rl.counters.syncErrors - errors}, recalls ${rl.counters.recalls}`);
      assert.equal(n, admitted, `the coordinator counts ${n} of ${admitted} 2 s after it came up (${rl.lastError?.message ?? 'no error'})`);
      assert.equal(rl.counters.recalls, 0, 'a batch was cut before the reading and refused');
    } finally { rl.close(); }
  });
}
