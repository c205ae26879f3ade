// Recovery in real workerd with the package's default options: idle
// Workers decide fresh, the open policy admits while the coordinator is
// down and requests probe it when it is back, and a request without ctx
// on a stale Worker does not wedge its syncs.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startCoordinator } from './coordinator.js';
import { startWorkerd, workerdBin } from './workerd/run.js';
import { offBoundary } from './helpers.js';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';

const here = path.dirname(fileURLToPath(import.meta.url));
const skip = workerdBin() ? false : 'workerd is not installed (run `make tools-js` or `npm ci` in edge/js)';
const config = { limiters: [
  { name: 'rps', algorithm: 'fixed_window', limit: 6, period: '1s' },
  { name: 'big-open', algorithm: 'fixed_window', limit: 1e9, period: '1h', fail_policy: 'open' },
  { name: 'big-closed', algorithm: 'fixed_window', limit: 1e9, period: '1h', fail_policy: 'closed' },
  { name: 'hourly', algorithm: 'fixed_window', limit: 5, period: '1h' },
] };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const running = [];
after(async () => { for (const s of running.reverse()) await s.stop(); });

async function start(n, bindings = {}) {
  const coord = await startCoordinator(config);
  running.push(coord);
  const wd = await startWorkerd({ n, workerFile: path.join(here, 'workerd/worker.js'),
    bindings: { LIMITS: JSON.stringify(config), COORDINATOR: coord.url, ...bindings } });
  running.push(wd);
  return { coord, wd };
}

async function limit(wd, url, limiter, key = 'k') {
  const r = await fetch(`${url}/limit?limiter=${limiter}&key=${key}`);
  const text = await r.text();
  try { return JSON.parse(text); } catch { return assert.fail(`${r.status} ${text}\nworkerd: ${wd.output()}`); }
}

const stats = async (url) => (await fetch(`${url}/stats`)).json();

test('workerd, default options, 4 Workers: one request a second on a 6/s key (each Worker idle 4 s) is always admitted', { skip, timeout: 60000 }, async () => {
  const { wd } = await start(4);
  const results = [];
  for (let i = 0; i < 8; i++) {
    if (i > 0) await sleep(1000);
    await offBoundary(); // see helpers.js
    results.push(await limit(wd, wd.urls[i % 4], 'rps'));
  }
  const admitted = results.filter((d) => d.success && !d.stale).length;
  console.log(`# 1 request/s on a 6/s key over 4 Workers: ${admitted} of ${results.length} admitted on a fresh view`);
  assert.equal(admitted, results.length, JSON.stringify(results.filter((d) => !d.success || d.stale)));
});

test('workerd, default options: coordinator killed for 8 s under load; open admits throughout, closed admits again soon after it is back', { skip, timeout: 90000 }, async () => {
  const { coord, wd } = await start(4);
  for (const url of wd.urls) for (const lim of ['big-open', 'big-closed']) assert.equal((await limit(wd, url, lim)).success, true);
  await coord.kill();
  const down = { open: 0, openOk: 0, closedOk: 0 };
  let i = 0;
  const outageEnd = Date.now() + 8000;
  while (Date.now() < outageEnd) {
    const url = wd.urls[i++ % 4];
    const [o, c] = await Promise.all([limit(wd, url, 'big-open'), limit(wd, url, 'big-closed')]);
    down.open++;
    if (o.success) down.openOk++;
    if (c.success && !c.stale) down.closedOk++;
    if (!c.success) assert.ok(c.retryAfterMs <= 500, `closed: a stale denial's retryAfterMs ${c.retryAfterMs}`);
    await sleep(25);
  }
  console.log(`# coordinator down 8 s: open admitted ${down.openOk} of ${down.open}`);
  assert.equal(down.openOk, down.open, 'open admits every request on a limiter far from its limit');
  const back = await startCoordinator(config, [], coord.port);
  running.push(back);
  const t0 = Date.now();
  const recovered = new Map();
  while (recovered.size < 4) {
    assert.ok(Date.now() - t0 < 15000, `Workers ${[...recovered.keys()]} admit closed requests again, the others not, 15 s after the coordinator came back`);
    const k = i++ % 4;
    const c = await limit(wd, wd.urls[k], 'big-closed');
    if (c.success && !c.stale && !recovered.has(k)) recovered.set(k, Date.now() - t0);
    await sleep(25);
  }
  console.log(`# closed admits again per Worker, ms after the coordinator came back: ${JSON.stringify([...recovered.values()])}`);
});

test('workerd: a request without ctx on a stale Worker (its probe sync cancelled) does not wedge it: it syncs afterwards', { skip, timeout: 60000 }, async () => {
  const { coord, wd } = await start(1, { SYNC_TIMEOUT_MS: 500 });
  const url = wd.urls[0];
  assert.equal((await limit(wd, url, 'big-closed')).success, true);
  await coord.stop();
  const end = Date.now() + 10000;
  while (!(await limit(wd, url, 'big-closed')).stale) {
    assert.ok(Date.now() < end, 'not stale 10 s after the coordinator stopped');
    await sleep(50);
  }
  const back = await startCoordinator(config, [], coord.port);
  running.push(back);
  await sleep(600); // past the probe interval: the next request probes
  const r = await fetch(`${url}/decide-noctx?limiter=big-closed&key=k`);
  await r.text();
  const before = await stats(url);
  let d;
  const t0 = Date.now();
  do {
    assert.ok(Date.now() - t0 < 10000, `still stale 10 s later: ${JSON.stringify(d)} ${JSON.stringify(await stats(url))}\n${wd.output()}`);
    await sleep(50);
    d = await limit(wd, url, 'big-closed');
  } while (!d.success || d.stale);
  const s = await stats(url);
  console.log(`# fresh again ${Date.now() - t0} ms after the request without ctx; syncs ${before.syncs} -> ${s.syncs}, abandoned ${s.abandoned}`);
  assert.ok(s.syncs > before.syncs, JSON.stringify(s));
});

