import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/**
 * Launches and supervises a nats-server child with JetStream: the embedded default of `npm start`, and the
 * real broker every integration test starts for itself.
 */

export interface NatsServerOptions {
  /** Holds the config file, the pid file and the JetStream store. */
  dir: string;
  /** 0 or absent: a free port. */
  port?: number;
  bin?: string;
  /** max_payload: must fit the largest request body we publish. */
  maxPayloadBytes?: number;
  /** The Go runtime's soft memory limit (GOMEMLIMIT) in MiB, unless the environment sets one; 0 or absent: none. */
  memoryLimitMb?: number;
  log?: (line: string) => void;
  /**
   * A node of a JetStream cluster on this host: its unique name, the port its routes listen on, and the other
   * nodes' route ports (CONTRACT §15).
   */
  cluster?: { name: string; serverName: string; routePort: number; peerRoutePorts: number[] };
  /** Start it again when it dies on its own (default true). A fault test that kills a node restarts it itself. */
  restartOnExit?: boolean;
}

/**
 * The Go scheduler's processors for a nats-server started here, unless GOMAXPROCS is set: half the cores, at least
 * one. With every core, an idle processor spins looking for work (nanosleep, futex wake-ups) that a broker beside
 * a busy service takes from it: on two cores, the ingest benchmark's nats-server spent 9.3–10.0 µs of CPU per
 * execution with two and 6.9–8.8 with one (three alternating runs each), for the same stored rate. One processor
 * runs a broker at up to a core: more than 100k executions/s of the bench's bodies at those figures.
 */
const brokerProcs = () => Math.max(1, Math.floor(os.availableParallelism() / 2));

export interface NatsServerHandle {
  readonly url: string;
  readonly port: number;
  /** Stops the server (SIGTERM, then SIGKILL after 10 s); it stays down until start(). */
  stop(): Promise<void>;
  /** Starts it again on the same port and store (a stopped broker coming back). */
  start(): Promise<void>;
  /**
   * Asks it to stop (SIGTERM) without waiting: for a process about to exit, from an `exit` listener, so that the
   * broker (its own process group) does not outlive it. It shuts down cleanly on its own.
   */
  signalStop(): void;
  /** The running server's process id (null while it is down). */
  pid(): number | null;
  /** Kills it as a crash would (SIGKILL) and waits for its exit; it stays down until start(). */
  kill(): Promise<void>;
}

const SEARCH_DIRS = ['/usr/sbin', '/usr/local/sbin', '/usr/bin', '/usr/local/bin'];

export function findNatsServer(explicit?: string): string | null {
  if (explicit) return existsSync(explicit) ? explicit : null;
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter), ...SEARCH_DIRS];
  for (const dir of dirs) {
    if (!dir) continue;
    const candidate = path.join(dir, 'nats-server');
    if (existsSync(candidate)) return candidate;
  }
  return null;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

/** Whether a process runs: EPERM (not ours) is running; a zombie (killed, not reaped: a container's init may never reap) is not. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

async function waitFor(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    sock.once('connect', () => {
      sock.destroy();
      resolve(true);
    });
    sock.once('error', () => resolve(false));
  });
}

/**
 * The pid in a nats-server pid file when that process runs and is a nats-server: the file outlives its process,
 * and a recycled pid must not get an unrelated program killed.
 */
export async function runningNatsServer(pidFile: string): Promise<number | null> {
  let pid: number;
  try {
    pid = Number.parseInt(await fs.readFile(pidFile, 'utf8'), 10);
  } catch {
    return null;
  }
  if (!Number.isInteger(pid) || pid <= 0 || !isAlive(pid)) return null;
  const cmdline = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  return cmdline.includes('nats-server') ? pid : null;
}

/**
 * A server left behind by a process that was killed with SIGKILL still holds the store: stop it before a new
 * one opens the same store, or the two would write it at once.
 */
async function stopStale(pidFile: string): Promise<void> {
  const pid = await runningNatsServer(pidFile);
  if (pid === null) return;
  process.kill(pid, 'SIGTERM');
  await waitFor(() => !isAlive(pid), 10_000, `stale nats-server ${pid} to stop`).catch(() => {
    if (isAlive(pid)) process.kill(pid, 'SIGKILL');
  });
}

