// `npm test`: install what is missing, build (worker threads run compiled JS), then run every test once.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { build, ensureDependencies, ensureNatsServer, root } from './setup.mjs';

ensureDependencies();
ensureNatsServer();
build();
const vitest = path.join(root, 'node_modules', 'vitest', 'vitest.mjs');
const r = spawnSync(process.execPath, [vitest, 'run', ...process.argv.slice(2)], {
  cwd: root,
  stdio: 'inherit',
});
process.exit(r.status ?? 1);
