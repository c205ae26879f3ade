// Recovery figures of issue 19 with real processes on loopback and the
// package's default options (README "JavaScript"):
//   EDGELIMIT_BIN=bin/edgelimit node edge/js/bench/recover.js
// 1. workerd, 4 Workers: one request a second on a 6/s key (each Worker
//    idle 4 s between its requests), for IDLE_S seconds (default 30);
// 2. workerd: 2 keys at 5/s each on a 6/s limit, 20 s;
// 3. workerd: bursts of 18 requests each second on a 6/s key, 10 s;
// 4. the coordinator killed (SIGKILL) for 8 s under load, then restarted on
//    its port, for the Go edge host, Node and workerd: what the open policy
//    admits on a limiter far from its limit meanwhile, and how long after
//    the restart the closed policy admits again on every isolate (the Go
//    host spreads requests over its isolates itself: there, the times of
//    the first admissions of 4 consecutive request slots).
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { EdgeLimit } from '../src/index.js';
import { wasmModule } from '../test/helpers.js';
import { startCoordinator, edgelimitBin, freePort, waitUp } from '../test/coordinator.js';
import { startWorkerd, workerdBin } from '../test/workerd/run.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const IDLE_S = Number(process.env.IDLE_S ?? 30);
const config = { limiters: [
  { name: 'rps', algorithm: 'fixed_window', limit: 6, period: '1s' },
  { name: 'big-open', algorithm: 'fixed_window', limit: 1e9, period: '1h', fail_policy: 'open' },
  { name: 'big-closed', algorithm: 'fixed_window', limit: 1e9, period: '1h', fail_policy: 'closed' },
] };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const pct = (a, b) => `${a}/${b} (${((100 * a) / Math.max(b, 1)).toFixed(1)}%)`;

// A host: n isolates behind decide(i, limiter, key) -> {success, stale}.
async function workerdHost(coord) {
  const wd = await startWorkerd({ n: 4, workerFile: path.join(here, '../test/workerd/worker.js'),
    bindings: { LIMITS: JSON.stringify(config), COORDINATOR: coord.url } });
  return {
    name: 'workerd', n: 4, stop: () => wd.stop(),
    async decide(i, limiter, key) { return (await fetch(`${wd.urls[i % 4]}/limit?limiter=${limiter}&key=${key}`)).json(); },
  };
}

async function nodeHost(coord) {
  const rls = [];
  for (let i = 0; i < 4; i++) rls.push(await EdgeLimit.create({ wasm: wasmModule, config, coordinator: coord.url }));
  return {
    name: 'node', n: 4, stop: async () => { for (const r of rls) r.close(); },
    decide: (i, limiter, key) => rls[i % 4].limit({ limiter, key }),
  };
}

async function goHost(coord) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'edgelimit-recover-'));
  const cfg = path.join(dir, 'limits.json');
  writeFileSync(cfg, JSON.stringify(config));
  const port = await freePort();
  const p = spawn(edgelimitBin(), ['edge', '--config', cfg, '--coordinator', coord.url, '--listen', `127.0.0.1:${port}`], { stdio: 'ignore' });
  const url = `http://127.0.0.1:${port}`;
  await waitUp(`${url}/healthz`);
  return {
    name: 'go edge host', n: 4, stop: async () => { p.kill('SIGTERM'); await new Promise((r) => p.once('exit', r)); },
    async decide(i, limiter, key) {
      const r = await fetch(`${url}/v1/decide?limiter=${limiter}&key=${key}`);
      const d = await r.json();
      return { success: r.status === 200, stale: r.headers.get('EdgeLimit-Fail-Policy') !== null, ...d };
    },
  };
}

async function idle(h) {
  let ok = 0;
  for (let i = 0; i < IDLE_S; i++) {
    const t = Date.now();
    if ((await h.decide(i, 'rps', 'idle')).success) ok++;
    await sleep(1000 - (Date.now() - t));
  }
  console.log(`${h.name}: 1 request/s on a 6/s key over ${h.n} isolates: ${pct(ok, IDLE_S)} admitted`);
}

async function twoKeys(h) {
  let ok = 0; let n = 0;
  const end = Date.now() + 20000;
  for (let i = 0; Date.now() < end; i++) {
    const t = Date.now();
    const ds = await Promise.all([h.decide(2 * i, 'rps', 'two-a'), h.decide(2 * i + 1, 'rps', 'two-b')]);
    n += 2; ok += ds.filter((d) => d.success).length;
    await sleep(200 - (Date.now() - t));
  }
  console.log(`${h.name}: 2 keys at 5/s on a 6/s limit, 20 s: ${pct(ok, n)} admitted`);
}

async function bursts(h) {
  const per = new Map();
  for (let s = 0; s < 10; s++) {
    const t = Date.now();
    const ds = await Promise.all(Array.from({ length: 18 }, (_, j) => h.decide(j, 'rps', 'burst')));
    for (const d of ds) if (d.success) { const w = Math.round(d.reset / 1000); per.set(w, (per.get(w) ?? 0) + 1); }
    await sleep(1000 - (Date.now() - t));
  }
  const used = [...per.values()].reduce((a, b) => a + b, 0);
  console.log(`${h.name}: bursts of 18/s on a 6/s key, 10 s: ${pct(used, 60)} of the limit used, most in a window ${Math.max(...per.values())}`);
}

async function outage(make) {
  let coord = await startCoordinator(config);
  const h = await make(coord);
  for (let i = 0; i < h.n; i++) { await h.decide(i, 'big-open', 'k'); await h.decide(i, 'big-closed', 'k'); }
  await coord.kill();
  let open = 0; let openOk = 0; let i = 0;
  const end = Date.now() + 8000;
  while (Date.now() < end) {
    const d = await h.decide(i++, 'big-open', 'k');
    open++; if (d.success) openOk++;
    await sleep(25);
  }
  coord = await startCoordinator(config, [], coord.port);
  const t0 = Date.now();
  const first = new Map();
  while (first.size < h.n && Date.now() - t0 < 20000) {
    const k = i++ % h.n;
    const d = await h.decide(k, 'big-closed', 'k');
    if (d.success && !first.has(k)) first.set(k, Date.now() - t0);
    await sleep(25);
  }
  console.log(`${h.name}: coordinator down 8 s: open admitted ${pct(openOk, open)}; closed admits again per isolate ${JSON.stringify([...first.values()])} ms after the coordinator's restart${first.size < h.n ? ' (not all within 20 s)' : ''}`);
  await h.stop();
  await coord.stop();
}

if (!workerdBin()) console.log('workerd is not installed: the workerd figures are skipped');
else {
  const coord = await startCoordinator(config);
  const h = await workerdHost(coord);
  await idle(h);
  await twoKeys(h);
  await bursts(h);
  await h.stop();
  await coord.stop();
}
await outage(goHost);
await outage(nodeHost);
if (workerdBin()) await outage(workerdHost);
