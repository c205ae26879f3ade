// End to end in real workerd: several Workers (separate isolates, one
// instance of the module each) share one key at 3x its limit for a few
// windows, syncing to the real Go coordinator on loopback.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startCoordinator, globalView } from './coordinator.js';
import { startWorkerd, workerdBin } from './workerd/run.js';
import { root, wasmBytes } from './helpers.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const LIMIT = 20;
const config = { limiters: [
  { name: 'strict', algorithm: 'fixed_window', limit: LIMIT, period: '1s', mode: 'strict' },
  { name: 'approx', algorithm: 'fixed_window', limit: LIMIT, period: '1s', mode: 'approximate' },
  { name: 'bench', algorithm: 'fixed_window', limit: 1000000000, period: '1s', mode: 'approximate' },
  { name: 'upstream', algorithm: 'fixed_window', limit: 1000, period: '1s', upstream: {} },
] };
const ISOLATES = 4;
const skip = workerdBin() ? false : 'workerd is not installed (run `make tools-js` or `npm ci` in edge/js)';

let coord;
let wd;
before(async () => {
  if (skip) return;
  coord = await startCoordinator(config);
  wd = await startWorkerd({ n: ISOLATES, workerFile: path.join(here, 'workerd/worker.js'),
    bindings: { LIMITS: JSON.stringify(config), COORDINATOR: coord.url, SYNC_MS: 50 } });
});
after(async () => { await wd?.stop(); await coord?.stop(); });

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Sends one request every ~gap ms for ms, round robin over the Workers, to
// both limiters' shared key; returns the admitted counts per limiter and window.
async function drive(ms, gap) {
  const admitted = { strict: new Map(), approx: new Map() };
  const pending = [];
  const end = Date.now() + ms;
  let i = 0;
  while (Date.now() < end) {
    const url = wd.urls[i++ % wd.urls.length];
    for (const lim of ['strict', 'approx']) {
      pending.push(fetch(`${url}/limit?limiter=${lim}&key=shared`).then(async (r) => {
        const text = await r.text();
        let d;
        try { d = JSON.parse(text); } catch { assert.fail(`${r.status} ${text}\nworkerd: ${wd.output()}`); }
        assert.ok(r.status === 200 || r.status === 429, JSON.stringify(d));
        if (d.success) {
          const w = Math.round(d.reset / 1000) - 1; // the decision's window (period 1 s)
          admitted[lim].set(w, (admitted[lim].get(w) ?? 0) + 1);
        }
      }));
    }
    await sleep(gap);
  }
  await Promise.all(pending);
  return admitted;
}

test('workerd: Workers at 3x one key\'s limit; strict never over the limit, approximate within its bound', { skip, timeout: 60000 }, async () => {
  // 3x the limit: 60 requests/s per limiter, spread over 4 isolates, for 4 s.
  const admitted = await drive(4000, 1000 / (3 * LIMIT));
  for (const url of wd.urls) {
    const r = await (await fetch(`${url}/sync`)).json();
    assert.equal(r.ok, true, r.error);
  }
  const windows = (m) => JSON.stringify([...m].sort());
  if (process.env.EDGELIMIT_VERBOSE) console.log('admitted per window', windows(admitted.strict), windows(admitted.approx), wd.output());
  for (const [w, n] of admitted.strict) assert.ok(n <= LIMIT, `strict window ${w}: ${n} > ${LIMIT}: ${windows(admitted.strict)}`);
  // Approximate mode admits from a view up to one sync old plus an estimate
  // of the others' unsynced traffic; its bound here is 10% over the limit.
  for (const [w, n] of admitted.approx) assert.ok(n <= LIMIT * 1.1, `approx window ${w}: ${n}: ${windows(admitted.approx)}`);
  const total = (m) => [...m.values()].reduce((a, b) => a + b, 0);
  // Both used the limit: at least half of it over the full windows.
  assert.ok(total(admitted.strict) >= 1.5 * LIMIT, `strict admitted ${windows(admitted.strict)}`);
  assert.ok(total(admitted.approx) >= 1.5 * LIMIT, `approx admitted ${windows(admitted.approx)}`);
  // Every Worker is its own isolate with its own instance of the module
  // and id, and synced with the coordinator.
  const ids = new Set();
  for (const url of wd.urls) {
    const s = await (await fetch(`${url}/stats`)).json();
    assert.ok(s.syncs >= 1 && s.replies >= 1, JSON.stringify(s));
    assert.match(s.isolateId, /^js-[0-9a-f]{12}$/);
    ids.add(s.isolateId);
  }
  assert.equal(ids.size, ISOLATES, `isolate ids ${[...ids]}`);
  // What the coordinator counted in the current window matches the Workers'
  // admissions there (nothing lost, nothing counted twice).
  const v = await globalView(coord.url, 'approx', 'shared');
  assert.equal(v.status, 200);
  assert.equal(v.body.count, admitted.approx.get(v.body.window) ?? 0, `coordinator ${JSON.stringify(v.body)} vs ${windows(admitted.approx)}`);
});

test('workerd: one Worker hears 429 Retry-After: 30 from its upstream; the other Workers pause the key', { skip, timeout: 60000 }, async () => {
  const q = 'limiter=upstream&key=acct';
  for (const url of wd.urls) assert.equal((await fetch(`${url}/limit?${q}`)).status, 200);
  const o = await (await fetch(`${wd.urls[0]}/observe?${q}&status=429&retry_after=30`)).json();
  assert.ok(o.pausedMs > 29000, JSON.stringify(o));
  assert.equal((await (await fetch(`${wd.urls[0]}/sync`)).json()).ok, true, 'the pause reached the coordinator');
  // Each other Worker may admit once before its next sync (it cannot know
  // yet); after its sync it denies for the pause.
  for (const url of wd.urls.slice(1)) {
    await (await fetch(`${url}/limit?${q}`)).arrayBuffer();
    assert.equal((await (await fetch(`${url}/sync`)).json()).ok, true);
    const r = await fetch(`${url}/limit?${q}`);
    const d = await r.json();
    assert.equal(r.status, 429, `${url} admits the paused key after its sync: ${JSON.stringify(d)}`);
    assert.ok(d.retryAfterMs > 25000, JSON.stringify(d));
  }
});

test('the Go host, Node and workerd load the same module bytes', { skip, timeout: 60000 }, async () => {
  const node = createHash('sha256').update(wasmBytes).digest('hex');
  const goSum = execFileSync('go', ['run', './scripts/modsum'], { cwd: root, encoding: 'utf8' }).trim();
  assert.equal(goSum, node, 'the module the Go host embeds (package wasm) is wasm/edgelimit.wasm');
  for (const url of wd.urls) {
    const d = await (await fetch(`${url}/digest`)).json();
    assert.equal(d.sha256, node, `workerd ${url}`);
    assert.ok(d.exports.includes('el_decide'));
  }
});
