import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Worker threads run compiled JavaScript. From compiled code the worker sits beside its caller; when the caller
 * runs from TypeScript source (vitest), the compiled twin under dist/ is used, so tests need `npm run build`
 * first (the test script does it).
 */
export function workerFile(callerUrl: string, jsName: string): string {
  const callerPath = fileURLToPath(callerUrl);
  const dir = path.dirname(callerPath);
  if (callerPath.endsWith('.js')) return path.join(dir, jsName);
  let root = dir;
  while (!existsSync(path.join(root, 'package.json'))) {
    const up = path.dirname(root);
    if (up === root) throw new Error(`no package.json above ${dir}`);
    root = up;
  }
  const compiled = path.join(root, 'dist', path.relative(root, dir), jsName);
  if (!existsSync(compiled)) throw new Error(`${compiled} is missing: run \`npm run build\` first`);
  return compiled;
}

/**
 * Node options for the worker threads of a pool: the worker file (ESM) loaded with `import()`, not `require()`.
 * Piscina tries `require` first, and Node ≥ 20.19 loads ESM that way, synchronously; a worker terminated during
 * that load (a pool stopped right after it started) aborts the whole process (V8 fatal error in
 * `Module::IsGraphAsync`). Terminated during an `import()`, the worker just stops.
 */
export const WORKER_EXEC_ARGV = [
  // A process profiled with --cpu-prof (the ingest benchmark's --profile) profiles its workers too: a pool's
  // execArgv replaces the process's for its threads.
  ...process.execArgv.filter((a) => a.startsWith('--cpu-prof')),
  '--no-experimental-require-module',
];

/**
 * Names the calling thread (Linux: `/proc/thread-self/comm`, 15 bytes at most), so a stage's CPU can be told
 * apart from the others' in `top -H` and in the ingest benchmark's breakdown by thread. Elsewhere it does nothing.
 */
export function nameThread(name: string): void {
  try {
    writeFileSync('/proc/thread-self/comm', name.slice(0, 15));
  } catch {
    // Not Linux, or /proc not mounted: the thread keeps its name.
  }
}
