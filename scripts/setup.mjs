// Set-up shared by `npm start` and `npm test`: plain Node, no dependencies, so it runs on a fresh clone.
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', ...opts });
  if (r.status !== 0) {
    process.stderr.write(`\n${cmd} ${args.join(' ')} failed (exit ${r.status ?? r.signal})\n`);
    process.exit(r.status ?? 1);
  }
}

/** npm ci when node_modules is missing or older than the lock file. */
export function ensureDependencies() {
  const marker = path.join(root, 'node_modules', '.package-lock.json');
  const lock = path.join(root, 'package-lock.json');
  if (existsSync(marker) && statSync(marker).mtimeMs >= statSync(lock).mtimeMs) return;
  process.stderr.write('installing npm dependencies…\n');
  run('npm', ['ci', '--no-audit', '--no-fund']);
}

function findNatsServer() {
  const dirs = [
    ...(process.env.PATH ?? '').split(path.delimiter),
    '/usr/sbin',
    '/usr/local/sbin',
    '/usr/bin',
    '/usr/local/bin',
  ];
  return dirs.some((d) => d && existsSync(path.join(d, 'nats-server')));
}

/** Installs a Debian package with apt when we are root on Debian; false when we cannot. */
function aptInstall(pkg) {
  const debian = existsSync('/etc/debian_version');
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  if (!debian || !isRoot) return false;
  process.stderr.write(`${pkg} is missing: installing it with apt-get…\n`);
  run('apt-get', ['update', '-qq']);
  run('apt-get', ['install', '-y', '-qq', pkg], {
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  return true;
}

/** nats-server is needed unless NATS_URL points at a running one; on Debian as root it is installed with apt. */
export function ensureNatsServer() {
  if (process.env.NATS_URL || process.env.NATS_SERVER_BIN || findNatsServer()) return;
  if (aptInstall('nats-server')) return;
  const debian = existsSync('/etc/debian_version');
  process.stderr.write(
    [
      'nats-server (2.9 or newer, with JetStream) is required and was not found on PATH.',
      debian
        ? '  Install it: sudo apt-get install -y nats-server'
        : '  Install nats-server 2.9+ from your package manager or the NATS project releases,',
      '  or set NATS_SERVER_BIN to its path, or NATS_URL to a running server with JetStream enabled.',
      '',
    ].join('\n'),
  );
  process.exit(1);
}

/** Where the browser tests find Chromium: CHROMIUM_BIN, or Debian's package. */
export const chromiumPath = () =>
  process.env.CHROMIUM_BIN ?? ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));

/**
 * The dashboard's browser tests need Chromium (Debian's `chromium`, driven by playwright-core): installed with apt
 * when missing and we are root on Debian, as nats-server is. Otherwise the tests fail and say why.
 */
export function ensureChromium() {
  if (chromiumPath() || aptInstall('chromium')) return;
  process.stderr.write(
    'chromium was not found and cannot be installed here: the dashboard tests will fail (set CHROMIUM_BIN).\n',
  );
}

/**
 * Compiles TypeScript to dist/: the service and its worker threads run compiled JavaScript; and the Node SDK
 * (sdk/node, a workspace package) to its dist/, which its tests load as an application would; and the dashboard's
 * bundle into dist/dashboard (esbuild), which the service serves.
 */
export function build() {
  run(process.execPath, [
    path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'),
    '-p',
    'tsconfig.build.json',
  ]);
  run(process.execPath, [path.join(root, 'sdk', 'node', 'build.mjs')]);
  run(process.execPath, [path.join(root, 'dashboard', 'build.mjs')]);
}

/**
 * Passes a stop on to `child`, the process these scripts run: SIGINT and SIGTERM (a terminal's Ctrl-C reaches
 * both already; the service and the cluster launcher take one stop asked twice as one), and a stop when this
 * script's parent goes (npm killed, or a shell that died without passing the signal on), so nothing is left
 * running behind a stopped `npm start` or `npm run cluster`. Exits as the child did.
 */
export function passStopTo(child) {
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
  const parent = process.ppid;
  const watch = setInterval(() => {
    if (process.ppid !== parent) child.kill('SIGTERM');
  }, 1000);
  watch.unref();
  child.on('exit', (code, signal) => {
    clearInterval(watch);
    process.exitCode = code ?? (signal ? 1 : 0);
  });
}
