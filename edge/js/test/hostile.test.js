// What a careless user or a broken coordinator could do to an isolate, each
// found by trying it: refused at once with a clear error, or bounded.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeLimit, EdgeLimitError } from '../src/index.js';
import { MAX_REPLY_BYTES } from '../src/replybody.js';
import { wasmModule, fakeClock, problem } from './helpers.js';
import { startCoordinator, globalView } from './coordinator.js';

const coords = [];
after(async () => { for (const c of coords) await c.stop(); });

const cfg = (extra = {}) => ({ limiters: [{ name: 'api', algorithm: 'fixed_window', limit: 10, period: '1s', ...extra }] });
const utf8Len = (s) => new TextEncoder().encode(s).length;

async function refuses(fn, code, re) {
  let err;
  try { await fn(); } catch (e) { err = e; }
  assert.ok(err instanceof EdgeLimitError, `want an EdgeLimitError ${code}, got ${err?.name}: ${err?.message ?? 'no error'}`);
  assert.equal(err.code, code, err.message);
  if (re) assert.match(err.message, re);
  return err;
}

test('create() refuses what could only fail later without a word', async () => {
  const ok = { wasm: wasmModule, config: cfg(), coordinator: 'http://127.0.0.1:1' };
  // Tokens fetch cannot send (past Latin-1) or sends altered; the message
  // names the position, not the token.
  for (const [token, re] of [['secr€t', /character 5 of 6 is U\+20ac/], ['two words', /character 4 of 9 is U\+0020/], ['secret\n', /character 7 of 7 is U\+000a/]]) {
    const e = await refuses(() => EdgeLimit.create({ ...ok, token }), 'bad_options', re);
    assert.ok(!e.message.includes(token.slice(0, 5)), e.message);
  }
  await EdgeLimit.create({ ...ok, token: 'Aa0-._~+/=' });
  await refuses(() => EdgeLimit.create({ ...ok, coordinator: 'http://user:pass@127.0.0.1:1' }), 'bad_options', /option coordinator: the URL takes no user or password/);
  // Without a coordinator (an unset Workers variable), strict and
  // read-through limiters would deny every request with syncRetry.
  for (const coordinator of [undefined, '', null]) {
    await refuses(() => EdgeLimit.create({ wasm: wasmModule, config: cfg({ mode: 'strict' }), coordinator }), 'bad_config', /limiters\[0\]\.mode: strict admits only within leases from a coordinator/);
    await refuses(() => EdgeLimit.create({ wasm: wasmModule, config: cfg({ mode: 'approximate', read_through: true }), coordinator }), 'bad_config', /limiters\[0\]\.read_through/);
  }
  const alone = await EdgeLimit.create({ wasm: wasmModule, config: cfg(), clock: fakeClock() });
  let n = 0;
  for (let i = 0; i < 15; i++) if (alone.decide({ key: 'k' }).success) n++;
  assert.equal(n, 10, 'an auto limiter alone runs approximate: its limit per window');
});

test('wait() refuses a minSleepMs or signal it cannot use, instead of spinning past maxWaitMs', async () => {
  const rl = await EdgeLimit.create({ wasm: wasmModule, config: cfg({ limit: 1, period: '1h' }), clock: fakeClock() });
  assert.equal(rl.decide({ key: 'k' }).success, true);
  for (const minSleepMs of [NaN, 'abc', -1, Infinity]) {
    await refuses(() => rl.wait({ key: 'k', maxWaitMs: 100, minSleepMs }), 'bad_input', /wait: minSleepMs must be a number of ms/);
  }
  await refuses(() => rl.wait({ key: 'k', maxWaitMs: 100, signal: 5 }), 'bad_input', /wait: signal must be an AbortSignal/);
  const d = await rl.wait({ key: 'k', maxWaitMs: 100, minSleepMs: 0 });
  assert.equal(d.success, false, 'no slot for an hour: the denial at once');
});

test('a key the module would refuse is refused on a stale view too (bad_key), whatever the fail policy', async () => {
  for (const failPolicy of ['closed', 'local-share', 'open']) {
    // A coordinator that never answers: the view is stale at once.
    const rl = await EdgeLimit.create({ wasm: wasmModule, config: cfg(), coordinator: 'http://coordinator.test', failPolicy, background: 'requests', staleAfter: 1,
      fetch: async () => { throw new TypeError('fetch failed'); } });
    rl.decide({ key: 'k' });
    assert.equal(await rl.sync(), false);
    await new Promise((r) => setTimeout(r, 5));
    assert.equal(rl.stats().stale, true, failPolicy);
    for (const key of ['', 42, {}, null, new Uint8Array(300 * 1024), 'x'.repeat(257)]) {
      await refuses(() => rl.decide({ key }), 'bad_key', /key must be/);
    }
    assert.equal(typeof rl.decide({ key: 'k' }).success, 'boolean');
  }
});

