// Every error is an EdgeLimitError with a documented code: bad options and
// configurations are refused by create() naming the option or the field's
// path, bad arguments by the call, and sync errors name the URL and cause.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { EdgeLimit, EdgeLimitError, ERROR_CODES, Module } from '../src/index.js';
import { encode, decode } from '../src/msgpack.js';
import { wasmModule, fakeClock, root, hangUntilAborted } from './helpers.js';
import { startCoordinator, freePort } from './coordinator.js';

const coords = [];
after(async () => { for (const c of coords) await c.stop(); });

const limiter = (extra = {}) => ({ name: 'api', algorithm: 'fixed_window', limit: 5, period: '1s', ...extra });
const config = (extra = {}) => ({ limiters: [limiter(extra)] });

// Asserts that fn throws (or its promise rejects with) an EdgeLimitError
// of code whose message matches re.
async function refuses(fn, code, re) {
  let err;
  try { await fn(); } catch (e) { err = e; }
  assert.ok(err instanceof EdgeLimitError, `want an EdgeLimitError ${code}, got ${err?.name}: ${err?.message ?? 'no error'}`);
  assert.equal(err.code, code, err.message);
  assert.ok(ERROR_CODES[err.code], `code ${err.code} is documented in ERROR_CODES`);
  if (re) assert.match(err.message, re);
  return err;
}

test('create() refuses bad options, naming the option', async () => {
  const ok = { wasm: wasmModule, config: config() };
  await refuses(() => EdgeLimit.create(), 'bad_options', /takes an options object/);
  await refuses(() => EdgeLimit.create({ config: config() }), 'bad_options', /option wasm: is required/);
  await refuses(() => EdgeLimit.create({ wasm: wasmModule }), 'bad_options', /option config: is required/);
  await refuses(() => EdgeLimit.create({ ...ok, syncInterval: 0 }), 'bad_options', /option syncInterval: must be from 1 ms/);
  await refuses(() => EdgeLimit.create({ ...ok, syncInterval: '100' }), 'bad_options', /option syncInterval: must be a number of ms, got "100"/);
  await refuses(() => EdgeLimit.create({ ...ok, syncIntreval: 100 }), 'bad_options', /option syncIntreval: unknown option/);
  await refuses(() => EdgeLimit.create({ ...ok, jitter: 1 }), 'bad_options', /option jitter/);
  await refuses(() => EdgeLimit.create({ ...ok, failPolicy: 'opne' }), 'bad_options', /option failPolicy: unknown fail policy "opne"/);
  await refuses(() => EdgeLimit.create({ ...ok, shareIsolates: 1.5 }), 'bad_options', /option shareIsolates/);
  await refuses(() => EdgeLimit.create({ ...ok, coordinator: 'limits.example.com' }), 'bad_options', /option coordinator: "limits.example.com" is not a URL/);
  await refuses(() => EdgeLimit.create({ ...ok, coordinator: ['https://a.example', 'ftp://b.example'] }), 'bad_options', /option coordinator\[1\]: "ftp:\/\/b.example": want an http: or https: URL/);
  await refuses(() => EdgeLimit.create({ ...ok, clock: 5 }), 'bad_options', /option clock: must be a function/);
  await refuses(() => EdgeLimit.create({ ...ok, background: 'threads' }), 'bad_options', /option background/);
  await refuses(() => EdgeLimit.create({ ...ok, isolateId: 'x'.repeat(129) }), 'bad_options', /option isolateId: must be at most 128 bytes/);
  await refuses(() => EdgeLimit.create({ ...ok, wasm: 'edgelimit.wasm' }), 'bad_options', /option wasm: must be a WebAssembly.Module/);
  await refuses(() => EdgeLimit.create({ ...ok, wasm: new Uint8Array([1, 2, 3]) }), 'bad_module', /the bytes do not compile/);
  // A valid Wasm module that is not edgelimit's (no exports at all).
  await refuses(() => EdgeLimit.create({ ...ok, wasm: new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]) }), 'bad_module', /not the edgelimit module/);
  // An unset Workers variable ("" or undefined) means no coordinator.
  for (const coordinator of ['', undefined, null]) {
    const rl = await EdgeLimit.create({ ...ok, coordinator, clock: fakeClock() });
    assert.equal(rl.decide({ key: 'k' }).success, true);
  }
});

