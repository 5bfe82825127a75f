// `npm start`: install what is missing, build, and run the service on its embedded defaults.
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { build, ensureDependencies, ensureNatsServer, root } from './setup.mjs';

ensureDependencies();
ensureNatsServer();
build();
const { main } = await import(pathToFileURL(path.join(root, 'dist', 'main.js')).href);
await main(process.argv.slice(2));
