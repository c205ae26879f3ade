import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const tsc = path.join(here, '../node_modules/typescript/bin/tsc');
const workersTypes = path.join(here, '../node_modules/@cloudflare/workers-types/package.json');

function compiles(project) {
  try {
    execFileSync(process.execPath, [tsc, '-p', path.join(here, project, 'tsconfig.json')], { encoding: 'utf8' });
  } catch (e) {
    assert.fail(`tsc -p ${project}: ${e.stdout}${e.stderr}`);
  }
}

test('the TypeScript declarations compile against the documented usage', { skip: existsSync(tsc) ? false : 'typescript is not installed (npm ci in edge/js)', timeout: 60000 }, () => {
  compiles('types');
});

test('a Worker in TypeScript (bundler resolution, @cloudflare/workers-types, --strict) imports the package and its module with no declarations of its own',
  { skip: existsSync(tsc) && existsSync(workersTypes) ? false : 'typescript or @cloudflare/workers-types is not installed (npm ci in edge/js)', timeout: 60000 }, () => {
    compiles('types-workers');
  });
