// Builds the starter (examples/worker) as a user does: packs the package
// (npm pack: the prepack script copies the module in), installs the
// tarball into a fresh project holding the starter's files, and bundles
// it with wrangler's dry run (wrangler from edge/js's dev dependencies).
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { root } from './helpers.js';

const require = createRequire(import.meta.url);
const pkgDir = path.join(root, 'edge/js');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const quiet = { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] };

/** The wrangler CLI of edge/js's dev dependencies, or null when not installed. */
export function wranglerBin() {
  try {
    const bin = path.join(path.dirname(require.resolve('wrangler/package.json')), 'bin', 'wrangler.js');
    return existsSync(bin) ? bin : null;
  } catch { return null; }
}

/**
 * Packs edge/js into dir; returns the tarball's path and npm's list of
 * the files in it.
 */
export function pack(dir) {
  const out = execFileSync(npm, ['pack', '--json', '--pack-destination', dir, '--loglevel=error'], { ...quiet, cwd: pkgDir });
  const [info] = JSON.parse(out.slice(out.indexOf('[')));
  return { tarball: path.join(dir, info.filename), files: info.files.map((f) => f.path) };
}

/**
 * Packs the package, copies examples/worker into a new temporary project,
 * installs the tarball there (offline: the package has no dependencies;
 * the starter's devDependency wrangler is omitted and edge/js's is used)
 * and bundles the Worker with `wrangler deploy --dry-run --outdir dist`.
 * Returns {project, dist, tarball, files, bundleFiles}.
 */
export function buildStarter() {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'edgelimit-starter-'));
  const { tarball, files } = pack(tmp);
  const project = path.join(tmp, 'worker');
  mkdirSync(project);
  for (const f of readdirSync(path.join(pkgDir, 'examples/worker'))) copyFileSync(path.join(pkgDir, 'examples/worker', f), path.join(project, f));
  // npm resolves devDependencies even with --omit=dev, and offline it can
  // only if its cache holds wrangler's registry metadata (npm ci does not
  // put it there): the copy installs without them.
  const pj = JSON.parse(readFileSync(path.join(project, 'package.json'), 'utf8'));
  delete pj.devDependencies;
  writeFileSync(path.join(project, 'package.json'), JSON.stringify(pj, null, 2));
  execFileSync(npm, ['install', '--offline', '--omit=dev', '--no-audit', '--no-fund', '--loglevel=error', tarball], { ...quiet, cwd: project });
  const env = { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: '1', WRANGLER_LOG_PATH: path.join(tmp, 'wrangler-logs') };
  try {
    execFileSync(process.execPath, [wranglerBin(), 'deploy', '--dry-run', '--outdir', 'dist'], { ...quiet, cwd: project, env });
  } catch (e) {
    throw new Error(`wrangler deploy --dry-run: ${e.stdout}${e.stderr}`);
  }
  const dist = path.join(project, 'dist');
  return { project, dist, tarball, files, bundleFiles: readdirSync(dist) };
}

/**
 * Bundles the starter project with esbuild alone (the esbuild wrangler
 * depends on), keeping the .wasm import external: the bundle imports
 * 'edgelimit/edgelimit.wasm', a module workerd is given by that name.
 * Returns the output directory.
 */
export function esbuildStarter(project) {
  const esbuild = path.join(path.dirname(require.resolve('esbuild/package.json')), 'bin', 'esbuild');
  const out = path.join(project, 'dist-esbuild');
  try {
    execFileSync(esbuild, ['worker.js', '--bundle', '--format=esm', '--platform=neutral', '--external:*.wasm', `--outdir=${out}`], { ...quiet, cwd: project });
  } catch (e) {
    throw new Error(`esbuild: ${e.stdout}${e.stderr}`);
  }
  return out;
}
