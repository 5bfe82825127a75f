import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isAlive, runningNatsServer } from '../../broker/nats-server.js';
import { nodeFlags, serviceProcessEnv } from '../../main.js';

/**
 * The service as a separate OS process (`node dist/main.js`), for benchmarks that must kill it for real: an
 * in-process service cannot be SIGKILLed without taking the benchmark down with it.
 */

/** Anything shaped like a key or session token, kept out of the log tail (the tail may be printed). */
const SECRET_PATTERN = /svc_(test|live|sess)_[A-Za-z0-9]{32}/g;

const LOG_TAIL_LINES = 200;

/** Per-key rate limits lifted: a benchmark measures the service, not its limits. */
export const UNLIMITED_RATES = {
  INGEST_RATE_PER_SEC: '1000000',
  INGEST_BURST: '1000000',
  READ_RATE_PER_SEC: '1000000',
  READ_BURST: '1000000',
};

export interface ServiceProcessOptions {
  /** Path of the compiled entry (dist/main.js). */
  mainJs: string;
  dataDir: string;
  port: number;
  logLevel?: string;
  /** Extra environment for the service (config knobs). */
  env?: Record<string, string>;
  /** Node options before the entry, e.g. `--cpu-prof --cpu-prof-dir=…` (not allowed in NODE_OPTIONS). */
  nodeArgs?: string[];
  /** Its own process group (as `npm start` in a terminal has), so `kill -- -<pid>` reaches it and its children. */
  detached?: boolean;
}

export interface LogLine {
  stream: 'stdout' | 'stderr';
  text: string;
}

export interface ServiceExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** The compiled service entry, found relative to a compiled script in dist/<dir>/. */
export function serviceEntry(scriptUrl: string): string {
  return fileURLToPath(new URL('../main.js', scriptUrl));
}

export { isAlive };

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function waitDead(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!isAlive(pid)) return true;
    await sleep(25);
  }
  return !isAlive(pid);
}

/** The pid in DATA_DIR/nats/nats-server.pid when that process is alive and really a nats-server. */
export const natsServerPid = (dataDir: string): Promise<number | null> =>
  runningNatsServer(path.join(dataDir, 'nats', 'nats-server.pid'));

/** Kills a nats-server that a SIGKILLed service left behind; returns its pid when there was one. */
export async function killOrphanNats(dataDir: string): Promise<number | null> {
  const pid = await natsServerPid(dataDir);
  if (pid === null) return null;
  try {
    process.kill(pid, 'SIGTERM');
  } catch {
    return pid;
  }
  if (!(await waitDead(pid, 10_000))) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
    await waitDead(pid, 5_000);
  }
  return pid;
}

/**
 * Signs up a fresh account (its own workspace) on the service at `url` and answers its test key; `settings`, when
 * given, are patched into the workspace's settings first (by the sign-up's session, which is never answered).
 */