test('workerd, default options, 4 Workers: a key reset on the coordinator is admitted by every Worker two sync intervals later', { skip, timeout: 60000 }, async () => {
  const { coord, wd } = await start(4);
  let admitted = 0;
  for (let i = 0; i < 16; i++) if ((await limit(wd, wd.urls[i % 4], 'hourly')).success) admitted++;
  assert.equal(admitted, 5, 'a 5/hour key admits its limit');
  for (const url of wd.urls) assert.equal((await limit(wd, url, 'hourly')).success, false, 'every Worker denies the full key');
  const r = await fetch(`${coord.url}/v1/limiters/hourly/keys/k`, { method: 'DELETE' });
  assert.equal(r.status, 204);
  await sleep(200); // two sync intervals (default 100 ms), no request in between
  const after = [];
  for (const url of wd.urls) after.push(await limit(wd, url, 'hourly'));
  console.log(`# reset of a 5/hour key: ${after.filter((d) => d.success).length} of 4 Workers admit their first request 200 ms later`);
  assert.deepEqual(after.map((d) => d.success), [true, true, true, true], JSON.stringify(after));
});

test('workerd, default options, 4 Workers: two keys at 5/s each on a 6/s key limit are admitted (>= 99%)', { skip, timeout: 60000 }, async () => {
  const { wd } = await start(4);
  let admitted = 0; let n = 0;
  const end = Date.now() + 6000;
  for (let i = 0; Date.now() < end; i++) {
    const t0 = Date.now();
    const d = await limit(wd, wd.urls[i % 4], 'rps', i % 2 ? 'a' : 'b');
    n++;
    if (d.success && !d.stale) admitted++;
    await sleep(Math.max(100 - (Date.now() - t0), 0)); // 10 requests a second: 5 per key
  }
  console.log(`# two keys at 5/s on a 6/s limit over 4 Workers: ${admitted} of ${n} admitted`);
  assert.ok(admitted >= 0.99 * n, `${admitted} of ${n} admitted`);
});

test('workerd, default options, 4 Workers: bursts of 18 a second on a 6/s key use >= 95% of the limit and never exceed it', { skip, timeout: 60000 }, async () => {
  const { wd } = await start(4);
  const bursts = 6;
  let admitted = 0;
  for (let b = 0; b < bursts; b++) {
    await offBoundary();
    const win = Math.floor(Date.now() / 1000);
    const ds = await Promise.all(Array.from({ length: 18 }, (_, i) => limit(wd, wd.urls[i % 4], 'rps', 'burst')));
    const ok = ds.filter((d) => d.success && !d.stale).length;
    if (Math.floor(Date.now() / 1000) === win) assert.ok(ok <= 6, `burst ${b}: ${ok} admitted in one window of a 6/s limit`);
    admitted += ok;
    await sleep(1000 - (Date.now() % 1000) + 150); // the next window
  }
  console.log(`# bursts of 18/s on a 6/s key over 4 Workers: ${admitted} of ${6 * bursts} units of the limit used`);
  assert.ok(admitted >= 0.95 * 6 * bursts, `${admitted} admitted of a limit of ${6 * bursts}`);
});

test('workerd, default options, 4 Workers: quiet after the coordinator was killed and restarted (Pebble), requests on a full strict key are denied on a fresh view, not admitted by open', { skip, timeout: 90000 }, async () => {
  const cfg = { limiters: [{ name: 'full', algorithm: 'fixed_window', limit: 10, period: '1h', mode: 'strict' }] };
  // Not within 30 s of the hour's end: the key must stay in one window.
  const toHour = 3600000 - (Date.now() % 3600000);
  if (toHour < 30000) await sleep(toHour + 100);
  const args = ['--data', mkdtempSync(path.join(os.tmpdir(), 'edgelimit-pebble-'))];
  const coord = await startCoordinator(cfg, args);
  running.push(coord);
  const wd = await startWorkerd({ n: 4, workerFile: path.join(here, 'workerd/worker.js'),
    bindings: { LIMITS: JSON.stringify(cfg), COORDINATOR: coord.url } });
  running.push(wd);
  let filled = 0;
  for (let i = 0; i < 14; i++) if ((await limit(wd, wd.urls[i % 4], 'full', 'full')).success) filled++;
  assert.equal(filled, 10);
  await coord.kill();
  // Each Worker fails its syncs on another key, then goes quiet.
  for (let i = 0; i < 3; i++) { await Promise.all(wd.urls.map((u) => limit(wd, u, 'full', 'other'))); await sleep(300); }
  const back = await startCoordinator(cfg, args, coord.port);
  running.push(back);
  await sleep(3000); // quiet with the coordinator back: no request probes it
  const ds = await Promise.all(wd.urls.flatMap((u) => [0, 1, 2].map(() => limit(wd, u, 'full', 'full'))));
  console.log(`# 12 requests on the full key after 3 s of quiet: ${ds.filter((d) => d.success).length} admitted, ${ds.filter((d) => d.stale).length} on a stale view`);
  assert.deepEqual(ds.filter((d) => d.success || d.stale), [], 'no request on the full key is admitted or decided stale');
  for (let i = 0; i < 5; i++) { await Promise.all(wd.urls.map((u) => limit(wd, u, 'full', 'other'))); await sleep(200); }
  const count = (await (await fetch(`${back.url}/v1/limiters/full/keys/full`)).json()).count;
  assert.ok(count <= 10, `the coordinator counts ${count} on a limit of 10`);
});
