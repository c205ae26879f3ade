// Isolates listing several coordinators spread over them by their ids,
// fail over, and return to their own coordinator once it answers again.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeLimit, preferredIndex } from '../src/index.js';
import { wasmModule, hangUntilAborted, problem } from './helpers.js';
import { decode } from '../src/msgpack.js';
import { startCoordinator } from './coordinator.js';

const coords = [];
after(async () => { for (const c of coords) await c.stop(); });

test('preferredIndex is the Go host\'s syncloop.Preferred (FNV-1a 64 mod n)', () => {
  // The same vectors as edge/syncloop/spread_test.go.
  const vectors = [['', 3, 0], ['a', 1, 0], ['a', 2, 0], ['edge-0', 2, 1], ['edge-1', 2, 0], ['edge-2', 3, 0],
    ['js-0123456789ab', 5, 4], ['isolate-7', 3, 0]];
  for (const [id, n, want] of vectors) assert.equal(preferredIndex(id, n), want, `preferredIndex(${JSON.stringify(id)}, ${n})`);
});

test('isolates spread over two coordinators, move off a failing one and return after it recovers', async () => {
  const config = { limiters: [{ name: 'a', algorithm: 'fixed_window', limit: 100000, period: '1m', mode: 'approximate' }] };
  const c = await startCoordinator(config);
  coords.push(c);
  // Two URLs of one coordinator (one store, as coordinators sharing Redis):
  // 127.0.0.1 and localhost; a is made to fail by the fetch below.
  const port = new URL(c.url).port;
  const urls = [`http://127.0.0.1:${port}`, `http://localhost:${port}`];
  let aDown = false;
  const hits = [0, 0];
  const spy = (url, init) => {
    const i = url.startsWith(urls[0]) ? 0 : 1;
    if (i === 0 && aDown) return Promise.reject(new TypeError('fetch failed: connection refused'));
    hits[i]++;
    return fetch(url, init);
  };
  const ids = Array.from({ length: 12 }, (_, i) => `spread-${i}`);
  const want = ids.map((id) => preferredIndex(id, 2));
  assert.ok(want.includes(0) && want.includes(1), `all ids prefer one coordinator: ${want}`);
  const isolates = await Promise.all(ids.map((isolateId) => EdgeLimit.create({
    wasm: wasmModule, config, coordinator: urls, fetch: spy, background: 'requests', isolateId, syncInterval: 60000,
  })));
  const syncAll = async () => {
    for (const rl of isolates) {
      rl.decide({ limiter: 'a', key: 'k' });
      rl._sched.next = 0;
      assert.equal(await rl.sync(), true, String(rl.lastError));
    }
  };
  try {
    for (const rl of isolates) rl._returnAfter = 50;
    await syncAll();
    const onA = want.filter((w) => w === 0).length;
    assert.deepEqual(hits, [onA, ids.length - onA], 'each isolate syncs to its own coordinator');
    isolates.forEach((rl, i) => assert.equal(rl._coordinator, urls[want[i]]));
    // a fails: its isolates move to b (one failover each) and stay there.
    aDown = true;
    await syncAll();
    await syncAll();
    isolates.forEach((rl, i) => {
      assert.equal(rl._coordinator, urls[1], `isolate ${i} on b`);
      assert.equal(rl.counters.failovers, want[i] === 0 ? 1 : 0);
    });
    // a recovers: past the wait, its isolates return to it.
    aDown = false;
    await new Promise((r) => setTimeout(r, 60));
    const before = hits[0];
    await syncAll();
    isolates.forEach((rl, i) => assert.equal(rl._coordinator, urls[want[i]], `isolate ${i} back on its own`));
    assert.equal(hits[0] - before, onA);
    isolates.forEach((rl, i) => assert.equal(rl.counters.failovers, want[i] === 0 ? 1 : 0, 'a return is no failover'));
  } finally { for (const rl of isolates) rl.close(); }
});

