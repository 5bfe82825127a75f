// Builds the dashboard (CONTRACT §14) into dist/dashboard: one ES module bundle and its CSS (esbuild, minified),
// and the page. The service serves that directory; nothing is fetched from elsewhere at run time.
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
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
// Compressed copies beside each asset, served as they are when the browser accepts them (no work per request).
for (const name of readdirSync(out)) {
  if (!/\.(js|css)$/.test(name)) continue;
  const file = path.join(out, name);
  const raw = readFileSync(file);
  writeFileSync(`${file}.gz`, gzipSync(raw, { level: 9 }));
  writeFileSync(`${file}.br`, brotliCompressSync(raw, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } }));
}