test('create() refuses bad configurations, naming the field\'s path', async () => {
  const mk = (cfg) => () => EdgeLimit.create({ wasm: wasmModule, config: cfg });
  await refuses(mk('{"limiters": [}'), 'bad_config', /config: not JSON: /);
  await refuses(mk(config({ limt: 5 })), 'bad_config', /config: limiters\[0\]\.limt: unknown field \(known: name, algorithm, limit/);
  await refuses(mk({ limiters: [limiter()], windw: '1s' }), 'bad_config', /config: windw: unknown field/);
  await refuses(mk(config({ upstream: { max_pauze: '1s' } })), 'bad_config', /config: limiters\[0\]\.upstream\.max_pauze: unknown field/);
  await refuses(mk(config({ burst: 10 })), 'bad_config', /config: limiters\[0\]\.burst: only token_bucket and gcra have a burst/);
  await refuses(mk(config({ limit: '5' })), 'bad_config', /config: limiters\[0\]\.limit: must be an integer .*got "5"/);
  await refuses(mk(config({ limit: 2.5 })), 'bad_config', /limiters\[0\]\.limit: must be an integer/);
  await refuses(mk(config({ period: 1000 })), 'bad_config', /limiters\[0\]\.period: must be a Go duration string/);
  await refuses(mk(config({ period: undefined })), 'bad_config', /limiters\[0\]\.period: is required/);
  await refuses(mk(config({ read_through: 'yes' })), 'bad_config', /limiters\[0\]\.read_through: must be true or false/);
  await refuses(mk(config({ overrides: { vip: '100' } })), 'bad_config', /limiters\[0\]\.overrides\.vip: must be an integer/);
  await refuses(mk(config({ fail_policy: 'shut' })), 'bad_config', /limiters\[0\]\.fail_policy: unknown fail policy "shut"/);
  await refuses(mk({ limiters: [limiter(), limiter()] }), 'bad_config', /limiters\[1\]\.name: duplicate limiter name "api"/);
  await refuses(mk({ limiters: [limiter()], max_keys: -1 }), 'bad_config', /config: max_keys: must be between 0/);
  // burst is a bucket's capacity: accepted there.
  const rl = await EdgeLimit.create({ wasm: wasmModule, config: config({ algorithm: 'token_bucket', burst: 10 }), clock: fakeClock() });
  assert.equal(rl.decide({ key: 'k', cost: 10 }).success, true);
});

test('bad arguments are refused by the call, and consume nothing', async () => {
  const rl = await EdgeLimit.create({ wasm: wasmModule, config: config(), clock: fakeClock() });
  await refuses(() => rl.limit(), 'bad_input', /decide: takes an object/);
  await refuses(() => rl.limit([]), 'bad_input', /got an array/);
  await refuses(() => rl.decide({ key: 'k', cost: 1.5 }), 'bad_cost', /got 1.5/);
  await refuses(() => rl.decide({ key: 'k', cost: '2' }), 'bad_cost', /got "2"/);
  await refuses(() => rl.decide({ key: 'k', cost: 2n }), 'bad_cost');
  await refuses(() => rl.decide({ key: null }), 'bad_key', /got null/);
  await refuses(() => rl.decide({ key: 'é'.repeat(129) }), 'bad_key', /got 258/);
  await refuses(() => rl.decide({ limiter: {}, key: 'k' }), 'unknown_limiter');
  await refuses(() => rl.decide({ limiter: 0.5, key: 'k' }), 'unknown_limiter', /0\.5/); // not truncated to limiter 0
  await refuses(() => rl.decide({ checks: [{ limiter: 0.5, key: 'k' }] }), 'unknown_limiter');
  await refuses(() => rl.decide({ checks: [] }), 'bad_checks', /1 to 8/);
  await refuses(() => rl.decide({ checks: Array.from({ length: 9 }, () => ({ key: 'k' })) }), 'bad_checks');
  await refuses(() => rl.decide({ checks: [{ key: 'k', cost: -1 }] }), 'bad_cost');
  await refuses(() => rl.wait({ key: 'k', maxWaitMs: 'soon' }), 'bad_input', /maxWaitMs/);
  await refuses(() => rl.schedule({ key: 'k' }), 'bad_input', /fn must be a function/);
  await refuses(() => rl.observe(), 'bad_input');
  await refuses(() => rl.reset(), 'bad_input');
  assert.equal(rl.decide({ key: 'k' }).remaining, 4, 'the refused calls consumed nothing');
  const early = await EdgeLimit.create({ wasm: wasmModule, config: config(), clock: () => -5 });
  await refuses(() => early.decide({ key: 'k' }), 'bad_time', /the clock gave -5/);
  const ac = new AbortController();
  const full = await EdgeLimit.create({ wasm: wasmModule, config: config({ limit: 1, period: '1h' }) });
  full.decide({ key: 'k' });
  setTimeout(() => ac.abort(), 20);
  const e = await refuses(() => full.wait({ key: 'k', maxWaitMs: 10 * 3600e3, signal: ac.signal }), 'aborted');
  assert.equal(e.cause?.name, 'AbortError', 'the signal\'s reason is the cause');
});

test('a module of another protocol version is refused, naming both versions', () => {
  const m = new Module(wasmModule);
  const cfg = { v: 2, iso: 'x', max_keys: 0, limiters: [{ name: 'a', algorithm: 'fixed_window', limit: 1, period_ns: 1000000000n, burst: 0, mode: 'approximate', read_through: false, overrides: [] }] };
  assert.throws(() => m.configure(cfg), (e) => e instanceof EdgeLimitError && e.code === 'version_mismatch' &&
    /this package \(protocol version 2\) cannot drive this module, which speaks protocol version 1/.test(e.message));
});

test('sync errors name the URL and the cause', async () => {
  const port = await freePort(); // nothing listens there
  const url = `http://127.0.0.1:${port}`;
  const rl = await EdgeLimit.create({ wasm: wasmModule, config: config({ mode: 'approximate' }), coordinator: url, background: 'requests' });
  rl.decide({ key: 'k' });
  assert.equal(await rl.sync(), false);
  assert.equal(rl.lastError.code, 'sync');
  assert.match(rl.lastError.message, new RegExp(`sync: POST ${url}/v1/sync: fetch failed: .*ECONNREFUSED`));
  // A reply the module cannot read.
  const garbage = await EdgeLimit.create({ wasm: wasmModule, config: config({ mode: 'approximate' }), coordinator: 'http://coordinator.test', background: 'requests',
    fetch: async () => new Response(new Uint8Array([0xc1]), { status: 200 }) });
  garbage.decide({ key: 'k' });
  assert.equal(await garbage.sync(), false);
  assert.equal(garbage.lastError.code, 'sync_reply', garbage.lastError.message);
  // A timeout names the URL too.
  const slow = await EdgeLimit.create({ wasm: wasmModule, config: config({ mode: 'approximate' }), coordinator: 'http://coordinator.test', background: 'requests', syncTimeout: 20,
    fetch: (u, init) => hangUntilAborted(init) });
  slow.decide({ key: 'k' });
  assert.equal(await slow.sync(), false);
  assert.equal(slow.lastError.code, 'sync_timeout');
  assert.match(slow.lastError.message, /POST http:\/\/coordinator.test\/v1\/sync: timed out after 20 ms/);
});

test('a coordinator of another protocol version refuses the batch; the error names both versions', async () => {
  const cfg = config({ mode: 'approximate' });
  const c = await startCoordinator(cfg);
  coords.push(c);
  // The batch as a package of protocol version 2 would send it.
  const v2 = (u, init) => fetch(u, { ...init, body: encode({ ...decode(init.body), v: 2 }) });
  const rl = await EdgeLimit.create({ wasm: wasmModule, config: cfg, coordinator: c.url, background: 'requests', fetch: v2 });
  rl.decide({ key: 'k' });
  assert.equal(await rl.sync(), false);
  assert.equal(rl.lastError.code, 'version_mismatch', rl.lastError.message);
  assert.match(rl.lastError.message, /the coordinator speaks protocol version 1/);
  assert.match(rl.lastError.message, /the batch speaks edgelimit protocol version 2/);
});

test('every code is in the README\'s table and in the declarations', () => {
  const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
  const dts = readFileSync(path.join(root, 'edge/js/src/index.d.ts'), 'utf8');
  const union = /export type ErrorCode =([^;]*);/.exec(dts)?.[1] ?? '';
  const declared = [...union.matchAll(/'([a-z_]+)'/g)].map((m) => m[1]).sort();
  assert.deepEqual(declared, Object.keys(ERROR_CODES).sort(), 'ErrorCode in index.d.ts lists ERROR_CODES');
  for (const code of Object.keys(ERROR_CODES)) {
    assert.match(readme, new RegExp(`\\| \`${code}\` \\|`), `README's error table has a row for ${code}`);
  }
});
