// Faults at random for the package: 4 isolates serve a strict and an auto
// key family (3 keys, 20 per 1 s window, fail policy closed) at about
// twice the limit, while, one fault every 0.3-1.2 s, an isolate is dropped
// without close() (a Worker evicted: what it holds is never reported;
// background 'requests' only) or closed and replaced by a new one, and the coordinator (Pebble on disk, a
// real process) is killed with SIGKILL and restarted on its directory or
// frozen with SIGSTOP for 0.2-1.5 s. No key-window may admit more than its
// limit (every admission names its window: reset is the window's end),
// and once the faults end the isolates serve their windows again. Both
// background modes: 'requests' (Cloudflare Workers) and 'timers'.
// EDGELIMIT_CHAOS_SEED replays a schedule (default: the time, printed);
// EDGELIMIT_CHAOS_MS sets the faulty span (default 10000).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EdgeLimit } from '../src/index.js';
import { wasmModule } from './helpers.js';
import { startCoordinator, waitUp } from './coordinator.js';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const coords = [];
after(async () => { for (const c of coords) await c.stop(); });
const LIMIT = 20;
const config = { limiters: [
  { name: 's', algorithm: 'fixed_window', limit: LIMIT, period: '1s', mode: 'strict', fail_policy: 'closed' },
  { name: 'a', algorithm: 'fixed_window', limit: LIMIT, period: '1s', fail_policy: 'closed' },
] };

// A small seeded generator (mulberry32), so that a schedule replays.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const seed = Number(process.env.EDGELIMIT_CHAOS_SEED ?? Date.now() % 1e9);
const span = Number(process.env.EDGELIMIT_CHAOS_MS ?? 10000); // the faulty span, ms

for (const background of ['requests', 'timers']) {
  test(`${background}: isolates dropped or closed and replaced, the coordinator killed or frozen, at random: no window over its limit, and served again after`, { timeout: 90000 + span }, async () => {
    const rand = rng(seed + (background === 'timers' ? 1 : 0));
    console.log(`# ${background}: fault schedule seed ${seed} (EDGELIMIT_CHAOS_SEED=${seed} replays it)`);
    const args = ['--data', mkdtempSync(path.join(os.tmpdir(), 'edgelimit-pebble-'))];
    let c = await startCoordinator(config, args); coords.push(c);
    const ctx = { waitUntil() {} };
    const make = () => EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, background });
    const rls = [];
    for (let i = 0; i < 4; i++) rls.push(await make());
    const admitted = []; // {lim, key, window}
    const errors = [];
    let stop = false;
    // Per isolate slot and limiter, 2 clients, each a request every
    // 30-70 ms (about 2x the limit over the 3 keys).
    const load = [];
    for (let i = 0; i < rls.length; i++) {
      for (const lim of ['s', 'a']) {
        for (let j = 0; j < 2; j++) {
          load.push((async () => {
            const r = rng(seed * 31 + i * 7 + j + (lim === 's' ? 100 : 200));
            while (!stop) {
              const rl = rls[i];
              const key = `k${Math.floor(r() * 3)}`;
              try {
                const d = await rl.limit({ limiter: lim, key }, ctx);
                if (d.success) admitted.push({ lim, key, window: Math.round(d.reset / 1000) - 1 });
              } catch (e) {
                // A request on an isolate closed under it; anything else is a failure.
                if (e.code !== 'closed') errors.push(String(e));
              }
              await sleep(30 + r() * 40);
            }
          })());
        }
      }
    }
    const faults = [];
    const t0 = Date.now();
    while (Date.now() - t0 < span) {
      await sleep(300 + rand() * 900);
      const at = Date.now() - t0;
      const f = rand();
      if (f < 0.3 && background === 'requests') { // a Worker evicted: dropped, what it holds never reported
        const i = Math.floor(rand() * rls.length);
        rls[i] = await make(); // the old one gets no more requests, so it syncs no more
        faults.push(`${at} ms drop isolate ${i}`);
      } else if (f < 0.5) { // a graceful stop (with timers, also for a drop: an isolate left alone would go on syncing)
        const i = Math.floor(rand() * rls.length);
        const old = rls[i];
        rls[i] = await make();
        await old.close();
        faults.push(`${at} ms close isolate ${i}`);
      } else if (f < 0.75) {
        const pause = Math.floor(rand() * 1000);
        await c.kill();
        await sleep(pause);
        c = await startCoordinator(config, args, c.port); coords.push(c);
        faults.push(`${at} ms kill -9 coordinator, back after ${pause} ms`);
      } else {
        const pause = 200 + Math.floor(rand() * 1300);
        process.kill(c.pid, 'SIGSTOP');
        await sleep(pause);
        process.kill(c.pid, 'SIGCONT');
        faults.push(`${at} ms SIGSTOP coordinator for ${pause} ms`);
      }
    }
    await waitUp(`${c.url}/healthz`);
    const quietFrom = Math.floor(Date.now() / 1000) + 2; // two whole windows after the faults
    while (Date.now() < (quietFrom + 2) * 1000 + 100) await sleep(50);
    stop = true;
    await Promise.all(load);
    await Promise.all(rls.map((rl) => rl.close()));
    console.log(`# ${background}: ${faults.length} faults: ${faults.join('; ')}`);
    assert.deepEqual(errors, []);

    const per = new Map();
    for (const x of admitted) {
      const k = `${x.lim} ${x.key} ${x.window}`;
      per.set(k, (per.get(k) ?? 0) + 1);
    }
    const over = [...per].filter(([, n]) => n > LIMIT);
    console.log(`# ${background}: ${admitted.length} admissions in ${per.size} key-windows, ${over.length} over ${LIMIT}`);
    assert.deepEqual(over, [], 'key-windows over the limit');
    for (const lim of ['s', 'a']) {
      const quiet = [];
      for (let w = quietFrom; w < quietFrom + 2; w++) for (const key of ['k0', 'k1', 'k2']) quiet.push(per.get(`${lim} ${key} ${w}`) ?? 0);
      console.log(`# ${background} ${lim}: the two windows after the faults admitted ${quiet.join(' ')} of ${LIMIT}`);
      // Leases of dropped isolates come back at their window's end (1 s)
      // or their life's: the fleet at twice the limit fills most of each.
      for (const n of quiet) assert.ok(n >= LIMIT * 0.75, `${lim}: a key-window after the faults admitted ${n} of ${LIMIT}`);
    }
  });
}
