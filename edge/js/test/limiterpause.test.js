// A limiter paused as a whole through the coordinator's API (the kill
// switch) denies every key of it at an edge from its next reply on, keys
// the edge has not synced since the pause included; told only with the
// keys a batch named, an approximate limiter (which never waits) admitted
// the first request of each other key. A resume lifts it with the next
// reply.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeLimit } from '../src/index.js';
import { startCoordinator } from './coordinator.js';
import { wasmModule } from './helpers.js';

const config = { limiters: [
  { name: 'ap', algorithm: 'fixed_window', limit: 1000, period: '1h', mode: 'approximate' },
  { name: 'other', algorithm: 'fixed_window', limit: 1000, period: '1h', mode: 'approximate' }] };

test('a paused limiter denies keys the edge never synced, and a resume lifts it', async () => {
  const coord = await startCoordinator(config);
  const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: coord.url });
  try {
    assert.equal((await rl.limit({ limiter: 'ap', key: 'seen' })).success, true);
    const post = await fetch(`${coord.url}/v1/limiters/ap/pause`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ for: '10m', reason: 'provider outage' }) });
    assert.equal(post.status, 200, await post.text());
    // Any reply tells it: a batch of another limiter's key.
    await rl.limit({ limiter: 'other', key: 'x' });
    assert.equal(await rl.sync(), true, rl.lastError);
    let fresh = 0;
    for (let i = 0; i < 30; i++) if ((await rl.limit({ limiter: 'ap', key: `fresh-${i}` })).success) fresh++;
    assert.equal(fresh, 0, `${fresh} of 30 keys never synced admitted under the pause`);
    const d = await rl.limit({ limiter: 'ap', key: 'seen' });
    assert.equal(d.success, false);
    assert.ok(d.retryAfterMs > 500_000, `retry after ${d.retryAfterMs} ms, want about the 10 minutes left`);
    assert.equal((await rl.limit({ limiter: 'other', key: 'y' })).success, true, 'another limiter is not paused');
    const del = await fetch(`${coord.url}/v1/limiters/ap/pause?reason=back`, { method: 'DELETE' });
    assert.equal(del.status, 200, await del.text());
    await rl.limit({ limiter: 'other', key: 'z' });
    assert.equal(await rl.sync(), true, rl.lastError);
    assert.equal((await rl.limit({ limiter: 'ap', key: 'fresh-after' })).success, true, 'resumed');
  } finally { await rl.close(); await coord.stop(); }
});
