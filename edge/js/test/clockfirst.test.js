// The isolate's first limit() on approximate limiters alone decides at once,
// on the isolate's own clock, while its reading of the coordinator's time
// (GET /healthz) runs beside it; no batch is cut before that reading
// settled. Against the real Go coordinator on loopback, behind a proxy
// that holds /healthz until the test releases it. strict, mixed and
// wait() still wait for the reading (clock.test.js: strict on a skewed
// clock).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { EdgeLimit } from '../src/index.js';
import { wasmModule, offBoundary } from './helpers.js';
import { startCoordinator, globalView } from './coordinator.js';

const coords = [];
const proxies = [];
after(async () => {
  for (const p of proxies) p.close();
  for (const c of coords) await c.stop();
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const config = {
  limiters: [
    { name: 'a', algorithm: 'fixed_window', limit: 100, period: '1s', mode: 'approximate' },
    { name: 's', algorithm: 'fixed_window', limit: 100, period: '1s', mode: 'strict' },
  ],
};

// A loopback proxy to the coordinator at target that holds GET /healthz
// until release(); it records the status of every POST /v1/sync answer
// and counts the syncs that came while /healthz was held.
async function holdingProxy(target) {
  const t = new URL(target);
  let released = false;
  const held = [];
  const syncs = [];
  const st = { syncsWhileHeld: 0 };
  const forward = (req, res, body) => {
    const up = http.request({ host: t.hostname, port: t.port, method: req.method, path: req.url, headers: req.headers }, (ur) => {
      if (req.url === '/v1/sync') syncs.push(ur.statusCode);
      res.writeHead(ur.statusCode, ur.headers);
      ur.pipe(res);
    });
    up.on('error', () => res.destroy());
    up.end(body);
  };
  const srv = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (req.url === '/v1/sync' && !released) st.syncsWhileHeld++;
      if (req.url === '/healthz' && !released) { held.push(() => forward(req, res, body)); return; }
      forward(req, res, body);
    });
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const p = {
    url: `http://127.0.0.1:${srv.address().port}`,
    syncs,
    st,
    held: () => held.length,
    release() { released = true; for (const f of held.splice(0)) f(); },
    close() { srv.closeAllConnections(); srv.close(); },
  };
  proxies.push(p);
  return p;
}

// A limiter behind a holding proxy, whose fetch records how each
// GET /healthz ended: readings[i] resolves to true when its answer came,
// false when it failed (aborted at its bound).
async function setup(background, clock) {
  const c = await startCoordinator(config); coords.push(c);
  const proxy = await holdingProxy(c.url);
  const readings = [];
  const rl = await EdgeLimit.create({
    wasm: wasmModule, config, coordinator: proxy.url, background, clock,
    fetch: (url, init) => {
      const p = fetch(url, init);
      if (String(url).endsWith('/healthz')) readings.push(p.then((r) => r.ok, () => false));
      return p;
    },
  });
  rl.ready(); // the module's instantiation is not part of the first limit()
  const ctx = { waitUntil(p) { p?.catch?.(() => {}); } };
  return { c, proxy, readings, rl, ctx };
}

for (const background of ['timers', 'requests']) {
  // A limit() that waited for the reading would resolve only at the
  // reading's 1 s bound, its GET /healthz aborted: readings[0] false.
  test(`background ${background}: the first approximate limit() resolves before the /healthz answer, and no batch is cut before it`, async () => {
    const { c, proxy, readings, rl, ctx } = await setup(background);
    try {
      const d = await rl.limit({ limiter: 'a', key: 'first' }, ctx);
      assert.equal(d.success, true);
      while (proxy.held() === 0) await sleep(5); // the reading, on its way to the proxy
      // Three sync intervals of traffic with the reading held: the syncs
      // due meanwhile wait for it.
      for (let i = 0; i < 6; i++) { assert.equal((await rl.limit({ limiter: 'a', key: 'first' }, ctx)).success, true); await sleep(50); }
      assert.equal(proxy.st.syncsWhileHeld, 0, 'a batch was sent before the reading settled');
      proxy.release();
      assert.equal(await readings[0], true, 'the reading was abandoned: limit() waited for it');
      assert.equal(await rl.sync(), true, `sync failed: ${rl.lastError?.message}`);
      const { body } = await globalView(c.url, 'a', 'first');
      console.log(`# ${background}: 7 approximate requests decided with /healthz held; syncs after its release ${JSON.stringify(proxy.syncs)}; coordinator count+prev ${body.count + body.prev}`);
      assert.ok(proxy.syncs.length >= 1 && proxy.syncs.every((s) => s === 200), `sync answers ${proxy.syncs}`);
      assert.equal(body.count + body.prev, 7);
    } finally { await rl.close(); }
  });

  // Decided on a clock 3 s ahead, the requests fall in a 1 s window 3
  // windows past the coordinator's (3 s behind: 3 before it); their first
  // batch is cut after the reading, at the coordinator's time, with them
  // moved there: accepted (ahead, it named a window past the skew: 400
  // clock_skew) and counted whole (behind, as stale: not counted).
  for (const off of [3000, -3000]) test(`background ${background}, clock ${off > 0 ? '+' : ''}${off / 1000} s: approximate traffic is admitted and its first batch accepted and counted`, async () => {
    const { c, proxy, readings, rl, ctx } = await setup(background, () => Date.now() + off);
    try {
      await offBoundary();
      let admitted = 0;
      for (let i = 0; i < 10; i++) {
        if ((await rl.limit({ limiter: 'a', key: 'ahead' }, ctx)).success) admitted++;
        await sleep(25);
      }
      assert.equal(proxy.st.syncsWhileHeld, 0, 'a batch was sent before the reading settled');
      proxy.release();
      assert.equal(await readings[0], true);
      assert.equal(await rl.sync(), true, `sync failed: ${rl.lastError?.message}`);
      for (let i = 0; i < 5; i++) if ((await rl.limit({ limiter: 'a', key: 'ahead' }, ctx)).success) admitted++;
      assert.equal(await rl.sync(), true, `sync failed: ${rl.lastError?.message}`);
      const { body } = await globalView(c.url, 'a', 'ahead');
      console.log(`# ${background}, clock ${off} ms: ${admitted} of 15 admitted; sync answers ${JSON.stringify(proxy.syncs)}; clockSteps ${rl.counters.clockSteps}; coordinator count+prev ${body.count + body.prev}; reported again ${rl.stats().reported_again}; lastError ${rl.lastError?.message ?? 'none'}`);
      assert.equal(admitted, 15);
      // The held reading's bracket spans the hold: the first sync answer may move the offset again, by less.
      assert.ok(rl.counters.clockSteps >= 1, 'the reading did not move the clock');
      assert.ok(proxy.syncs.length >= 1, 'no batch sent');
      assert.deepEqual(proxy.syncs.filter((s) => s !== 200), [], 'a batch was refused (400: clock_skew)');
      assert.equal(rl.counters.syncErrors, 0, rl.lastError?.message);
      // A step of the first sync answer with the batch in flight that
      // moves its units to the next window (a slow run crosses one) reports
      // them again there: counted twice, on the denying side.
      const again = Number(rl.stats().reported_again);
      assert.equal(body.count + body.prev, 15 + again, `the coordinator counts every admitted request (${again} reported again)`);
    } finally { await rl.close(); }
  });
}

