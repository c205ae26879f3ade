// The fail policy's local share counts a key as the module holds it, by
// its UTF-8 bytes: a key given as a string and as its bytes is one key
// with one share, and its override applies to both forms.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeLimit } from '../src/index.js';
import { wasmModule } from './helpers.js';

test('local-share on a stale view: a string key and its bytes share one share, override included', async () => {
  const fetch = async () => { throw new Error('coordinator down (test)'); };
  const rl = await EdgeLimit.create({ wasm: wasmModule, coordinator: 'http://c.test', background: 'requests', syncInterval: 100,
    staleAfter: 50, fetch, retryWait: -1, shareIsolates: 5,
    config: { limiters: [{ name: 's', algorithm: 'fixed_window', limit: 1000, period: '1h', mode: 'strict', fail_policy: 'local-share',
      overrides: [['vip', 10]] }] } });
  for (let i = 0; i < 8; i++) { // until the view is stale
    rl.decide({ limiter: 's', key: 'warm' });
    try { await rl.sync(); } catch { /* down */ }
    await new Promise((r) => setTimeout(r, 60));
  }
  const vip = new TextEncoder().encode('vip');
  let stale = 0; let admitted = 0;
  for (let i = 0; i < 6; i++) {
    const d = rl.decide({ limiter: 's', key: i % 2 ? 'vip' : vip });
    if (d.stale) stale++;
    if (d.success) admitted++;
  }
  assert.equal(stale, 6, 'decided on a stale view');
  assert.equal(admitted, 2, 'the override 10 over 5 isolates: a share of 2, whichever form the key takes');
  await rl.close();
});
