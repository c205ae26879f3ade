// Sync from JavaScript against the real Go coordinator on loopback.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeLimit } from '../src/index.js';
import { decode, encode } from '../src/msgpack.js';
import { wasmModule, fakeClock } from './helpers.js';
import { startCoordinator, globalView, freePort } from './coordinator.js';

const coords = [];
after(async () => { for (const c of coords) await c.stop(); });
async function coordinator(cfg) { const c = await startCoordinator(cfg); coords.push(c); return c; }

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

test('strict mode: a SyncRetry decision waits for a lease and is decided again', async () => {
  const config = { limiters: [{ name: 's', algorithm: 'fixed_window', limit: 10, period: '10s', mode: 'strict' }] };
  const c = await coordinator(config);
  const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, syncInterval: 50 });
  try {
    const first = rl.decide({ limiter: 's', key: 'k' });
    assert.equal(first.success, false, 'no lease before the first sync');
    assert.equal(first.syncRetry, true);
    const d = await rl.limit({ limiter: 's', key: 'k' });
    assert.equal(d.success, true, `limit() waited for the lease: ${JSON.stringify(d)}, ${rl.lastError}`);
    assert.ok(rl.counters.syncs >= 1);
  } finally { rl.close(); }
});

test('several isolates at 3x a strict limit never admit more than the limit per window', async () => {
  const limit = 30;
  const config = { limiters: [{ name: 's', algorithm: 'fixed_window', limit, period: '1s', mode: 'strict' }] };
  const c = await coordinator(config);
  const isolates = await Promise.all([0, 1, 2, 3].map(() => EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, syncInterval: 50 })));
  const perWindow = new Map();
  // 90 requests/s for 3.5 s, round robin over the isolates, one every ~11 ms.
  const end = Date.now() + 3500;
  let n = 0;
  while (Date.now() < end) {
    const rl = isolates[n++ % isolates.length];
    const d = await rl.limit({ limiter: 's', key: 'shared' });
    // The decision's own window (period 1 s), not the clock after the await.
    if (d.success) { const w = Math.round(d.reset / 1000) - 1; perWindow.set(w, (perWindow.get(w) ?? 0) + 1); }
    await sleep(11);
  }
  for (const rl of isolates) { await rl.sync(); rl.close(); }
  const over = [...perWindow].filter(([, v]) => v > limit);
  assert.deepEqual(over, [], `windows over the limit: ${JSON.stringify([...perWindow])}`);
  const total = [...perWindow.values()].reduce((a, b) => a + b, 0);
  assert.ok(total >= limit, `strict mode admitted something in several windows: ${JSON.stringify([...perWindow])}`);
});

test('a retried batch keeps its sequence number and is counted once', async () => {
  const config = { limiters: [{ name: 'a', algorithm: 'fixed_window', limit: 1000, period: '1m', mode: 'approximate' }] };
  const c = await coordinator(config);
  const sent = [];
  let dropNextReply = true;
  const flaky = async (url, init) => {
    if (!init?.body) return fetch(url, init); // the reading of the coordinator's time
    sent.push(decode(init.body));
    const r = await fetch(url, init);
    if (dropNextReply) { dropNextReply = false; await r.arrayBuffer(); throw new Error('connection reset (test)'); }
    return r;
  };
  const clock = () => Date.now();
  const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, fetch: flaky, clock, background: 'requests' });
  for (let i = 0; i < 7; i++) rl.decide({ limiter: 'a', key: 'k' });
  assert.equal(await rl.sync(), false, 'the first attempt lost its reply');
  assert.match(String(rl.lastError), /connection reset/);
  rl._sched.next = 0; // retry now rather than after the backoff
  assert.equal(await rl.sync(), true, String(rl.lastError));
  assert.equal(sent.length, 2);
  assert.equal(sent[0].seq, sent[1].seq, 'the retry reuses the sequence number');
  assert.deepEqual(sent[0].e, sent[1].e);
  const v = await globalView(c.url, 'a', 'k');
  assert.equal(v.body.count, 7, 'applied once');
});

