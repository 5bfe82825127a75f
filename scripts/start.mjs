// `npm start`: install what is missing, build, and run the service on its embedded defaults.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { build, ensureDependencies, ensureNatsServer, passStopTo, root } from './setup.mjs';

ensureDependencies();
ensureNatsServer();
build();
const entry = path.join(root, 'dist', 'main.js');
const { nodeFlags, serviceProcessEnv } = await import(pathToFileURL(entry).href);
let flags;
try {
  flags = nodeFlags();
} catch {
  // A bad configuration: the service names the variable (and exits 2) when it starts.
  flags = [];
}
// The service runs as a child so that it gets its V8 flags; this process waits for its graceful stop.
passStopTo(
  spawn(process.execPath, [...flags, entry, ...process.argv.slice(2)], {
    stdio: 'inherit',
    env: serviceProcessEnv(),
  }),
);
