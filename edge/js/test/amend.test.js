// Amendments (wasm/wire/amend.go) against the real Go coordinator on
// loopback: a strict request held (syncRetry) while a batch is in flight
// amends that batch and is admitted by a reply to it, one round trip after
// it asked, instead of waiting for the batch's reply and then its own.
// Every POST goes through a fetch that adds a one-way delay each way (a
// coordinator 100 ms away) and records what it carried.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeLimit } from '../src/index.js';
import { decode } from '../src/msgpack.js';
import { wasmModule, wasmBytes, problem } from './helpers.js';
import { startCoordinator } from './coordinator.js';

const coords = [];
after(async () => { for (const c of coords) await c.stop(); });
const config = { limiters: [{ name: 's', algorithm: 'fixed_window', limit: 100, period: '1h', mode: 'strict' }] };
let coord = null;
async function coordinator() {
  if (!coord) { coord = await startCoordinator(config); coords.push(coord); }
  return coord;
}

const ONE_WAY = 100; // ms each way
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A fetch to the coordinator ONE_WAY ms away each way, recording each POST
// ({seq, ak: the asks of an amendment or undefined, at}) in sent. hook(rec)
// may return a Response to answer in the coordinator's place (after the
// way there); there(rec) and back(rec) are extra ms for each way.
function far(sent, { hook = () => null, there = () => 0, back = () => 0 } = {}) {
  return async (url, init) => {
    if (!init?.body) return fetch(url, init); // the reading of the coordinator's time
    const b = decode(init.body);
    const rec = { seq: b.seq, ak: b.ak, at: Date.now() };
    sent.push(rec);
    await sleep(ONE_WAY + there(rec));
    const fake = hook(rec);
    if (fake) return fake;
    const r = await fetch(url, init);
    const body = await r.arrayBuffer();
    rec.status = r.status;
    await sleep(ONE_WAY + back(rec));
    return new Response(body, { status: r.status, headers: r.headers });
  };
}

// The module with its el_amend export renamed: a module older than
// amendments, which the package must drive as before.
function withoutAmend() {
  const b = Uint8Array.from(wasmBytes);
  const name = new TextEncoder().encode('el_amend');
  let n = 0;
  for (let i = 0; i + name.length <= b.length; i++) {
    if (name.every((c, j) => b[i + j] === c)) { b[i] = 0x78; n++; } // "xl_amend"
  }
  assert.ok(n >= 1, 'the module exports el_amend');
  const m = new WebAssembly.Module(b);
  assert.ok(!WebAssembly.Module.exports(m).some((e) => e.name === 'el_amend'));
  return m;
}

async function until(cond, what, ms = 3000) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`no ${what} within ${ms} ms`);
    await sleep(2);
  }
}

// The first request of key a cuts batch 1 (seq 1) and is held for its
// reply; once it is on its way, a request of key b (no lease either) is
// held too. Returns its decision, its wait, and the POSTs sent until it
// was decided.
async function heldDuringBatch(rl, sent, a, b) {
  const before = sent.length;
  const p1 = rl.limit({ limiter: 's', key: a });
  await until(() => sent.length > before, 'batch in flight');
  const t = Date.now();
  const d = await rl.limit({ limiter: 's', key: b });
  const waited = Date.now() - t;
  const until2 = sent.slice(before);
  const d1 = await p1;
  assert.equal(d1.success, true, `${a}: ${JSON.stringify(d1)}, ${rl.lastError}`);
  return { d, waited, sent: until2 };
}

