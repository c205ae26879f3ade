// A coordinator that answers slowly is not a failing one: replies 700 ms
// away (every sync succeeding) keep a strict key of 10 a second within its
// limit under the default fail policy, open. Before, an attempt in flight
// past staleAfter (300 ms) made the view stale, and a held request without
// a reply within retryWait was decided as on failing syncs: open admitted
// alone, 12-40 a window (6 40 19 30 29 25 28 24 in one run).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeLimit } from '../src/index.js';
import { startCoordinator } from './coordinator.js';
import { wasmModule } from './helpers.js';

test('slow syncs keep a strict key within its limit', async () => {
  const config = { limiters: [{ name: 'f10', algorithm: 'fixed_window', limit: 10, period: '1s', mode: 'strict' }] };
  const coord = await startCoordinator(config);
  const slowFetch = async (url, init) => {
    const r = await fetch(url, init);
    const body = await r.arrayBuffer();
    await new Promise((s) => setTimeout(s, 700));
    return new Response(body, { status: r.status, headers: r.headers });
  };
  try {
    const rls = await Promise.all(Array.from({ length: 4 }, () =>
      EdgeLimit.create({ wasm: wasmModule, config, coordinator: coord.url, fetch: slowFetch, background: 'requests' })));
    const key = `slow-${Date.now()}`;
    const ps = [];
    const ctx = { waitUntil: (p) => ps.push(p) };
    const perWindow = new Map();
    let stale = 0;
    const end = Date.now() + 5000;
    for (let i = 0; Date.now() < end; i++) {
      ps.push(rls[i % 4].limit({ limiter: 'f10', key }, ctx).then((d) => {
        if (d.stale) stale++;
        if (d.success) perWindow.set(d.reset, (perWindow.get(d.reset) ?? 0) + 1);
      }));
      await new Promise((r) => setTimeout(r, 1000 / 30));
    }
    await Promise.all(ps);
    const counts = [...perWindow.values()];
    assert.ok(counts.length > 0 && Math.max(...counts) <= 10, `admitted per window ${counts.join(' ')}, limit 10`);
    assert.equal(stale, 0, 'no result on a stale view: every sync succeeded');
    assert.equal(rls.reduce((a, r) => a + (r.counters.syncErrors ?? 0), 0), 0, 'no sync failed');
    for (const rl of rls) await rl.close();
  } finally {
    await coord.stop();
  }
});
