// Durations in the configuration read as the Go tools read them
// (wire.ParseDuration): Go units, and days first ("1d", "1d12h").
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseDuration } from '../src/config.js';

test('durations: Go units and days first, as the Go tools read them', () => {
  const H = 3600000000000n;
  for (const [s, want] of [['1s', 1000000000n], ['1m30s', 90000000000n], ['24h', 24n * H], ['1d', 24n * H],
    ['1.5d', 36n * H], ['1d12h', 36n * H], ['-2d', -48n * H], ['250ms', 250000000n]]) {
    assert.equal(parseDuration(s), want, s);
  }
  for (const s of ['1h1d', 'd', '1w', '', '1dd']) {
    assert.throws(() => parseDuration(s), (e) => e.code === 'bad_config', s);
  }
});
