// A request held for a lease and denied for good (its retries used up)
// takes its ask back (Module.withdraw, which limit() calls then): no batch
// is cut to ask a lease for it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Module } from '../src/index.js';
import { normalizeConfig, toWire } from '../src/config.js';
import { wasmModule } from './helpers.js';

function strictModule() {
  const m = new Module(wasmModule);
  m.configure(toWire(normalizeConfig({ limiters: [{ name: 's', algorithm: 'fixed_window', limit: 100, period: '60s', mode: 'strict' }] }, true), 'iso-w', 100, 'b'.repeat(32)));
  return m;
}

test('a withdrawn ask cuts no batch; one not withdrawn does', () => {
  const now = 100_000_000_000_000n;
  for (const withdraw of [true, false]) {
    const m = strictModule();
    assert.ok((m.decide(0, 'k', 1, now) & 4) !== 0, 'held for a lease (sync retry)');
    if (withdraw) m.withdraw();
    const b = m.syncOut(now + 1_000_000n);
    assert.equal(b === null, withdraw, withdraw ? 'no batch for a request gone' : 'the held request asks');
  }
});