export async function signupKey(
  url: string,
  tag = 'bench',
  settings?: Record<string, unknown>,
): Promise<string> {
  const res = await fetch(`${url}/api/auth/signup`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: `${tag}-${Date.now()}@bench.example`, password: 'benchmark password' }),
  });
  const body = (await res.json()) as { testKey?: { key?: string }; session?: { token?: string } };
  if (res.status !== 201 || !body.testKey?.key) throw new Error(`sign-up at ${url} answered ${res.status}`);
  if (settings) {
    // Settings are an admin's: the sign-up's session (the owner) sets them, the key could not.
    const patched = await fetch(`${url}/api/workspace/settings`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${body.session?.token}` },
      body: JSON.stringify(settings),
    });
    if (patched.status !== 200) throw new Error(`settings at ${url} answered ${patched.status}`);
  }
  return body.testKey.key;
}

/** One running `node dist/main.js`. */
export class ServiceProcess {
  readonly opts: ServiceProcessOptions;
  readonly child: ChildProcess;
  readonly pid: number;
  readonly startedAt = Date.now();
  readonly exited: Promise<ServiceExit>;
  /** The last lines of output, for a diagnosis after a failure. */
  readonly tail: LogLine[] = [];
  /** Lines at pino level warn (40) or above. */
  readonly problems: string[] = [];
  #exit: ServiceExit | null = null;

  private constructor(opts: ServiceProcessOptions, child: ChildProcess) {
    this.opts = opts;
    this.child = child;
    if (child.pid === undefined) throw new Error('the service process did not start');
    this.pid = child.pid;
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.#exit = { code, signal };
        resolve(this.#exit);
      });
    });
    this.#follow('stdout');
    this.#follow('stderr');
  }

  static spawn(opts: ServiceProcessOptions): ServiceProcess {
    // A benchmark measures the service, not its per-key rate limits: lift them unless the run sets its own.
    const env = serviceProcessEnv({ ...process.env, ...UNLIMITED_RATES, ...opts.env });
    // Unless asked for, the service runs its own embedded nats-server under DATA_DIR: the default setup.
    if (!opts.env?.NATS_URL) delete env.NATS_URL;
    env.PORT = String(opts.port);
    env.HOST = '127.0.0.1';
    env.DATA_DIR = opts.dataDir;
    // Quiet unless asked: the caller's level first, then the run's `--env LOG_LEVEL=info` (the compactor's passes).
    env.LOG_LEVEL = opts.logLevel ?? opts.env?.LOG_LEVEL ?? 'warn';
    // As `npm start` does: with the node flags the configuration asks for (V8's, which only a command line sets).
    const child = spawn(process.execPath, [...nodeFlags(env), ...(opts.nodeArgs ?? []), opts.mainJs], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: opts.detached ?? false,
    });
    return new ServiceProcess(opts, child);
  }

  get url(): string {
    return `http://127.0.0.1:${this.opts.port}`;
  }

  /** Signs up a fresh account and answers its test key (the benchmark's credentials). */
  signup(tag = 'bench'): Promise<string> {
    return signupKey(this.url, tag);
  }

  get exit(): ServiceExit | null {
    return this.#exit;
  }

  #follow(stream: 'stdout' | 'stderr'): void {
    const source = this.child[stream];
    if (!source) return;
    let pending = '';
    source.setEncoding('utf8');
    source.on('data', (chunk: string) => {
      pending += chunk;
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) this.#line(stream, line);
    });
    source.on('end', () => {
      if (pending) this.#line(stream, pending);
      pending = '';
    });
  }

  #line(stream: 'stdout' | 'stderr', text: string): void {
    if (!text.trim()) return;
    text = text.replace(SECRET_PATTERN, 'svc_$1_[redacted]');
    this.tail.push({ stream, text });
    if (this.tail.length > LOG_TAIL_LINES) this.tail.shift();
    if (stream === 'stderr') {
      this.problems.push(text);
      return;
    }
    if (text.startsWith('{')) {
      try {
        const rec = JSON.parse(text) as { level?: unknown };
        if (typeof rec.level === 'number' && rec.level >= 40) this.problems.push(text);
      } catch {
        // not a pino line
      }
    }
  }

  /** Polls GET /readyz until 200; fails when the process exits first or the time is up. */
  async waitReady(timeoutMs = 60_000): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (this.#exit) {
        throw new Error(
          `the service exited before it was ready (code ${this.#exit.code}, signal ${this.#exit.signal})\n${this.tailText(30)}`,
        );
      }
      try {
        const res = await fetch(`${this.url}/readyz`, { signal: AbortSignal.timeout(2000) });
        await res.arrayBuffer();
        if (res.status === 200) return Date.now() - this.startedAt;
      } catch {
        // not listening yet
      }
      await sleep(50);
    }
    throw new Error(`the service was not ready after ${timeoutMs} ms\n${this.tailText(30)}`);
  }

  /** Sends a signal and waits for the exit; SIGKILL follows when it takes longer than `timeoutMs`. */
  async stop(
    signal: NodeJS.Signals = 'SIGTERM',
    timeoutMs = 30_000,
  ): Promise<ServiceExit & { forced: boolean }> {
    if (this.#exit) return { ...this.#exit, forced: false };
    try {
      process.kill(this.pid, signal);
    } catch {
      // already gone; the exit event still comes
    }
    let forced = false;
    const timer = setTimeout(() => {
      forced = true;
      try {
        process.kill(this.pid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }, timeoutMs);
    const exit = await this.exited;
    clearTimeout(timer);
    return { ...exit, forced };
  }

  tailText(lines = 40): string {
    return this.tail
      .slice(-lines)
      .map((l) => `  [${l.stream}] ${l.text}`)
      .join('\n');
  }
}

/**
 * Leaves nothing running: the service (SIGKILL if a polite stop fails) and any nats-server whose pid file
 * is in the data directory. Safe to call on every path, more than once.
 */
export async function cleanupService(svc: ServiceProcess | null, dataDir: string): Promise<void> {
  if (svc && !svc.exit) {
    await svc.stop('SIGTERM', 15_000).catch(() => {});
  }
  await killOrphanNats(dataDir).catch(() => null);
}