for (const background of ['timers', 'requests']) {
  test(`${background}: a request held while a batch is in flight amends it and is admitted by a reply to that batch`, async (t) => {
    const c = await coordinator();
    const sent = [];
    const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, syncInterval: 60000, background, fetch: far(sent) });
    try {
      const r = await heldDuringBatch(rl, sent, `${background}-a1`, `${background}-b1`);
      assert.equal(r.d.success, true, `${JSON.stringify(r.d)}, ${rl.lastError}`);
      // Batch 1, then its amendment asking for b1 (the same seq): no other
      // batch was cut before b1 was admitted.
      assert.deepEqual(r.sent.map((s) => [s.seq, s.ak?.map((k) => k[1]) ?? null]), [[1, null], [1, [`${background}-b1`]]]);
      assert.equal(rl.counters.amendments, 1);
      assert.deepEqual([rl.counters.syncErrors, rl.counters.reincarnations, rl.lastError], [0, 0, null]);

      // The same with a module without el_amend: b waits for batch 1's
      // reply, then for batch 2's.
      const sentOld = [];
      const old = await EdgeLimit.create({ wasm: withoutAmend(), config, coordinator: c.url, syncInterval: 60000, background, fetch: far(sentOld) });
      try {
        const o = await heldDuringBatch(old, sentOld, `${background}-a2`, `${background}-b2`);
        assert.equal(o.d.success, true, `${JSON.stringify(o.d)}, ${old.lastError}`);
        assert.deepEqual(o.sent.map((s) => [s.seq, s.ak ?? null]), [[1, null], [2, null]]);
        assert.equal(old.counters.amendments, 0);
        t.diagnostic(`round trip ${2 * ONE_WAY} ms: held during a batch, admitted after ${r.waited} ms amending it, ${o.waited} ms without el_amend`);
      } finally { await old.close(); }
    } finally { await rl.close(); }
  });

  test(`${background}: the batch's reply after its amendment's is taken, or refused harmlessly once the next batch is cut`, async () => {
    const c = await coordinator();
    const sent = [];
    // Batch 1 (not its amendment) reaches the coordinator 300 ms late,
    // batch 2's reply comes back 300 ms late.
    const slow = (n) => (s) => (s.ak === undefined && s.seq === n ? 300 : 0);
    const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, syncInterval: 60000, background,
      fetch: far(sent, { there: slow(1), back: slow(2) }) });
    try {
      // The amendment overtakes batch 1: the coordinator applies it as the
      // batch, and its reply ends the sync; batch 1's reply (a retry's,
      // newer) comes later, before batch 2 is cut: the module takes it.
      const r = await heldDuringBatch(rl, sent, `${background}-c1`, `${background}-d1`);
      assert.equal(r.d.success, true, `${JSON.stringify(r.d)}, ${rl.lastError}`);
      assert.deepEqual(r.sent.map((s) => [s.seq, s.ak !== undefined]), [[1, false], [1, true]]);
      await until(() => rl.stats().replies === 2, 'second reply applied');
      assert.equal(rl.stats().errors, 0);

      // Batch 2 and its amendment, whose reply comes first; batch 3 is cut
      // (for key g) before batch 2's reply comes: the module refuses that
      // reply as stale.
      const r2 = await heldDuringBatch(rl, sent, `${background}-e1`, `${background}-f1`);
      assert.equal(r2.d.success, true, `${JSON.stringify(r2.d)}, ${rl.lastError}`);
      const g = await rl.limit({ limiter: 's', key: `${background}-g1` });
      assert.equal(g.success, true, `${JSON.stringify(g)}, ${rl.lastError}`);
      assert.deepEqual(sent.slice(2).map((s) => [s.seq, s.ak !== undefined]), [[2, false], [2, true], [3, false]]);
      await until(() => rl.stats().errors === 1, 'batch 2\'s reply refused');
      const st = rl.stats();
      assert.deepEqual([st.syncErrors, st.failures, st.stale, st.reincarnations, rl.lastError], [0, 0, false, 0, null],
        'a refused second reply is no sync failure');
      assert.equal(await rl.sync(), true, String(rl.lastError));
      const h = await rl.limit({ limiter: 's', key: `${background}-h1` });
      assert.equal(h.success, true, `${JSON.stringify(h)}, ${rl.lastError}`);
    } finally { await rl.close(); }
  });
}

