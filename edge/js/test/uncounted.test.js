// A limiter the coordinator does not run (the edge's configuration has one
// more) is not counted there, and wedges nothing: the coordinator takes its
// items out of each batch, counts the rest and names it in
// Edgelimit-Uncounted, which the package says once on the console. Before,
// the coordinator refused the whole batch, which the isolate resent as it
// was: one request on that limiter stopped every later count.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeLimit } from '../src/index.js';
import { startCoordinator, globalView } from './coordinator.js';
import { wasmModule } from './helpers.js';

test('a limiter the coordinator does not run is not counted, and the others are', async () => {
  const coordConfig = { limiters: [{ name: 'api', algorithm: 'fixed_window', limit: 1000, period: '1h', mode: 'approximate' }] };
  const edgeConfig = { limiters: [...coordConfig.limiters, { name: 'extra', algorithm: 'fixed_window', limit: 1000, period: '1h', mode: 'approximate' }] };
  const coord = await startCoordinator(coordConfig);
  const warn = console.warn;
  const said = [];
  console.warn = (m) => said.push(String(m));
  try {
    const rl = await EdgeLimit.create({ wasm: wasmModule, config: edgeConfig, coordinator: coord.url });
    const key = `u-${Date.now()}`;
    for (let i = 0; i < 5; i++) await rl.limit({ limiter: 'api', key });
    await rl.limit({ limiter: 'extra', key });
    await rl.sync();
    for (let i = 0; i < 10; i++) await rl.limit({ limiter: 'api', key });
    assert.equal(await rl.sync(), true, 'the syncs succeed');
    await rl.limit({ limiter: 'extra', key });
    await rl.sync();
    assert.equal((await globalView(coord.url, 'api', key)).body.count, 15, 'every api request counted');
    assert.equal(rl.counters.syncErrors ?? 0, 0);
    const lines = said.filter((m) => m.includes('does not count limiters extra'));
    assert.equal(lines.length, 1, `said once: ${JSON.stringify(said)}`);
    await rl.close();
  } finally {
    console.warn = warn;
    await coord.stop();
  }
});