test('observe() and reset() after close() are refused (nothing would sync what they change)', async () => {
  const rl = await EdgeLimit.create({ wasm: wasmModule, config: cfg(), clock: fakeClock() });
  rl.decide({ key: 'k' });
  await rl.close();
  await refuses(() => rl.observe({ key: 'k', status: 429 }), 'closed', /observe: the limiter is closed/);
  await refuses(() => rl.reset({ key: 'k' }), 'closed', /reset: the limiter is closed/);
});

test('an isolate id of multi-byte characters still reincarnates within 128 bytes', async () => {
  const coord = await startCoordinator(cfg({ mode: 'approximate' }));
  coords.push(coord);
  let refused = false;
  const isolateId = 'é'.repeat(64); // 128 bytes
  const rl = await EdgeLimit.create({ wasm: wasmModule, config: cfg({ mode: 'approximate' }), coordinator: coord.url, isolateId, background: 'requests',
    fetch: async (url, init) => {
      // The coordinator lost this isolate's state once: 409 on its first batch.
      if (init?.method === 'POST' && !refused) { refused = true; return problem(409, 'urn:edgelimit:problem:seq_gap'); }
      return fetch(url, init);
    } });
  assert.equal(rl.decide({ key: 'k' }).success, true);
  assert.equal(await rl.sync(), true, rl.lastError?.message);
  assert.equal(rl.counters.reincarnations, 1);
  assert.ok(utf8Len(rl.isolateId) <= 128, `${utf8Len(rl.isolateId)} bytes`);
  assert.match(rl.isolateId, /^(é)+~[0-9a-f]{12}$/);
  assert.equal(rl.isolateId.length, 57 + 13, 'the base cut at a character: 57 é (114 bytes) and ~ with 12 hex digits');
});

test('a reply larger than any coordinator sends is not read past the bound', async () => {
  let pulled = 0;
  const chunk = new Uint8Array(1 << 20);
  const rl = await EdgeLimit.create({ wasm: wasmModule, config: cfg({ mode: 'approximate' }), coordinator: 'http://coordinator.test', background: 'requests',
    fetch: async () => new Response(new ReadableStream({
      pull(c) { pulled += chunk.length; c.enqueue(chunk); }, // endless
    }), { status: 200 }) });
  rl.decide({ key: 'k' });
  assert.equal(await rl.sync(), false);
  assert.equal(rl.lastError.code, 'sync');
  assert.match(rl.lastError.message, new RegExp(`reply larger than ${MAX_REPLY_BYTES} bytes`));
  assert.ok(pulled <= MAX_REPLY_BYTES + 3 * chunk.length, `${pulled} bytes pulled`);
  // Said by its length too, without reading it.
  const told = await EdgeLimit.create({ wasm: wasmModule, config: cfg({ mode: 'approximate' }), coordinator: 'http://coordinator.test', background: 'requests',
    fetch: async () => new Response(new Uint8Array(1), { status: 500, headers: { 'Content-Length': String(2 ** 31) } }) });
  told.decide({ key: 'k' });
  assert.equal(await told.sync(), false);
  assert.match(told.lastError.message, /reply larger than/);
  // The decisions go on.
  assert.equal(rl.decide({ key: 'k' }).success, true);
});

test('a coordinator naming other uncounted limiters at every reply fills neither the log nor the memory', async (t) => {
  const coord = await startCoordinator(cfg({ mode: 'approximate' }));
  coords.push(coord);
  const warned = [];
  t.mock.method(console, 'warn', (m) => warned.push(m));
  let n = 0;
  const rl = await EdgeLimit.create({ wasm: wasmModule, config: cfg({ mode: 'approximate' }), coordinator: coord.url, background: 'requests',
    fetch: async (url, init) => {
      const r = await fetch(url, init);
      if (init?.method !== 'POST') return r;
      const h = new Headers(r.headers);
      h.set('Edgelimit-Uncounted', `l${n++}-${'x'.repeat(4000)}`);
      return new Response(await r.arrayBuffer(), { status: r.status, headers: h });
    } });
  for (let i = 0; i < 40; i++) {
    rl.decide({ key: `k${i}` });
    assert.equal(await rl.sync(), true, rl.lastError?.message);
  }
  assert.equal(n, 40);
  assert.equal(warned.length, 17, '16 lists said, then once that no more are');
  assert.ok(warned.every((m) => m.length < 700), 'each list cut to 512 characters');
  assert.match(warned[16], /more than 16 lists/);
});

