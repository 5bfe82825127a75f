// `npm run cluster` (CONTRACT §15): install what is missing, build, and run a 3-node NATS cluster with two api and
// two pipeline processes on loopback (dist/cluster.js). Ctrl-C or SIGTERM stops everything.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { build, ensureDependencies, ensureNatsServer, root } from './setup.mjs';

ensureDependencies();
ensureNatsServer();
build();
const child = spawn(process.execPath, [path.join(root, 'dist', 'cluster.js')], { stdio: 'inherit' });
// Passed on (a terminal's Ctrl-C reaches the launcher already; it takes one stop asked twice as one).
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => {
  process.exitCode = code ?? (signal ? 1 : 0);
});
