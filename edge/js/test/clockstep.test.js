// A clock that steps back after a lease was granted (a host ahead of the
// coordinator that could not read its time at start): the module, told the
// new offset (Module.clockOffset, which EdgeLimit calls whenever its
// offset moves), ends the lease when it would have ended on the clock it
// was granted on, before the coordinator takes it back.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Module } from '../src/index.js';
import { normalizeConfig, toWire } from '../src/config.js';
import { encode } from '../src/msgpack.js';
import { wasmModule } from './helpers.js';

const MS = 1_000_000n;

function run(tell) {
  const m = new Module(wasmModule);
  m.configure(toWire(normalizeConfig({ limiters: [{ name: 's', algorithm: 'fixed_window', limit: 1000, period: '10s', mode: 'strict' }] }, true), 'iso-step', 100, 'a'.repeat(32)));
  const t0 = 100_000n * MS; // real time of the cut
  const ahead = 1500n * MS;
  assert.ok((m.decide(0, 'k', 1, t0 + ahead) & 4) !== 0, 'the first decision asks for a lease (sync retry)');
  assert.ok(m.syncOut(t0 + ahead) !== null, 'a batch is cut');
  if (tell) m.clockOffset(-1500); // the answer's time steps the offset back before its reply is applied
  const w = (t0 + ahead) / (10_000n * MS);
  const reply = encode({ v: 1n, seq: 1n, at: t0 + 20n * MS, e: [['s', 'k', w, 0n, 0n, 0n, 500n, 1n, 0n, false, 1000n * MS]] });
  m.syncIn(reply, t0 + 40n * MS);
  let admitted = 0; let last = -1n;
  for (let real = t0 + 50n * MS; real < t0 + ahead + 1000n * MS; real += 10n * MS) {
    const st = m.decide(0, 'k', 1, real);
    assert.ok(st >= 0, `decide: code ${st}`);
    if ((st & 1) !== 0) { admitted++; last = real; }
  }
  return { admitted, lastMs: Number((last - t0) / MS) };
}

test('a lease ends on time after the clock steps back (told the offset)', () => {
  const { admitted, lastMs } = run(true);
  assert.ok(admitted > 0, 'admitted under the lease');
  assert.ok(lastMs < 1000, `admitted ${lastMs} ms after the cut (real time); the lease ended at 1000 ms`);
});

test('untold, the module still sees the step, short by the time between its calls', () => {
  const { admitted, lastMs } = run(false);
  assert.ok(admitted > 0, 'admitted under the lease');
  assert.ok(lastMs >= 1000 && lastMs < 1040, `admitted until ${lastMs} ms after the cut: 40 ms late (the real time between the cut and the reply), not 2.5 s`);
});
