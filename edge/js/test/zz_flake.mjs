import { EdgeLimit } from '../src/index.js';
import { decode } from '../src/msgpack.js';
import { wasmModule } from './helpers.js';
import { startCoordinator } from './coordinator.js';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const ONE_WAY = 100;
function far(sent) {
  return async (url, init) => {
    if (!init?.body) return fetch(url, init);
    const b = decode(init.body);
    const rec = { seq: b.seq, ak: b.ak, at: Date.now() };
    sent.push(rec);
    await sleep(ONE_WAY);
    const r = await fetch(url, init);
    const body = await r.arrayBuffer();
    rec.status = r.status; rec.back = Date.now();
    await sleep(ONE_WAY);
    return new Response(body, { status: r.status, headers: r.headers });
  };
}
async function until(cond) { while (!cond()) await sleep(2); }
const cfg = { limiters: [{ name: 's', algorithm: 'fixed_window', limit: 100, period: '1h', mode: 'strict' }, { name: 'a', algorithm: 'fixed_window', limit: 1000, period: '1h', mode: 'approximate' }] };
const c = await startCoordinator(cfg);
let bad = 0;
const N = Number(process.env.N ?? 100);
for (let i = 0; i < N; i++) {
  const background = process.env.BG ?? 'requests';
  const sent = [];
  const rl = await EdgeLimit.create({ wasm: wasmModule, config: cfg, coordinator: c.url, syncInterval: 60000, background, fetch: far(sent) });
  const stacks = [];
  const orig = rl._sync.bind(rl);
  rl._sync = () => { if (!rl._busy(rl._clock())) stacks.push(new Error('sync at ' + sent.length).stack); return orig(); };
  const k = `dry-${background}-${i}`;
  await rl.limit({ limiter: 's', key: k });
  rl.decide({ limiter: 'a', key: k });
  const before = sent.length;
  const synced = rl.sync();
  await until(() => sent.length > before);
  const d = await rl.limit({ limiter: 's', key: k });
  await synced;
  const got = sent.slice(before).map((s) => [s.seq, s.ak ? 1 : 0, s.status]);
  if (got.length !== 2 || !d.success) { bad++; console.log(i, JSON.stringify(got), d.success, rl.lastError, JSON.stringify(rl.stats())); console.log(stacks.slice(-1)[0]); }
  await rl.close();
}
console.log('bad', bad, 'of', N);
await c.stop();
