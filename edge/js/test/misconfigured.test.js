// A coordinator that refuses every batch for a reason no retry mends (a
// token it does not accept, a URL that names no coordinator) is said on
// the console once until a sync succeeds. Before, it showed only in
// lastError while the fail policies decided every request: a strict key
// under open admitted 5 of 5 with the token wrong, on every isolate.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeLimit } from '../src/index.js';
import { startCoordinator } from './coordinator.js';
import { wasmModule } from './helpers.js';

const config = { limiters: [{ name: 'api', algorithm: 'fixed_window', limit: 100, period: '1h', mode: 'strict', fail_policy: 'open' }] };

async function said(opts, fn) {
  const lines = [];
  const orig = console.error;
  console.error = (...a) => lines.push(a.join(' '));
  try {
    const rl = await EdgeLimit.create({ wasm: wasmModule, config, ...opts });
    await fn(rl);
    await rl.close().catch(() => {});
  } finally {
    console.error = orig;
  }
  return lines;
}

test('a wrong token or a URL naming no coordinator is said once, naming the status', async () => {
  const coord = await startCoordinator(config, ['--token', 'right-token']);
  try {
    for (const [what, opts, status] of [
      ['wrong token', { coordinator: coord.url, token: 'wrong-token' }, '401'],
      ['no token', { coordinator: coord.url }, '401'],
      ['a path that is no coordinator', { coordinator: `${coord.url}/edgelimit`, token: 'right-token' }, '404'],
    ]) {
      const lines = await said(opts, async (rl) => {
        for (let i = 0; i < 4; i++) {
          await rl.limit({ limiter: 'api', key: 'k' });
          assert.equal(await rl.sync(), false, `${what}: the sync fails`);
        }
        assert.ok(rl.counters.syncErrors >= 4, `${what}: ${rl.counters.syncErrors} sync errors`);
      });
      const ours = lines.filter((l) => l.startsWith('edgelimit:'));
      assert.equal(ours.length, 1, `${what}: said ${ours.length} times: ${JSON.stringify(lines)}`);
      assert.match(ours[0], new RegExp(status), `${what}: ${ours[0]}`);
      assert.match(ours[0], /check the token and the coordinator URL/);
    }
    const lines = await said({ coordinator: coord.url, token: 'right-token' }, async (rl) => {
      assert.ok((await rl.limit({ limiter: 'api', key: 'k' })).success);
      assert.equal(await rl.sync(), true);
    });
    assert.deepEqual(lines, [], 'nothing said while the syncs succeed');
  } finally {
    await coord.stop();
  }
});
