// Builds the package twice from src/: ES modules into dist/esm, CommonJS into dist/cjs (its own package.json says so).
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const tsc = path.join(path.dirname(require.resolve('typescript/package.json')), 'bin', 'tsc');
const run = (...args) =>
  execFileSync(process.execPath, [tsc, '-p', path.join(here, 'tsconfig.json'), ...args], {
    stdio: 'inherit',
  });

rmSync(path.join(here, 'dist'), { recursive: true, force: true });
run();
run('--module', 'commonjs', '--moduleResolution', 'bundler', '--outDir', path.join(here, 'dist', 'cjs'));
mkdirSync(path.join(here, 'dist', 'cjs'), { recursive: true });
writeFileSync(path.join(here, 'dist', 'cjs', 'package.json'), '{ "type": "commonjs" }\n');
