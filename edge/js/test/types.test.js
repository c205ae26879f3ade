import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const tsc = path.join(here, '../node_modules/typescript/bin/tsc');

test('the TypeScript declarations compile against the documented usage', { skip: existsSync(tsc) ? false : 'typescript is not installed (npm ci in edge/js)', timeout: 60000 }, () => {
  try {
    execFileSync(process.execPath, [tsc, '-p', path.join(here, 'types/tsconfig.json')], { encoding: 'utf8' });
  } catch (e) {
    assert.fail(`tsc: ${e.stdout}${e.stderr}`);
  }
});
