// `npm run cluster` (CONTRACT §15): install what is missing, build, and run a 3-node NATS cluster with two api and
// two pipeline processes on loopback (dist/cluster.js). Ctrl-C or SIGTERM stops everything.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { build, ensureDependencies, ensureNatsServer, passStopTo, root } from './setup.mjs';

ensureDependencies();
ensureNatsServer();
build();
passStopTo(spawn(process.execPath, [path.join(root, 'dist', 'cluster.js')], { stdio: 'inherit' }));