// A first decision that checks a leased limiter, alone or with an
// approximate one, and a first wait(), wait for the reading: none has
// resolved, nor been decided, while /healthz is held.
for (const [name, call] of [
  ['strict limit()', (rl, ctx) => rl.limit({ limiter: 's', key: 'w' }, ctx)],
  ['mixed limit() (approximate and strict)', (rl, ctx) => rl.limit({ checks: [{ limiter: 'a', key: 'w' }, { limiter: 's', key: 'w' }] }, ctx)],
  ['approximate wait()', (rl, ctx) => rl.wait({ limiter: 'a', key: 'w' }, ctx)],
]) {
  test(`the first ${name} waits for the reading of the coordinator's time`, async () => {
    const { proxy, readings, rl, ctx } = await setup('timers');
    try {
      let resolved = false;
      const p = call(rl, ctx).then((d) => { resolved = true; return d; });
      await sleep(200);
      assert.equal(resolved, false, `${name} resolved with /healthz held`);
      assert.equal(rl.stats().decisions, 0, `${name} decided with /healthz held`);
      assert.equal(proxy.held(), 1);
      proxy.release();
      assert.equal(await readings[0], true);
      assert.equal((await p).success, true);
    } finally { await rl.close(); }
  });
}

// close() right after the first approximate limit(), on a clock 3 s
// ahead: its last batch waits for the reading too, and is accepted.
test('close() before the reading settled: its batch waits for the reading and is accepted (clock +3 s)', async () => {
  const { c, proxy, readings, rl, ctx } = await setup('timers', () => Date.now() + 3000);
  await offBoundary();
  for (let i = 0; i < 3; i++) assert.equal((await rl.limit({ limiter: 'a', key: 'closing' }, ctx)).success, true);
  const closed = rl.close();
  while (proxy.held() === 0) await sleep(5);
  await sleep(100);
  assert.equal(proxy.st.syncsWhileHeld, 0, 'close() sent a batch before the reading settled');
  proxy.release();
  assert.equal(await readings[0], true);
  assert.equal(await closed, true, `close: ${rl.lastError?.message}`);
  const { body } = await globalView(c.url, 'a', 'closing');
  assert.deepEqual(proxy.syncs.filter((s) => s !== 200), [], 'a batch was refused (400: clock_skew)');
  assert.equal(body.count + body.prev, 3);
});

// A reading that never comes (held past its 1 s bound): the first batch
// is cut once the bound passed, on the isolate's own clock, and accepted
// (the clock is right).
test('a reading that never comes holds the first batch back for its bound only', async () => {
  const { proxy, readings, rl, ctx } = await setup('timers');
  try {
    assert.equal((await rl.limit({ limiter: 'a', key: 'never' }, ctx)).success, true);
    assert.equal(await rl.sync(), true, `sync failed: ${rl.lastError?.message}`);
    assert.equal(await readings[0], false, 'the reading was not abandoned at its bound');
    assert.ok(proxy.syncs.length >= 1 && proxy.syncs.every((s) => s === 200), `sync answers ${proxy.syncs}`);
    assert.equal(rl.counters.abandoned, 0);
  } finally { await rl.close(); proxy.release(); }
});
