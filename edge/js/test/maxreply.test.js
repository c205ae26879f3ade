// The largest replies: a batch of 8,192 keys of 256 bytes on a limiter
// paused fleet-wide is answered by the real Go coordinator with a view and
// an upstream view of each key, more than 4 MiB (the Go host's old read
// limit; wire.MaxReplyBytes bounds a reply). The package reads the whole
// reply and the module applies it.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeLimit } from '../src/index.js';
import { wasmModule } from './helpers.js';
import { startCoordinator } from './coordinator.js';

const coords = [];
after(async () => { for (const c of coords) await c.stop(); });

test('a reply above 4 MiB (8,192 keys of 256 bytes, paused) is read and applied', async () => {
  const name = 'n'.repeat(64);
  const config = { limiters: [{ name, algorithm: 'token_bucket', limit: 1000, period: '1s', mode: 'approximate' }] };
  const c = await startCoordinator(config);
  coords.push(c);
  const r = await fetch(`${c.url}/v1/limiters/${name}/pause`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ for: '1h', reason: 'the largest reply' }) });
  assert.equal(r.status, 200, await r.text());
  const sizes = [];
  const sizing = async (url, init) => {
    const resp = await fetch(url, init);
    const body = new Uint8Array(await resp.arrayBuffer());
    sizes.push(body.length);
    return new Response(body, { status: resp.status, headers: resp.headers });
  };
  const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: c.url, syncInterval: 3600000, fetch: sizing });
  try {
    const key = (i) => String(i).padStart(256, '0');
    for (let i = 0; i < 8192; i++) assert.equal(rl.decide({ limiter: name, key: key(i) }).success, true, `key ${i}`);
    assert.equal(await rl.sync(), true, `the sync: ${rl.lastError}`);
    assert.ok(sizes[0] > 4 * 1024 * 1024, `reply sizes ${sizes}: want the first above 4 MiB`);
    await rl.sync(); // the key the first batch left out
    for (const i of [0, 8191]) assert.equal(rl.decide({ limiter: name, key: key(i) }).success, false, `key ${i} is paused`);
    assert.equal(rl.stats().errors, 0);
  } finally { rl.close(); }
});