test('a return try to a preferred coordinator that hangs waits the return timeout, and the sync goes to the one in use', async () => {
  const config = { limiters: [{ name: 'a', algorithm: 'fixed_window', limit: 100000, period: '1m', mode: 'approximate' }] };
  const c = await startCoordinator(config);
  coords.push(c);
  const port = new URL(c.url).port;
  const urls = [`http://127.0.0.1:${port}`, `http://localhost:${port}`];
  const isolateId = Array.from({ length: 64 }, (_, i) => `hang-${i}`).find((id) => preferredIndex(id, 2) === 0);
  let aHangs = false;
  // a hangs (as a coordinator stopped with SIGSTOP): its POSTs end only when aborted.
  const spy = (url, init) => (url.startsWith(urls[0]) && aHangs
    ? hangUntilAborted(init)
    : fetch(url, init));
  const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: urls, fetch: spy, background: 'requests',
    isolateId, syncInterval: 60000, syncTimeout: 2000 });
  try {
    rl._returnAfter = 20;
    aHangs = true;
    rl.decide({ limiter: 'a', key: 'k' });
    assert.equal(await rl.sync(), true, String(rl.lastError)); // a times out (2 s): moves to b
    assert.equal(rl._coordinator, urls[1]);
    await new Promise((r) => setTimeout(r, 30)); // a return try is due
    rl.decide({ limiter: 'a', key: 'k' });
    const t0 = Date.now();
    assert.equal(await rl.sync(), true, String(rl.lastError));
    const took = Date.now() - t0;
    console.log(`# a sync with a return try to a hung coordinator took ${took} ms (return timeout 250 ms, sync timeout 2000 ms)`);
    assert.ok(took < 1000, `the return try waited ${took} ms: want the return timeout (250 ms), not the sync timeout`);
    assert.equal(rl._coordinator, urls[1], 'still on b');
  } finally { rl.close(); }
});

// A batch answered by its amendment's reply (a request held for a strict
// lease amended it) whose own POST fails afterwards (here a 503, 300 ms
// after the coordinator took it): the sync succeeded, so the isolate stays
// with its coordinator and sends the batch nowhere else. Before, the
// failed POST of the ended attempt moved the isolate to the next
// coordinator (7-10 failovers in 7 s per isolate, in both modes), as the
// Go host's loop did for an attempt its amendment's reply ended.
for (const background of ['requests', 'timers']) {
  test(`${background}: a batch answered by its amendment's reply moves no isolate when its own POST then fails`, { timeout: 30000 }, async () => {
    const config = { limiters: [{ name: 's', algorithm: 'fixed_window', limit: 400, period: '1s', mode: 'strict', fail_policy: 'open' }] };
    const c = await startCoordinator(config);
    coords.push(c);
    const port = new URL(c.url).port;
    const urls = [`http://127.0.0.1:${port}`, `http://localhost:${port}`];
    const isolateId = Array.from({ length: 64 }, (_, i) => `amended-${background}-${i}`).find((id) => preferredIndex(id, 2) === 0);
    const amended = new Set(); // the sequence numbers of the batches an amendment of which a answered
    let answered = 0; // batches answered by their amendment whose own POST then failed
    const spy = async (url, init) => {
      if (!init?.body || !url.startsWith(urls[0])) return fetch(url, init);
      const b = decode(init.body);
      const r = await fetch(url, init);
      const body = await r.arrayBuffer();
      if (b.ak !== undefined) amended.add(b.seq);
      else {
        await new Promise((res) => setTimeout(res, 300));
        if (amended.has(b.seq)) { answered++; return problem(503, 'urn:edgelimit:problem:unavailable'); }
      }
      return new Response(body, { status: r.status, headers: r.headers });
    };
    const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: urls, fetch: spy, background, isolateId });
    const ctx = { waitUntil: (p) => p?.catch?.(() => {}) };
    try {
      const t0 = Date.now();
      await Promise.all(Array.from({ length: 8 }, async () => {
        while (Date.now() - t0 < 3000 && answered < 5) {
          await rl.limit({ limiter: 's', key: 'k' }, ctx);
          await new Promise((r) => setTimeout(r, 5));
        }
      }));
      console.log(`# ${background}: ${rl.counters.amendments} amendments, ${answered} batches answered by one failed on their own POST, ${rl.counters.failovers} failovers`);
      assert.ok(answered > 0, 'no batch was answered by its amendment: the test tests nothing');
      assert.equal(rl.counters.failovers, 0, 'failovers');
      assert.equal(rl._coordinator, urls[0], 'still on its own coordinator');
    } finally { await rl.close(); }
  });
}
