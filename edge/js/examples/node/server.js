// An example Node HTTP server limited by edgelimit:
//
//   edgelimit coordinator --in-memory --config limits.json &
//   EDGELIMIT_COORDINATOR=http://127.0.0.1:7070 node edge/js/examples/node/server.js
//   curl -i 'http://127.0.0.1:8787/?key=alice'
//
// Run it several times (other ports: PORT=8788): the processes share the
// limit through the coordinator. Syncs run on timers in the background.
import { createServer } from 'node:http';
import { EdgeLimit } from 'edgelimit';
import { loadWasm } from 'edgelimit/node';

const wasm = await loadWasm(); // the module the package ships, compiled
const config = process.env.LIMITS ?? '{"limiters": [{"name": "api", "algorithm": "sliding_window", "limit": 100, "period": "1m"}]}';
const limiter = await EdgeLimit.create({
  wasm, config,
  coordinator: process.env.EDGELIMIT_COORDINATOR,
  token: process.env.EDGELIMIT_TOKEN,
  onError: (e) => console.error(e.message),
});

const server = createServer(async (req, res) => {
  const key = new URL(req.url, 'http://x').searchParams.get('key') ?? req.socket.remoteAddress;
  // wait() would rather wait for a slot (up to maxWaitMs) than fail:
  const d = process.env.WAIT ? await limiter.wait({ limiter: 'api', key, maxWaitMs: 2000 }) : await limiter.limit({ limiter: 'api', key });
  res.setHeader('RateLimit', `"api";r=${d.remaining};t=${Math.max(Math.ceil((d.reset - Date.now()) / 1000), 0)}`);
  if (!d.success) {
    if (d.retryAfterMs >= 0) res.setHeader('Retry-After', String(Math.max(Math.ceil(d.retryAfterMs / 1000), 1)));
    res.writeHead(429).end('rate limited\n');
    return;
  }
  res.end('hello\n');
});
const port = Number(process.env.PORT ?? 8787);
server.listen(port, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${port}`));
process.on('SIGTERM', () => { limiter.close(); server.close(); });
