// A partition that drops packets silently (no answer, no reset) ends, and
// the package decides on a fresh view again within about a second: a
// request on a stale view ends a POST in flight for over hungAfter (twice
// probeInterval, at least 1 s) and probes again, as the Go edge host does.
// Before, the attempt started in the partition waited out syncTimeout (5
// s), the probes held behind it, and the results stayed stale about 4 s
// after the link was back.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeLimit } from '../src/index.js';
import { startCoordinator, globalView } from './coordinator.js';
import { wasmModule, hangUntilAborted } from './helpers.js';

test('a silent partition ends and the next results are fresh within about a second', async () => {
  const config = { limiters: [{ name: 'api', algorithm: 'fixed_window', limit: 1_000_000, period: '1h', mode: 'approximate' }] };
  const coord = await startCoordinator(config);
  let silent = false;
  // The partition: a POST neither answered nor reset until it is aborted.
  const partFetch = (url, init) => silent
    ? hangUntilAborted(init)
    : fetch(url, init);
  try {
    const rl = await EdgeLimit.create({ wasm: wasmModule, config, coordinator: coord.url, fetch: partFetch, background: 'requests' });
    const key = `part-${Date.now()}`;
    const ps = [];
    const ctx = { waitUntil: (p) => ps.push(p.catch(() => {})) };
    let admitted = 0;
    const request = async () => {
      const d = await rl.limit({ limiter: 'api', key }, ctx);
      if (d.success) admitted++;
      await new Promise((r) => setTimeout(r, 50));
      return d;
    };
    for (let i = 0; i < 5; i++) await request();
    assert.equal(await rl.sync(), true);
    silent = true;
    let stale = false;
    for (const end = Date.now() + 6000; Date.now() < end;) stale = (await request()).stale || stale;
    assert.ok(stale, 'stale during the partition');
    silent = false;
    const back = Date.now();
    for (;;) {
      const d = await request();
      if (!d.stale) break;
      assert.ok(Date.now() - back < 8000, 'still stale 8 s after the link came back');
    }
    const took = Date.now() - back;
    console.log(`# fresh again ${took} ms after the link came back`);
    assert.ok(took < 2000, `fresh again ${took} ms after the link came back, want within about a second`);
    await rl.sync();
    await Promise.all(ps);
    await rl.close();
    assert.equal((await globalView(coord.url, 'api', key)).body.count, admitted, 'every admitted request counted once');
  } finally {
    await coord.stop();
  }
});