test('a coordinator that lost the isolate (409 seq problem) gets the deltas under a new incarnation', async () => {
  const config = { limiters: [{ name: 'a', algorithm: 'fixed_window', limit: 1000, period: '1m', mode: 'approximate' }] };
  const c1 = await coordinator(config);
  let target = c1.url;
  const secrets = [];
  const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: 'http://unused', background: 'requests',
    fetch: (u, i) => { if (i?.body) secrets.push(decode(i.body).sec); return fetch(u.replace('http://unused', target), i); } });
  for (let i = 0; i < 3; i++) rl.decide({ limiter: 'a', key: 'k' });
  assert.equal(await rl.sync(), true, String(rl.lastError));
  assert.equal(await rl.sync(), true); // nothing to send: idle
  for (let i = 0; i < 3; i++) rl.decide({ limiter: 'a', key: 'k' });
  assert.equal(await rl.sync(), true);
  const id = rl.isolateId;
  // A new coordinator knows nothing of this isolate: its batch 3 is a seq_gap.
  const c2 = await coordinator(config);
  target = c2.url;
  for (let i = 0; i < 4; i++) rl.decide({ limiter: 'a', key: 'k' });
  assert.equal(await rl.sync(), true, String(rl.lastError));
  assert.equal(rl.counters.reincarnations, 1);
  assert.notEqual(rl.isolateId, id);
  assert.ok(rl.isolateId.startsWith(`${id}~`), rl.isolateId);
  assert.equal((await globalView(c2.url, 'a', 'k')).body.count, 4, 'the refused batch counted once at the new coordinator');
  // Every batch carries its incarnation's secret; the new incarnation has a new one.
  assert.ok(secrets.every((s) => /^[0-9a-f]{32}$/.test(s)), JSON.stringify(secrets));
  assert.equal(new Set(secrets.slice(0, 3)).size, 1, 'one secret per incarnation');
  assert.notEqual(secrets.at(-1), secrets[0], 'a new incarnation, a new secret');
});

test('a client that knows an isolate id but not its secret can neither continue it nor make it reincarnate', async () => {
  const config = { limiters: [{ name: 'a', algorithm: 'fixed_window', limit: 1000, period: '1m', mode: 'approximate' }] };
  const c = await coordinator(config);
  const sent = [];
  const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, background: 'requests',
    fetch: (u, i) => { if (i?.body) sent.push(decode(i.body)); return fetch(u, i); } });
  rl.decide({ limiter: 'a', key: 'k' });
  assert.equal(await rl.sync(), true, String(rl.lastError));
  const last = sent.at(-1);
  // The attacker has the id and the sequence number (the same token), not the secret.
  for (const forged of [
    { v: 1, iso: last.iso, seq: last.seq + 1, at: BigInt(Date.now()) * 1000000n, e: [['a', 'k', 0, 100, 100]] },
    { v: 1, iso: last.iso, sec: 'f'.repeat(32), seq: last.seq + 1, at: BigInt(Date.now()) * 1000000n },
  ]) {
    const r = await fetch(`${c.url}/v1/sync`, { method: 'POST', headers: { 'content-type': 'application/msgpack' }, body: encode(forged) });
    const p = await r.json();
    assert.equal(r.status, 409);
    assert.equal(p.type, 'urn:edgelimit:problem:seq_identity');
    assert.doesNotMatch(p.detail, /[0-9]/, 'no sequence number told');
  }
  rl.decide({ limiter: 'a', key: 'k' });
  assert.equal(await rl.sync(), true, String(rl.lastError));
  assert.equal(rl.counters.reincarnations, 0, 'the real isolate goes on');
  assert.equal(sent.at(-1).seq, last.seq + 1);
  assert.equal((await globalView(c.url, 'a', 'k')).body.count, 2);
});

test('fail policies on a stale view: closed denies, local-share admits its share, open asks the module', async () => {
  const port = await freePort(); // nothing listens there
  const config = { limiters: [
    { name: 'c', algorithm: 'fixed_window', limit: 100, period: '1s', fail_policy: 'closed', mode: 'approximate' },
    { name: 'l', algorithm: 'fixed_window', limit: 100, period: '1s', fail_policy: 'local-share', mode: 'approximate' },
    { name: 'o', algorithm: 'fixed_window', limit: 100, period: '1s', mode: 'approximate' },
  ] };
  const clock = fakeClock(1_800_000_000_000);
  const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: `http://127.0.0.1:${port}`, clock,
    background: 'requests', syncInterval: 100, shareIsolates: 10 });
  rl.ready();
  assert.equal(rl.decide({ limiter: 'c', key: 'k' }).success, true, 'fresh: closed does not apply');
  assert.equal(await rl.sync(), false, 'the coordinator is down');
  clock.now += 301; // past 3 sync intervals
  const d = rl.decide({ limiter: 'c', key: 'k' });
  assert.deepEqual([d.success, d.stale, d.policy, d.retryAfterMs], [false, true, 'closed', 100]);
  let admitted = 0;
  for (let i = 0; i < 30; i++) admitted += rl.decide({ limiter: 'l', key: 'k' }).success ? 1 : 0;
  assert.equal(admitted, 10, 'local-share: limit 100 / 10 isolates');
  admitted = 0;
  for (let i = 0; i < 30; i++) admitted += rl.decide({ limiter: 'o', key: 'k' }).success ? 1 : 0;
  assert.equal(admitted, 30, 'open decides from the last view');
  assert.equal(rl.stats().stale, true);
});

