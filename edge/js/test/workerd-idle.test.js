// Workers in real workerd (default options: background syncs on requests)
// that go idle for longer than a window and then get traffic: they admit
// under-limit traffic at once, and a key reset while they were idle reaches
// them with their first request.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startCoordinator } from './coordinator.js';
import { startWorkerd, workerdBin } from './workerd/run.js';
import { offBoundary } from './helpers.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const skip = workerdBin() ? false : 'workerd is not installed (run `make tools-js` or `npm ci` in edge/js)';
const config = { limiters: [
  { name: 'fw', algorithm: 'fixed_window', limit: 6, period: '1s' },
  { name: 'sw', algorithm: 'sliding_window', limit: 6, period: '1s' },
  { name: 'gc', algorithm: 'gcra', limit: 6, period: '1s' },
  { name: 'st', algorithm: 'fixed_window', limit: 6, period: '1s', mode: 'strict' },
  { name: 'ap', algorithm: 'fixed_window', limit: 6, period: '1s', mode: 'approximate' },
  { name: 'min', algorithm: 'fixed_window', limit: 4, period: '1m' },
] };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const running = [];
after(async () => { for (const s of running.reverse()) await s.stop(); });

async function limit(wd, url, limiter, key = 'k') {
  const r = await fetch(`${url}/limit?limiter=${limiter}&key=${key}`);
  const text = await r.text();
  try { return JSON.parse(text); } catch { return assert.fail(`${r.status} ${text}\nworkerd: ${wd.output()}`); }
}

test('workerd, default options, 4 Workers: each limiter filled, then idle 2.5 s (past its 1 s window): every Worker admits its first requests', { skip, timeout: 90000 }, async () => {
  const coord = await startCoordinator(config); running.push(coord);
  const wd = await startWorkerd({ n: 4, workerFile: path.join(here, 'workerd/worker.js'),
    bindings: { LIMITS: JSON.stringify(config), COORDINATOR: coord.url } });
  running.push(wd);
  const bad = [];
  for (const lim of ['fw', 'sw', 'gc', 'st', 'ap']) {
    for (let round = 0; round < 2; round++) {
      await offBoundary();
      // 3x the limit over the 4 Workers: the key is full, each Worker has denied.
      await Promise.all(wd.urls.map(async (url) => { for (let i = 0; i < 5; i++) await limit(wd, url, lim); }));
      await sleep(2500);
      await offBoundary();
      // One request per Worker, 4 of the 6 a window allows (a gcra key
      // refills one per 167 ms: all 4 fit after 2.5 s).
      const first = await Promise.all(wd.urls.map((url) => limit(wd, url, lim)));
      const denied = first.filter((d) => !d.success || d.stale);
      if (denied.length) bad.push(`${lim} round ${round}: ${JSON.stringify(denied)}`);
    }
  }
  console.log(`# filled then idle 2.5 s: ${bad.length} of 10 rounds with a Worker denying its first request`);
  assert.deepEqual(bad, []);
});

// The Workers that only denied the key hold no cost from before the reset:
// each admits its first request after it (the one that filled it may
// report cost admitted before the reset after it, which counts).
test('workerd, default options, 4 Workers: a 4/minute key filled by one Worker and denied by 3 others, idle 2.5 s, reset: the 3 admit their first request', { skip, timeout: 60000 }, async () => {
  const coord = await startCoordinator(config); running.push(coord);
  const wd = await startWorkerd({ n: 4, workerFile: path.join(here, 'workerd/worker.js'),
    bindings: { LIMITS: JSON.stringify(config), COORDINATOR: coord.url } });
  running.push(wd);
  // The key's minute must not end during the test (its requests take well
  // under a second, then 2.5 s idle).
  if (Date.now() % 60000 > 55000) await sleep(60000 - (Date.now() % 60000) + 200);
  let admitted = 0;
  for (let i = 0; i < 6; i++) if ((await limit(wd, wd.urls[0], 'min')).success) admitted++;
  assert.equal(admitted, 4, 'a 4/minute key admits its limit');
  for (const url of wd.urls.slice(1)) for (let i = 0; i < 2; i++) assert.equal((await limit(wd, url, 'min')).success, false, 'the others deny the full key');
  await sleep(2500);
  const r = await fetch(`${coord.url}/v1/limiters/min/keys/k`, { method: 'DELETE' });
  assert.equal(r.status, 204);
  const after = [];
  for (const url of wd.urls.slice(1)) after.push(await limit(wd, url, 'min'));
  console.log(`# reset after 2.5 s idle: ${after.filter((d) => d.success).length} of 3 Workers that had denied admit their first request`);
  assert.deepEqual(after.map((d) => d.success), [true, true, true], JSON.stringify(after));
});
