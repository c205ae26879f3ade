// A lapsed lease in real workerd (default options: background syncs on
// requests): a Worker idle past its lease's life, on a strict key whose
// window every view calls exhausted, admits the units its lease left
// unused instead of denying them for a dry spell.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startCoordinator, globalView } from './coordinator.js';
import { startWorkerd, workerdBin } from './workerd/run.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const skip = workerdBin() ? false : 'workerd is not installed (run `make tools-js` or `npm ci` in edge/js)';
const LIMIT = 20;
const config = { limiters: [
  { name: 'day', algorithm: 'fixed_window', limit: LIMIT, period: '24h', mode: 'strict' },
  { name: 'other', algorithm: 'fixed_window', limit: 1000, period: '1s', mode: 'approximate' },
] };
const DAY = 86_400_000;
const IDLE = 1500; // ms, past the coordinator's 1 s lease life
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const running = [];
after(async () => { for (const s of running.reverse()) await s.stop(); });

async function limit(wd, url, limiter, key) {
  const r = await fetch(`${url}/limit?limiter=${limiter}&key=${key}`);
  const text = await r.text();
  try { return JSON.parse(text); } catch { return assert.fail(`${r.status} ${text}\nworkerd: ${wd.output()}`); }
}

const fmt = (d) => `${d.success ? 'admit' : 'deny'}(remaining ${d.remaining}, retryAfterMs ${Math.round(d.retryAfterMs)})`;

// Two Workers, one workerd process each, a strict 20 a day key k: A admits
// 5 (the coordinator leases it 2 units more), then serves traffic on
// another limiter (it keeps syncing); B asks for k until 18 of 20 are used
// or its first denial (the rest in A's lease); both idle 1.5 s (past the 1 s
// lease life); A sends 3 requests for k back to back: it admits its 2
// lapsed units and denies the third (the window full) with a retryAfterMs
// of at most 20 s, and the two Workers admit at most 20 in all (2 rounds,
// 2 keys). Before, A denied all 3 (remaining 2) for a dry spell its
// exhausted view had started, with retryAfterMs 863998 (a hundredth of
// the day: 14.4 min), and B admitted the 19th a moment later.
test('workerd, default options, 2 workerd processes: a Worker idle past its lease on a strict 20 a day key admits its 2 lapsed units, then denies for at most 20 s', { skip, timeout: 90000 }, async () => {
  const coord = await startCoordinator(config); running.push(coord);
  const bindings = { LIMITS: JSON.stringify(config), COORDINATOR: coord.url };
  const workerFile = path.join(here, 'workerd/worker.js');
  const wa = await startWorkerd({ n: 1, workerFile, bindings }); running.push(wa);
  const wb = await startWorkerd({ n: 1, workerFile, bindings }); running.push(wb);
  const [A] = wa.urls;
  const [B] = wb.urls;
  // The key's day must not end during the test (a few seconds a round).
  if (Date.now() % DAY > DAY - 30000) await sleep(DAY - (Date.now() % DAY) + 200);
  const bad = [];
  let lapsed = 0; // rounds where B stopped short of the limit
  for (let round = 0; round < 2; round++) {
    const key = `k${round}`;
    let total = 0;
    const t0 = Date.now();
    for (let i = 0; i < 5; i++) if ((await limit(wa, A, 'day', key)).success) total++;
    assert.equal(total, 5, `round ${round}: A admits its first 5 of ${LIMIT}`);
    // A serves traffic on another limiter (it keeps syncing) until 700 ms
    // after its first request for k: it stops short of its lease's 1 s
    // life, so that no batch of its gives the lease back before B asks
    // (on a loaded host, 10 requests 100 ms apart ran past it).
    while (Date.now() - t0 < 700) { await limit(wa, A, 'other', 'x'); await sleep(100); }
    // B takes what A's lease does not hold (18 of 20 with A's 2 more),
    // and stops there: a request more would be held for a reply (up to a
    // second), outlive A's lease and be served its units (which the
    // short spell of a window whose rest sits in another's lease allows),
    // leaving none to test A's lapse with.
    let bDenial = null;
    for (let i = 0; i < LIMIT && !bDenial && total < LIMIT - 2; i++) {
      const d = await limit(wb, B, 'day', key);
      if (d.success) total++; else bDenial = d;
    }
    await sleep(IDLE);
    const ds = [];
    for (let i = 0; i < 3; i++) ds.push(await limit(wa, A, 'day', key));
    const admittedA = ds.filter((d) => d.success).length;
    total += admittedA;
    // The coordinator never admits past the limit: what it counted plus
    // what it holds in leases (lease_sum, expired ones included) stays
    // within 20, and so do both Workers' admissions, with one more
    // request from each after A's 3.
    assert.equal((await (await fetch(`${A}/sync`)).json()).ok, true, 'A syncs');
    const held = async () => {
      const { body: v } = await globalView(coord.url, 'day', key);
      return { count: v.count, leased: v.lease_sum };
    };
    const v1 = await held();
    const more = [await limit(wb, B, 'day', key), await limit(wa, A, 'day', key)];
    const v2 = await held();
    const before = total - admittedA;
    total += more.filter((d) => d.success).length;
    const line = `round ${round}: ${before} of ${LIMIT} admitted before A's 3 (B ${bDenial ? `denied: ${fmt(bDenial)}` : 'stopped'}); `
      + `A then: ${ds.map(fmt).join(' ')}; coordinator count ${v1.count}, leased ${v1.leased}; `
      + `one more each (B, A): ${more.map(fmt).join(' ')}; count ${v2.count}, leased ${v2.leased}; ${total} admitted in all`;
    console.log(`# ${line}`);
    for (const v of [v1, v2]) assert.ok(v.count + v.leased <= LIMIT, `the coordinator over the limit: ${line}`);
    assert.ok(total <= LIMIT, `the Workers admitted over the limit: ${line}`);
    // What A's lease left (B stopped at the units held in it): A admits
    // them, up to its 3 requests, and denies the rest. A round where B
    // got them all (A's lease lapsed before B's denial, on a slow host)
    // does not test the lapse.
    if (before < LIMIT) lapsed++;
    const left = Math.min(3, LIMIT - before);
    const wantA = [0, 1, 2].map((i) => i < left);
    const denial = ds.find((d) => !d.success);
    if (!ds.every((d, i) => d.success === wantA[i]) || (denial && !(denial.retryAfterMs <= 20000))) bad.push(line);
  }
  assert.ok(lapsed > 0, 'in no round did B stop short of the limit with units left in A\'s lease');
  assert.deepEqual(bad, [], 'A, idle past its lease, admits the units it left and denies the rest for at most 20 s');
});