for (const background of ['timers', 'requests']) {
  test(`${background}: an amendment's reply that comes after the next batch was cut is taken while that batch flies`, async (tt) => {
    const c = await coordinator();
    const sent = [];
    // Batch 1's amendment's reply comes back 300 ms late; batch 2's (and
    // its amendment's, when b3, decided again after batch 1's reply, asks
    // in one) 600 ms.
    const slow = (s) => (s.seq === 2 ? 600 : s.ak !== undefined ? 300 : 0);
    const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, syncInterval: 60000, background,
      fetch: far(sent, { back: slow }) });
    try {
      const p1 = rl.limit({ limiter: 's', key: `${background}-a3` });
      await until(() => sent.length === 1, 'batch 1 in flight');
      const t = Date.now();
      let bAt = 0;
      const pb = rl.limit({ limiter: 's', key: `${background}-b3` }).then((d) => { bAt = Date.now(); return d; });
      assert.equal((await p1).success, true, String(rl.lastError));
      // Batch 1 answered (without b3's ask): batch 2 is cut, for another
      // key, while the amendment's reply is still on its way.
      rl.decide({ limiter: 's', key: `${background}-x3` });
      let s2At = 0;
      const s2 = rl.sync().then((ok) => { s2At = Date.now(); return ok; });
      await until(() => sent.length === 3, 'batch 2 in flight');
      const b = await pb;
      assert.equal(b.success, true, `${JSON.stringify(b)}, ${rl.lastError}`);
      assert.deepEqual(sent.slice(0, 3).map((x) => [x.seq, x.ak?.map((k) => k[1]) ?? null]),
        [[1, null], [1, [`${background}-b3`]], [2, null]]);
      assert.equal(await s2, true, String(rl.lastError));
      tt.diagnostic(`b3 admitted at +${bAt - t} ms, batch 2 answered at +${s2At - t} ms; sent ${JSON.stringify(sent.map((x) => [x.seq, x.ak?.length ?? 0, x.at - t]))}`);
      // Batch 2's reply (or its amendment's) cannot come before it was
      // sent plus 2 x ONE_WAY + 600 ms: b3 was admitted by batch 1's
      // amendment's reply (+500 ms; +1000 with a module that refuses it).
      const earliest = sent[2].at + 2 * ONE_WAY + 600;
      assert.ok(bAt < earliest - 150 && bAt < s2At, `b3 admitted at +${bAt - t} ms, batch 2 answered at +${s2At - t} ms (sent at +${sent[2].at - t}): want b3 on the amendment's reply`);
      assert.deepEqual([rl.counters.syncErrors, rl.counters.reincarnations, rl.lastError], [0, 0, null]);
    } finally { await rl.close(); }
  });
}

for (const background of ['timers', 'requests']) {
  test(`${background}: a request held while the batch's amendment is on its way amends the batch again`, async (t) => {
    const c = await coordinator();
    const sent = [];
    const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, syncInterval: 60000, background, fetch: far(sent) });
    try {
      const k = (x) => `${background}-${x}4`;
      const pa = rl.limit({ limiter: 's', key: k('a') });
      await until(() => sent.length === 1, 'batch 1 in flight');
      const pb = rl.limit({ limiter: 's', key: k('b') });
      await until(() => sent.length === 2, 'its amendment in flight');
      const at = Date.now();
      const dc = await rl.limit({ limiter: 's', key: k('c') });
      const waited = Date.now() - at;
      const until3 = sent.slice();
      for (const [key, d] of [[k('a'), await pa], [k('b'), await pb], [k('c'), dc]]) {
        assert.equal(d.success, true, `${key}: ${JSON.stringify(d)}, ${rl.lastError}`);
      }
      // Batch 1 and two amendments of it (amend.js): no batch 2 was cut
      // for c (with one amendment per batch, c waited for batch 1's reply,
      // the amendment's, then batch 2's).
      assert.deepEqual(until3.map((s) => [s.seq, s.ak?.map((x) => x[1]) ?? null]), [[1, null], [1, [k('b')]], [1, [k('c')]]]);
      assert.equal(rl.counters.amendments, 2);
      assert.deepEqual([rl.counters.syncErrors, rl.counters.reincarnations, rl.lastError], [0, 0, null]);
      t.diagnostic(`round trip ${2 * ONE_WAY} ms: c, held while batch 1 and its amendment flew, admitted after ${waited} ms`);
    } finally { await rl.close(); }
  });
}