test('read-through: a cold key waits for one sync and is decided from the global view', async () => {
  const config = { limiters: [{ name: 'r', algorithm: 'fixed_window', limit: 5, period: '1m', read_through: true, mode: 'approximate' }] };
  const c = await coordinator(config);
  // Another isolate used up the key; this one has never seen it.
  const other = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, background: 'requests' });
  const admitted = [];
  for (let i = 0; i < 5; i++) admitted.push((await other.limit({ limiter: 'r', key: 'cold' })).success);
  assert.deepEqual(admitted, [true, true, true, true, true], 'each cold decision waited for its sync');
  assert.equal(await other.sync(), true);
  assert.equal((await globalView(c.url, 'r', 'cold')).body.count, 5);
  const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, background: 'requests' });
  assert.equal(rl.decide({ limiter: 'r', key: 'cold' }).syncRetry, true, 'a cold key asks for a sync');
  const d = await rl.limit({ limiter: 'r', key: 'cold' });
  assert.equal(d.success, false, `decided from the global view after the sync: ${JSON.stringify(d)}`);
  assert.equal(d.syncRetry, false);
});

test('a coordinator with tokens: a wrong token is refused and reported, the right one syncs', async () => {
  const config = { limiters: [{ name: 'a', algorithm: 'fixed_window', limit: 10, period: '1m', mode: 'approximate' }] };
  const c = await startCoordinator(config, ['--token', 'sesame']);
  coords.push(c);
  const errors = [];
  const bad = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, token: 'wrong', background: 'requests', onError: (e) => errors.push(e) });
  bad.decide({ limiter: 'a', key: 'k' });
  assert.equal(await bad.sync(), false);
  assert.match(errors[0]?.message ?? '', /coordinator refused the batch: 401/);
  assert.equal(errors[0].code, 'sync_refused');
  const good = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, token: 'sesame', background: 'requests' });
  good.decide({ limiter: 'a', key: 'k' });
  assert.equal(await good.sync(), true, String(good.lastError));
});

test('the module asks for an early sync and gets it, long before the interval (timers and requests)', async () => {
  const config = { limiters: [{ name: 'e', algorithm: 'fixed_window', limit: 100, period: '1m', mode: 'approximate' }] };
  const c = await coordinator(config);
  for (const background of ['timers', 'requests']) {
    const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, syncInterval: 60000, background });
    let wanted = 0;
    for (let i = 0; i < 60; i++) {
      rl.decide({ limiter: 'e', key: background });
      wanted += rl.module.resultInt(5) & 1;
    }
    assert.ok(wanted > 0, 'the module asked for a sync');
    for (let i = 0; i < 100 && rl.counters.syncs === 0; i++) await sleep(20);
    assert.ok(rl.counters.syncs >= 1, `${background}: no early sync (${rl.lastError})`);
    assert.ok((await globalView(c.url, 'e', background)).body.count > 0, `${background}: the coordinator has the early batch`);
    rl.close();
  }
});

test('a list of coordinators: a sync the first cannot take goes to the next at once, which is then kept', async () => {
  const config = { limiters: [{ name: 'a', algorithm: 'fixed_window', limit: 1000, period: '1m', mode: 'approximate' }] };
  const c = await coordinator(config);
  const dead = `http://127.0.0.1:${await freePort()}`; // nothing listens there
  const hits = [];
  const spy = (url, init) => { hits.push(url); return fetch(url, init); };
  // isolateId 'edge-1' prefers the first coordinator of two (preferredIndex).
  const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: [dead, `${c.url}/`], fetch: spy, background: 'requests', isolateId: 'edge-1' });
  try {
    for (let i = 0; i < 5; i++) rl.decide({ limiter: 'a', key: 'k' });
    assert.equal(await rl.sync(), true, String(rl.lastError));
    assert.deepEqual(hits.slice(0, 2), [`${dead}/v1/sync`, `${c.url}/v1/sync`]);
    assert.equal(rl.counters.failovers, 1);
    rl.decide({ limiter: 'a', key: 'k' });
    rl._sched.next = 0;
    assert.equal(await rl.sync(), true, String(rl.lastError));
    assert.equal(hits.at(-1), `${c.url}/v1/sync`, 'stays with the coordinator that answered');
    assert.equal(rl.counters.failovers, 1);
    assert.equal((await globalView(c.url, 'a', 'k')).body.count, 6);
  } finally { rl.close(); }
});

test('a coordinator configured with another limit: answers use its limit, and the console says so once', async () => {
  const mk = (limit) => ({ limiters: [{ name: 'l', algorithm: 'fixed_window', limit, period: '1h' }] });
  const c = await coordinator(mk(6));
  const warned = [];
  const warn = console.warn;
  console.warn = (...a) => warned.push(a.join(' '));
  const rl = await EdgeLimit.create({ wasm: wasmModule, config: mk(60), coordinator: c.url, syncInterval: 50 });
  try {
    let admitted = 0;
    let d;
    for (let i = 0; i < 12; i++) {
      d = await rl.limit({ limiter: 'l', key: 'k' });
      if (d.success) admitted++;
      await rl.sync();
    }
    assert.equal(d.limit, 6, `the answer's limit: ${JSON.stringify(d)}`);
    assert.equal(admitted, 6, 'admitted against the coordinator\'s 6');
    assert.equal(warned.filter((w) => w.includes("the coordinator's limits differ")).length, 1, warned.join('\n'));
  } finally { console.warn = warn; rl.close(); }
});
