// Runs a compiled script from dist/ (benchmarks): `node scripts/run.mjs bench/ingest.ts [args]`.
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { build, ensureDependencies, ensureNatsServer, root } from './setup.mjs';

const [script, ...args] = process.argv.slice(2);
if (!script) {
  process.stderr.write('usage: node scripts/run.mjs <file.ts> [args]\n');
  process.exit(2);
}
ensureDependencies();
ensureNatsServer();
build();
process.argv = [process.argv[0], script, ...args];
const compiled = path.join(root, 'dist', script.replace(/\.ts$/, '.js'));
const mod = await import(pathToFileURL(compiled).href);
if (typeof mod.main === 'function') await mod.main(args);
