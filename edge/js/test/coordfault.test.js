// The coordinator (Pebble on disk, a real process) killed with SIGKILL and
// restarted on the same directory, then hung with SIGSTOP for 5 s and
// resumed, while 2 isolates of the package serve 20/s strict and auto keys
// (fail policy closed) at 3x their limit, an hourly key with open and one
// with the default policy: no window over 20, open admits and closed denies
// while it hangs, every isolate admits fresh again soon after each return,
// and the coordinator counts what the isolates admitted of the hourly keys
// once they close.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EdgeLimit } from '../src/index.js';
import { SLOW_ATTEMPT_MS } from '../src/scheduler.js';
import { wasmModule } from './helpers.js';
import { startCoordinator, globalView } from './coordinator.js';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const coords = [];
after(async () => { for (const c of coords) await c.stop(); });
const HOUR = { algorithm: 'fixed_window', limit: 1e9, period: '1h' };
const config = { limiters: [
  { name: 's', algorithm: 'fixed_window', limit: 20, period: '1s', mode: 'strict', fail_policy: 'closed' },
  { name: 'a', algorithm: 'fixed_window', limit: 20, period: '1s', fail_policy: 'closed' },
  { name: 'o', ...HOUR, fail_policy: 'open' },
  { name: 'h', ...HOUR, mode: 'strict' },
] };

for (const background of ['requests', 'timers']) {
  test(`${background}: coordinator SIGKILLed and restarted on its directory, then SIGSTOPped 5 s and SIGCONTed, under 3x load`, { timeout: 90000 }, async () => {
    const args = ['--data', mkdtempSync(path.join(os.tmpdir(), 'edgelimit-pebble-'))];
    let c = await startCoordinator(config, args); coords.push(c);
    const ctx = { waitUntil() {} };
    const rls = [];
    for (let i = 0; i < 2; i++) rls.push(await EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, background }));
    const answers = [];
    let stop = false;
    const t0 = Date.now();
    const load = rls.flatMap((rl, i) => ['s', 'a', 'o', 'h'].map(async (lim) => {
      while (!stop) {
        const d = await rl.limit({ limiter: lim, key: 'k' }, ctx);
        answers.push({ lim, isolate: i, at: Date.now(), ok: d.success, stale: d.stale, window: Math.floor(d.reset / 1000) - 1 });
        await sleep(30);
      }
    }));
    await sleep(2000);
    await c.kill();
    await sleep(1000);
    c = await startCoordinator(config, args, c.port); coords.push(c);
    const restarted = Date.now();
    await sleep(3000);
    process.kill(c.pid, 'SIGSTOP');
    const hung = Date.now();
    await sleep(5000);
    process.kill(c.pid, 'SIGCONT');
    const resumed = Date.now();
    await sleep(3000);
    stop = true;
    await Promise.all(load);

    for (const lim of ['s', 'a']) {
      const per = new Map();
      for (const x of answers) if (x.lim === lim && x.ok) per.set(x.window, (per.get(x.window) ?? 0) + 1);
      console.log(`# ${background} ${lim} (20/s, closed): admitted per window ${[...per.values()].join(' ')}`);
      for (const [w, n] of per) assert.ok(n <= 20, `${lim}: window ${w} admitted ${n}, over 20`);
      for (const [what, from] of [['restart', restarted], ['SIGCONT', resumed]]) {
        const first = rls.map((_, i) => answers.find((x) => x.lim === lim && x.isolate === i && x.at > from && x.ok && !x.stale));
        const ms = first.map((x) => (x ? x.at - from : -1));
        console.log(`# ${background} ${lim}: first fresh admission per isolate after the ${what}: ${ms.join(', ')} ms`);
        for (const m of ms) assert.ok(m >= 0 && m <= 1500, `${lim}: admitted fresh ${m} ms after the ${what}, want within 1.5 s (-1: never)`);
      }
    }
    for (const lim of ['o', 'h', 's', 'a']) { // h: the default policy, open
      // From SLOW_ATTEMPT_MS (an attempt in flight that long counts as
      // failing: the view is stale) and half a second on.
      const during = answers.filter((x) => x.lim === lim && x.at > hung + SLOW_ATTEMPT_MS + 500 && x.at < resumed);
      const ok = during.filter((x) => x.ok).length;
      console.log(`# ${background} ${lim} while hung: ${ok} of ${during.length} admitted`);
      assert.ok(during.length > 0);
      assert.equal(ok, lim === 'o' || lim === 'h' ? during.length : 0, `${lim} while the coordinator hung`);
    }
    assert.deepEqual(await Promise.all(rls.map((rl) => rl.close())), [true, true], 'the last batches reached the coordinator');
    for (const lim of ['o', 'h']) {
      const admitted = answers.filter((x) => x.lim === lim && x.ok).length;
      const { body } = await globalView(c.url, lim, 'k');
      console.log(`# ${background} ${lim}: ${admitted} admitted, ${body.count} counted`);
      assert.equal(body.count, admitted, `${lim}: the coordinator's count`);
    }
    console.log(`# ${background}: ${Date.now() - t0} ms`);
  });
}