test('the batch\'s reply granting none of the amended ask does not deny the request: the amendment\'s reply admits it', async () => {
  const cfg = { limiters: [...config.limiters, { name: 'a', algorithm: 'fixed_window', limit: 1000, period: '1h', mode: 'approximate' }] };
  const c = await startCoordinator(cfg);
  coords.push(c);
  for (const background of ['timers', 'requests']) {
    const sent = [];
    const rl = await EdgeLimit.create({ wasm: wasmModule, config: cfg, coordinator: c.url, syncInterval: 60000, background, fetch: far(sent) });
    try {
      const k = `dry-${background}`;
      assert.equal((await rl.limit({ limiter: 's', key: k })).success, true, String(rl.lastError));
      // A batch that reports k's use and asks for nothing (cut for another
      // limiter's key): its reply grants k no lease. A request of k held
      // while it flies amends it.
      rl.decide({ limiter: 'a', key: k });
      const before = sent.length;
      const synced = rl.sync();
      await until(() => sent.length > before, 'batch in flight');
      const d = await rl.limit({ limiter: 's', key: k });
      const admittedAt = Date.now();
      // What each POST carried and was answered, and the package's
      // counters: a failure says which reply admitted the request.
      const trace = () => `${background}: sent ${JSON.stringify(sent.slice(before).map((s) => [s.seq, s.ak?.length ?? 0, s.status ?? 'none', s.at - sent[before].at]))}, admitted at +${admittedAt - sent[before].at} ms, ${JSON.stringify(rl.stats())}, lastError ${rl.lastError}`;
      assert.equal(d.success, true, `${JSON.stringify(d)}; ${trace()}`);
      assert.equal(await synced, true, trace());
      const seq = sent[before].seq;
      // The batch, then its amendment asking for k (the request held),
      // and no other batch: the amendment's reply admitted it.
      assert.deepEqual(sent.slice(before).map((s) => [s.seq, s.ak?.map((x) => x[1]) ?? null]), [[seq, null], [seq, [k]]], trace());
    } finally { await rl.close(); }
  }
});

test('a lost or refused amendment is no sync failure: its request is admitted by the next batch', async () => {
  const c = await coordinator();
  for (const [what, fail] of [
    ['unreachable', () => { throw new TypeError('fetch failed (test)'); }],
    ['503', () => problem(503, 'about:blank')],
    ['409', () => problem(409, 'urn:edgelimit:problem:seq_conflict')],
    ['400 clock_skew', () => problem(400, 'urn:edgelimit:problem:clock_skew')],
  ]) {
    const sent = [];
    const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, syncInterval: 60000,
      fetch: far(sent, { hook: (s) => (s.ak !== undefined ? fail() : null) }) });
    try {
      const r = await heldDuringBatch(rl, sent, `lost-${what}-a`, `lost-${what}-b`);
      assert.equal(r.d.success, true, `${what}: ${JSON.stringify(r.d)}, ${rl.lastError}`);
      assert.deepEqual(r.sent.map((s) => [s.seq, s.ak !== undefined]), [[1, false], [1, true], [2, false]], what);
      const st = rl.stats();
      assert.deepEqual([st.amendments, st.syncErrors, st.failures, st.reincarnations, rl.lastError], [1, 0, 0, 0, null], what);
    } finally { await rl.close(); }
  }
});

test('a batch sent again after a failed attempt is no new cut: it asks for nothing a request held since needs', async () => {
  const c = await coordinator();
  const sent = [];
  let down = true;
  const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, syncInterval: 60000,
    fetch: far(sent, { hook: () => (down ? new Response('down', { status: 503 }) : null) }) });
  try {
    const a = rl.limit({ limiter: 's', key: 'resend-a' }); // held: batch 1 asks for it, and fails
    await until(() => sent.length >= 1 && !rl._inflight, 'the first attempt failed');
    await a;
    const cuts = rl._cuts;
    down = false;
    assert.equal(await rl._sync(), true, `the resend: ${rl.lastError}`);
    assert.deepEqual(sent.map((s) => [s.seq, s.ak !== undefined]), [[1, false], [1, false]]);
    assert.equal(rl._cuts, cuts, 'the resend counted as a cut');
  } finally { await rl.close(); }
});
