// Starts the real Go coordinator (`edgelimit coordinator --in-memory`) on
// a loopback port for a test, and stops it.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { root } from './helpers.js';

let built = null;

/** The edgelimit binary: $EDGELIMIT_BIN, or built once with go build. */
export function edgelimitBin() {
  if (process.env.EDGELIMIT_BIN) return process.env.EDGELIMIT_BIN;
  if (built) return built;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'edgelimit-bin-'));
  built = path.join(dir, 'edgelimit');
  execFileSync('go', ['build', '-o', built, './cmd/edgelimit'], { cwd: root, stdio: 'inherit' });
  return built;
}

/** A free loopback port. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

/** Waits until url answers (any status), polling for at most ms. */
export async function waitUp(url, ms = 20000) {
  const end = Date.now() + ms;
  for (;;) {
    try { await fetch(url); return; } catch (e) {
      if (Date.now() > end) throw new Error(`${url} did not come up in ${ms} ms: ${e.message}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/**
 * Starts a coordinator with config (the JSON file format), on port (a
 * free one by default; give the port of one stopped to restart it there),
 * in memory, or on Pebble in the directory of a --data in extraArgs,
 * and resolves to {url, port, pid, stop(), kill(), output()}. With
 * --tls-cert and --tls-key among extraArgs the url is https.
 */
export async function startCoordinator(config, extraArgs = [], port = 0) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'edgelimit-coord-'));
  const cfgPath = path.join(dir, 'limits.json');
  writeFileSync(cfgPath, JSON.stringify(config));
  port ||= await freePort();
  const bin = edgelimitBin();
  if (!existsSync(bin)) throw new Error(`no edgelimit binary at ${bin}`);
  // In memory unless extraArgs name a --data directory (Pebble on disk).
  const store = extraArgs.includes('--data') ? [] : ['--in-memory'];
  const p = spawn(bin, ['coordinator', ...store, '--config', cfgPath, '--listen', `127.0.0.1:${port}`, ...extraArgs],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  p.stdout.on('data', (d) => { out += d; });
  p.stderr.on('data', (d) => { out += d; });
  const tls = extraArgs.includes('--tls-cert');
  const url = `${tls ? 'https' : 'http'}://127.0.0.1:${port}`;
  const exited = new Promise((r) => p.once('exit', r));
  // Over TLS this process may not trust the certificate: wait for the log line.
  const up = tls ? waitOutput(() => out, 'listening on', 20000) : waitUp(`${url}/healthz`);
  await Promise.race([up, exited.then(() => { throw new Error(`coordinator exited: ${out}`); })]);
  return {
    url,
    port,
    pid: p.pid,
    output: () => out,
    async stop() {
      if (p.exitCode === null) { p.kill('SIGTERM'); await exited; }
    },
    /** Kills the process (SIGKILL: no shutdown) and waits for its end. */
    async kill() {
      if (p.exitCode === null && p.signalCode === null) { p.kill('SIGKILL'); await exited; }
    },
  };
}

/** Waits until output() contains text, polling for at most ms. */
export async function waitOutput(output, text, ms) {
  const end = Date.now() + ms;
  while (!output().includes(text)) {
    if (Date.now() > end) throw new Error(`no ${JSON.stringify(text)} within ${ms} ms in:\n${output()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The coordinator's global count of (limiter, key) in its current window (GET /v1/limiters/{name}/keys/{key}). */
export async function globalView(url, limiter, key) {
  const r = await fetch(`${url}/v1/limiters/${encodeURIComponent(limiter)}/keys/${encodeURIComponent(key)}`);
  return { status: r.status, body: await r.json() };
}
