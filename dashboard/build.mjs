// Builds the dashboard (CONTRACT §14) into dist/dashboard: one ES module bundle and its CSS (esbuild, minified),
// and the page. The service serves that directory; nothing is fetched from elsewhere at run time.
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.join(here, '..', 'dist', 'dashboard');

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
await build({
  entryPoints: { app: path.join(here, 'src', 'main.ts') },
  bundle: true,
  format: 'esm',
  minify: true,
  target: ['chrome120', 'firefox120'],
  outdir: out,
  jsx: 'preserve',
  legalComments: 'none',
  logLevel: 'warning',
});
copyFileSync(path.join(here, 'index.html'), path.join(out, 'index.html'));
