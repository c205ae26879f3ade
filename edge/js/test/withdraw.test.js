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

// Through limit(): a coordinator that never grants enough; the held request is
// decided after each of three replies and denied for good; no batch cut
// after that asks for it (its ask was withdrawn before the final
// decision's sync could cut one).
for (const background of ['timers', 'requests']) {
  test(`limit() withdraws a denied request's ask (${background})`, async () => {
    const { EdgeLimit } = await import('../src/index.js');
    const { encode, decode } = await import('../src/msgpack.js');
    const cuts = [];
    const fetch = async (url, init) => {
      if (url.endsWith('/healthz')) return new Response('ok', { status: 200 });
      await new Promise((r) => setTimeout(r, 30));
      const b = decode(new Uint8Array(init.body));
      cuts.push({ seq: Number(b.seq), asks: (b.e ?? []).filter((x) => x[1] === 'k' && Number(x[4]) > 0).length });
      const now = BigInt(Date.now()) * 1000000n;
      const P = 60n * 1000000000n;
      // A lease of 2 for a cost of 5: never enough, never a refusal (no dry spell).
      const e = (b.e ?? []).map((x) => ['s', x[1], now / P, 0, 0, 0, 2, 1, 0, false, 10_000_000_000, 0]);
      return new Response(encode({ v: 1, seq: b.seq, at: now, e }), { status: 200 });
    };
    const rl = await EdgeLimit.create({ wasm: wasmModule, coordinator: 'http://c.test', background, syncInterval: 100, retryWait: 2000, fetch,
      config: { limiters: [{ name: 's', algorithm: 'fixed_window', limit: 100, period: '60s', mode: 'strict' }] } });
    const d = await rl.limit({ limiter: 's', key: 'k', cost: 5 });
    assert.equal(d.success, false);
    const n = cuts.length;
    await new Promise((r) => setTimeout(r, 300));
    await rl.sync();
    const later = cuts.slice(n).filter((c) => c.asks > 0);
    assert.deepEqual(later, [], `batches after the final denial still ask for it: ${JSON.stringify(cuts)}`);
    await rl.close();
  });
}