test('a coordinator URL that answers a redirect is refused naming it, and the batch is not posted there', async (t) => {
  const errors = [];
  t.mock.method(console, 'error', (m) => errors.push(m));
  let followed = 0;
  const { createServer } = await import('node:http');
  const target = createServer((req, res) => { followed++; res.end(); });
  let to = '';
  const proxy = createServer((req, res) => { res.writeHead(307, { Location: `${to}${req.url}` }); res.end(); });
  await Promise.all([new Promise((r) => target.listen(0, '127.0.0.1', r)), new Promise((r) => proxy.listen(0, '127.0.0.1', r))]);
  to = `http://127.0.0.1:${target.address().port}`;
  try {
    const rl = await EdgeLimit.create({ wasm: wasmModule, config: cfg({ mode: 'approximate' }), coordinator: `http://127.0.0.1:${proxy.address().port}`, background: 'requests' });
    rl.decide({ key: 'k' });
    assert.equal(await rl.sync(), false);
    assert.equal(rl.lastError.code, 'sync_refused');
    assert.match(rl.lastError.message, new RegExp(`answered 307, a redirect to "${to}/v1/sync", which the sync does not follow`));
    assert.equal(errors.length, 1, 'said on the console once, as a wrong token is');
    await rl.close();
  } finally {
    target.close();
    proxy.close();
  }
  assert.equal(followed, 0);
});

test('a 200 answer that is a web page is refused naming it, and the batch goes on to the next coordinator', async () => {
  const coord = await startCoordinator(cfg({ mode: 'approximate' }));
  coords.push(coord);
  const portal = 'http://portal.test';
  let portalPosts = 0;
  const rl = await EdgeLimit.create({ wasm: wasmModule, config: cfg({ mode: 'approximate' }), coordinator: [portal, coord.url], background: 'requests', isolateId: 'page-a',
    fetch: async (url, init) => {
      if (!String(url).startsWith(portal)) return fetch(url, init);
      if (init?.method === 'POST') portalPosts++;
      return new Response('<!DOCTYPE html><html><body>Sign in to the hotel Wi-Fi</body></html>', { status: 200, headers: { 'Content-Type': 'text/html; charset=utf-8' } });
    } });
  rl.decide({ key: 'k' });
  assert.equal(await rl.sync(), true, rl.lastError?.message);
  assert.ok(portalPosts >= 1, 'the batch was tried at the portal first');
  const { body } = await globalView(coord.url, 'api', 'k');
  assert.equal(body.count, 1, 'the coordinator after the portal counted the request');
  // Alone behind the portal: the error says what answered.
  const alone = await EdgeLimit.create({ wasm: wasmModule, config: cfg({ mode: 'approximate' }), coordinator: portal, background: 'requests',
    fetch: async () => new Response('<html>Sign in to the hotel Wi-Fi</html>', { status: 200, headers: { 'Content-Type': 'text/html' } }) });
  alone.decide({ key: 'k' });
  assert.equal(await alone.sync(), false);
  assert.equal(alone.lastError.code, 'sync_refused');
  assert.match(alone.lastError.message, /answered 200 with Content-Type "text\/html", a web page, not the coordinator's msgpack reply.*hotel Wi-Fi/);
  await rl.close();
});

test('times no clock gives in the Edgelimit-Time header move nothing, even when two agree', async () => {
  for (const bad of ['9223372036854775807', '-9223372036854775808', '-1', '5000000000000000000']) {
    const coord = await startCoordinator(cfg({ mode: 'strict' }));
    coords.push(coord);
    let garbled = 2; // the first two replies carry it (a broken proxy's constant)
    const rl = await EdgeLimit.create({ wasm: wasmModule, config: cfg({ mode: 'strict' }), coordinator: coord.url, background: 'requests',
      fetch: async (url, init) => {
        const r = await fetch(url, init);
        if (init?.method !== 'POST' || garbled-- <= 0) return r;
        const h = new Headers(r.headers);
        h.set('Edgelimit-Time', bad);
        return new Response(await r.arrayBuffer(), { status: r.status, headers: h });
      } });
    let ok = 0;
    for (let i = 0; i < 8; i++) {
      const d = await rl.limit({ key: `k${i}` }, { waitUntil() {} }); // one each: within the limit of 10
      if (d.success) ok++;
      await rl.sync();
    }
    assert.equal(rl.counters.clockSteps, 0, `${bad}: the offset moved`);
    assert.equal(ok, 8, `${bad}: ${ok} of 8 admitted after two replies said it (a wedged clock refuses every decision)`);
    await rl.close();
  }
});
