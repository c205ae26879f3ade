// The decisions made before the reading of the coordinator's time settled
// are recorded again at its time when it moved the clock: a key used as a
// string and as its UTF-8 bytes is one key in the module, recorded again
// once, with everything admitted under either form.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeLimit } from '../src/index.js';
import { encode, decode } from '../src/msgpack.js';
import { wasmModule } from './helpers.js';

test('early decisions of one key as a string and as bytes are recorded again together', async () => {
  let release;
  const held = new Promise((r) => { release = r; });
  const batches = [];
  const fetch = async (url, init) => {
    const at = BigInt(Date.now()) * 1000000n;
    const headers = { 'edgelimit-time': String(BigInt(Date.now()) * 1000000n) };
    if (url.endsWith('/healthz')) {
      await held;
      return new Response('ok', { status: 200, headers: { 'edgelimit-time': String(BigInt(Date.now()) * 1000000n) } });
    }
    const b = decode(new Uint8Array(init.body));
    batches.push(b);
    return new Response(encode({ v: 1, seq: b.seq, at }), { status: 200, headers });
  };
  const rl = await EdgeLimit.create({ wasm: wasmModule, coordinator: 'http://c.test', background: 'timers', syncInterval: 200, fetch,
    clock: () => Date.now() + 3000, // 3 s ahead of the coordinator
    config: { limiters: [{ name: 'a', algorithm: 'fixed_window', limit: 1000, period: '60s', mode: 'approximate' }] } });
  let admitted = 0;
  for (let i = 0; i < 3; i++) if ((await rl.limit({ limiter: 'a', key: 'abc' })).success) admitted++;
  for (let i = 0; i < 4; i++) if ((await rl.limit({ limiter: 'a', key: new TextEncoder().encode('abc') })).success) admitted++;
  release();
  await new Promise((r) => setTimeout(r, 100));
  await rl.sync();
  let counted = 0;
  for (const b of batches) for (const e of b.e ?? []) counted += Number(e[3]);
  assert.equal(admitted, 7);
  assert.equal(counted, 7, 'every admission reported once');
  assert.ok(rl.counters.clockSteps >= 1, 'the reading moved the clock');
  await rl.close();
});
