// One version: the package's major version is the wire protocol version,
// which the Go packages (wire.Version, the coordinator's) and the module
// the package ships speak.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { VERSION, PROTOCOL_VERSION, Module } from '../src/index.js';
import { normalizeConfig, toWire } from '../src/config.js';
import { decode } from '../src/msgpack.js';
import { wasmModule, root } from './helpers.js';

test('package.json, the package, the Go wire package and the module carry one version', () => {
  const pkg = JSON.parse(readFileSync(path.join(root, 'edge/js/package.json'), 'utf8'));
  assert.equal(pkg.version, VERSION, 'src/version.js VERSION is package.json\'s version');
  assert.equal(Number(pkg.version.split('.')[0]), PROTOCOL_VERSION, 'the package\'s major version is the protocol version');
  const goVersion = /\nconst Version = (\d+)\n/.exec(readFileSync(path.join(root, 'wasm/wire/doc.go'), 'utf8'))?.[1];
  assert.equal(Number(goVersion), PROTOCOL_VERSION, 'wire.Version (Go: the coordinator, the edge host, the module\'s source)');
  // The module's own: the "v" of the batch it writes.
  const m = new Module(wasmModule);
  m.configure(toWire(normalizeConfig({ limiters: [{ name: 'a', algorithm: 'fixed_window', limit: 5, period: '1s', mode: 'approximate' }] }, true), 'iso-1'));
  assert.ok(m.decide(0, 'k', 1, 1_800_000_000_000_000_000n) >= 0);
  const batch = decode(m.syncOut(1_800_000_000_000_000_000n));
  assert.equal(Number(batch.v), PROTOCOL_VERSION, 'the module writes batches of the protocol version');
});
