// Amendments in real workerd (see amend.test.js): a Worker request held
// while another request's batch is in flight amends that batch from its
// own request context and is admitted by a reply to it. The coordinator
// sits behind a loopback proxy that adds 100 ms each way and records the
// batches it carries.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startCoordinator } from './coordinator.js';
import { startWorkerd, workerdBin } from './workerd/run.js';
import { decode } from '../src/msgpack.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const skip = workerdBin() ? false : 'workerd is not installed (run `make tools-js` or `npm ci` in edge/js)';
const config = { limiters: [{ name: 's', algorithm: 'fixed_window', limit: 100, period: '1h', mode: 'strict' }] };
const ONE_WAY = 100; // ms each way
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const running = [];
after(async () => { for (const s of running.reverse()) await s.stop(); });

// A proxy to target ONE_WAY ms away each way, recording each POST's
// {seq, ak} in sent. Resolves to {url, stop()}.
function farProxy(target, sent) {
  const srv = createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks);
    if (req.method === 'POST') { // not the GET /healthz that reads the coordinator's time
      const b = decode(new Uint8Array(body));
      sent.push({ seq: b.seq, ak: b.ak });
    }
    await sleep(ONE_WAY);
    const headers = { 'content-type': req.headers['content-type'] ?? 'application/msgpack' };
    const r = await fetch(`${target}${req.url}`, { method: req.method, body: req.method === 'POST' ? body : undefined, headers });
    const out = Buffer.from(await r.arrayBuffer());
    await sleep(ONE_WAY);
    res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'application/octet-stream',
      'edgelimit-time': r.headers.get('edgelimit-time') ?? '' });
    res.end(out);
  });
  return new Promise((resolve) => srv.listen(0, '127.0.0.1', () => resolve({
    url: `http://127.0.0.1:${srv.address().port}`,
    stop: () => new Promise((r) => { srv.closeAllConnections(); srv.close(() => r()); }),
  })));
}

async function limit(wd, key) {
  const r = await fetch(`${wd.urls[0]}/limit?limiter=s&key=${key}`);
  const text = await r.text();
  try { return JSON.parse(text); } catch { return assert.fail(`${r.status} ${text}\nworkerd: ${wd.output()}`); }
}

test('workerd: a request held while another request\'s batch is in flight amends it and is admitted by its reply', { skip, timeout: 60000 }, async (t) => {
  const coord = await startCoordinator(config);
  running.push(coord);
  const sent = [];
  const proxy = await farProxy(coord.url, sent);
  running.push(proxy);
  const wd = await startWorkerd({ n: 1, workerFile: path.join(here, 'workerd/worker.js'),
    bindings: { LIMITS: JSON.stringify(config), COORDINATOR: proxy.url, SYNC_MS: 60000 } });
  running.push(wd);
  const first = limit(wd, 'a'); // cuts batch 1 and is held for its reply
  for (let i = 0; i < 1500 && sent.length === 0; i++) await sleep(2);
  assert.equal(sent.length, 1, 'batch 1 in flight');
  const start = Date.now();
  const d = await limit(wd, 'b');
  const waited = Date.now() - start;
  const until = sent.slice();
  assert.equal(d.success, true, `${JSON.stringify(d)}\nworkerd: ${wd.output()}`);
  assert.equal((await first).success, true);
  assert.deepEqual(until.map((s) => [s.seq, s.ak?.map((k) => k[1]) ?? null]), [[1, null], [1, ['b']]],
    'batch 1 and its amendment asking for b, no other batch, before b was admitted');
  const st = await (await fetch(`${wd.urls[0]}/stats`)).json();
  assert.deepEqual([st.amendments, st.syncErrors, st.failures], [1, 0, 0], JSON.stringify(st));
  t.diagnostic(`round trip ${2 * ONE_WAY} ms: b admitted after ${waited} ms`);
});