export async function startNatsServer(opts: NatsServerOptions): Promise<NatsServerHandle> {
  const bin = findNatsServer(opts.bin);
  if (!bin) throw new Error('nats-server not found (install it: apt-get install -y nats-server)');
  const dir = path.resolve(opts.dir);
  const storeDir = path.join(dir, 'store');
  const pidFile = path.join(dir, 'nats-server.pid');
  const confFile = path.join(dir, 'nats-server.conf');
  await fs.mkdir(storeDir, { recursive: true });
  await stopStale(pidFile);
  const port = opts.port || (await freePort());
  const maxPayload = opts.maxPayloadBytes ?? 8 * 1024 * 1024;
  const conf = [
    `listen: "127.0.0.1:${port}"`,
    `max_payload: ${maxPayload}`,
    // Pending bytes per client must hold a few max-size messages.
    `max_pending: ${Math.max(64 * 1024 * 1024, maxPayload * 4)}`,
    'jetstream {',
    `  store_dir: ${JSON.stringify(storeDir)}`,
    '  max_memory_store: 268435456',
    '}',
    ...(opts.cluster
      ? [
          `server_name: ${JSON.stringify(opts.cluster.serverName)}`,
          'cluster {',
          `  name: ${JSON.stringify(opts.cluster.name)}`,
          `  listen: "127.0.0.1:${opts.cluster.routePort}"`,
          `  routes: [${opts.cluster.peerRoutePorts.map((p) => JSON.stringify(`nats-route://127.0.0.1:${p}`)).join(', ')}]`,
          '}',
        ]
      : []),
    '',
  ].join('\n');
  await fs.writeFile(confFile, conf);

  const log = opts.log ?? (() => {});
  let child: ChildProcess | null = null;
  let stopping = false;
  let stopped: Promise<void> | null = null;
  /** Deaths in a row without staying up a while: the pause before the next start grows with them. */
  let crashes = 0;
  const STAYED_UP_MS = 30_000;

  /** Starts one nats-server and waits until it takes connections. */
  const spawnOnce = async () => {
    // Its own process group: a terminal's Ctrl-C reaches only the service, which stops the broker last.
    const proc = spawn(bin, ['-c', confFile], {
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      env: {
        GOMAXPROCS: String(brokerProcs()),
        ...(opts.memoryLimitMb ? { GOMEMLIMIT: `${opts.memoryLimitMb}MiB` } : {}),
        ...process.env,
      },
    });
    child = proc;
    const forward = (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) log(line.trim());
    };
    proc.stdout?.on('data', forward);
    proc.stderr?.on('data', forward);
    let exited = false;
    let readyAt = 0;
    proc.once('exit', (code, signal) => {
      exited = true;
      if (child === proc) child = null;
      if (stopping || !readyAt || opts.restartOnExit === false) return;
      crashes = Date.now() - readyAt > STAYED_UP_MS ? 1 : crashes + 1;
      log(`nats-server exited unexpectedly (code ${code}, signal ${signal}); starting it again`);
      void restart();
    });
    await fs.writeFile(pidFile, String(proc.pid));
    await waitFor(async () => exited || (await canConnect(port)), 30_000, `nats-server on port ${port}`);
    if (exited) throw new Error(`nats-server failed to start on port ${port}; see its log lines above`);
    readyAt = Date.now();
  };

  /** A broker that died on its own is started again (its store is on disk), with a growing pause between tries. */
  const restart = async () => {
    for (let attempt = crashes - 1; !stopping; attempt++) {
      await new Promise((r) => setTimeout(r, Math.min(10_000, 250 * 2 ** attempt)));
      if (stopping || child) return;
      try {
        await spawnOnce();
        log('nats-server started again');
        return;
      } catch (err) {
        log(`nats-server did not start again: ${(err as Error).message}`);
      }
    }
  };

  const launch = async () => {
    // A start while a stop is under way waits for it: the old process's exit must not read as a crash.
    await stopped;
    stopping = false;
    await spawnOnce();
  };

  const stop = async () => {
    stopping = true;
    const proc = child;
    if (!proc || proc.exitCode !== null) return;
    const done = new Promise<void>((r) => proc.once('exit', () => r()));
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
    stopped = done.then(() => clearTimeout(timer));
    await stopped;
    await fs.rm(pidFile, { force: true });
  };

  const signalStop = () => {
    stopping = true;
    const proc = child;
    if (proc && proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
  };

  await launch();
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    stop,
    start: launch,
    signalStop,
    pid: () => (child as ChildProcess | null)?.pid ?? null,
    kill: async () => {
      stopping = true;
      const proc = child as ChildProcess | null;
      if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
      const done = new Promise<void>((r) => proc.once('exit', () => r()));
      proc.kill('SIGKILL');
      await done;
    },
  };
}
