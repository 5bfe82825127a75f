import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, existsSync, type WriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { freePort, type NatsServerHandle, startNatsServer } from './broker/nats-server.js';
import { nodeFlags, serviceProcessEnv } from './main.js';

/**
 * `npm run cluster` (CONTRACT §15): on loopback, a 3-node NATS cluster with JetStream (a config file, a route port
 * and a store of its own per node; the stream and every bucket replicated three times), then two `pipeline` and two
 * `api` processes sharing one DATA_DIR, each its own `node dist/main.js <role>`. When all are ready it prints one
 * JSON line on stdout; SIGINT or SIGTERM stops the processes, then the nodes.
 *
 * The same pieces serve the fault test (test/cluster), which kills and restarts nodes and processes one by one.
 */

export const CLUSTER_NODES = 3;
const CLUSTER_NAME = 'svc';
/** How long a process may take to say it started (a pipeline replays its journal first). */
const READY_TIMEOUT_MS = 60_000;

export type ProcessRole = 'api' | 'pipeline';

/** One `api` or `pipeline` process: its log goes to a file under the cluster's directory. */
export class ServiceNode {
  readonly name: string;
  readonly role: ProcessRole;
  readonly port: number;
  #child: ChildProcess | null = null;
  #log: WriteStream | null = null;
  readonly #spawnArgs: { mainJs: string; env: Record<string, string>; logFile: string };

  constructor(
    name: string,
    role: ProcessRole,
    port: number,
    spawnArgs: { mainJs: string; env: Record<string, string>; logFile: string },
  ) {
    this.name = name;
    this.role = role;
    this.port = port;
    this.#spawnArgs = spawnArgs;
  }

  get url(): string | null {
    return this.role === 'api' ? `http://127.0.0.1:${this.port}` : null;
  }

  get pid(): number | null {
    return this.#child?.pid ?? null;
  }

  /**
   * Starts the process and resolves once it says it is ready (over IPC); fails if it exits first, or is not ready
   * in time (then it is killed).
   */
  async start(): Promise<void> {
    if (this.#child) throw new Error(`${this.name} is running`);
    const { mainJs, env, logFile } = this.#spawnArgs;
    // Each process logs to its own file here (stdout), not to a LOG_FILE the launcher's environment names.
    const { LOG_FILE: _shared, ...inherited } = process.env;
    const fullEnv = serviceProcessEnv({ ...inherited, ...env });
    if (!this.#log) {
      this.#log = createWriteStream(logFile, { flags: 'a' });
      // A log that cannot be written must not take the launcher down.
      this.#log.on('error', () => {});
    }
    // An IPC channel: the process says it is ready on it, and stops when it closes (this launcher died).
    const child = spawn(process.execPath, [...nodeFlags(fullEnv), mainJs, this.role], {
      env: fullEnv,
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    this.#child = child;
    const log = this.#log;
    child.stdout?.pipe(log, { end: false });
    child.stderr?.pipe(log, { end: false });
    child.on('error', (err) => log.write(`${this.name}: ${err.message}\n`));
    const ready = new Promise<void>((resolve, reject) => {
      child.on('message', (m: { type?: string }) => {
        if (m?.type === 'ready') resolve();
      });
      child.once('exit', (code, signal) =>
        reject(
          new Error(`${this.name} exited (code ${code}, signal ${signal}) before it started; see ${logFile}`),
        ),
      );
    });
    child.once('exit', () => {
      if (this.#child === child) this.#child = null;
    });
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        ready,
        new Promise((_, reject) => {
          timer = setTimeout(
            () =>
              reject(new Error(`${this.name} did not start within ${READY_TIMEOUT_MS} ms; see ${logFile}`)),
            READY_TIMEOUT_MS,
          );
        }),
      ]);
    } catch (err) {
      child.kill('SIGKILL');
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Sends a signal and waits for the process to exit (SIGKILL after `graceMs` when the signal is gentler). */
  async stop(signal: NodeJS.Signals = 'SIGTERM', graceMs = 20_000): Promise<void> {
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    // 'close': its output is read to the end too (nothing is written to a log that was ended).
    const exited = new Promise<void>((r) => child.once('close', () => r()));
    child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(timer);
  }

  async close(): Promise<void> {
    await this.stop();
    await new Promise<void>((r) => (this.#log ? this.#log.end(r) : r()));
    this.#log = null;
  }
}

export interface Cluster {
  dataDir: string;
  nats: NatsServerHandle[];
  /** The nodes' client URLs, comma-separated: every process's NATS_URL. */
  natsUrl: string;
  api: ServiceNode[];
  pipeline: ServiceNode[];
  /** What `npm run cluster` prints when all are ready (CONTRACT §15). */
  describe(): {
    api: string[];
    nats: { url: string; pid: number | null }[];
    pipeline: { pid: number | null }[];
    dataDir: string;
  };
  stop(): Promise<void>;
}

export interface ClusterOptions {
  dataDir: string;
  /** The api processes' ports; 0 (or absent) a free one each. */
  apiPorts?: number[];
  apis?: number;
  pipelines?: number;
  /** More environment for every process (e.g. a test's LOG_LEVEL). */
  env?: Record<string, string>;
  /** The built entry; default dist/main.js beside this file, or under dist/ from the source tree. */
  mainJs?: string;
  /** A node that dies is not started again by its supervisor: a fault test restarts it itself. */
  restartNodes?: boolean;
  /** Given at once, before anything starts: stops whatever has started so far (a signal during start-up). */
  onStop?: (stop: () => Promise<void>) => void;
}

function defaultMainJs(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const beside = path.join(here, 'main.js');
  if (existsSync(beside)) return beside;
  return path.join(here, 'dist', 'main.js');
}

/** Waits until the cluster's JetStream answers (a meta leader is elected): before it, nothing can be provisioned. */
async function jetStreamReady(natsUrl: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const nc = await connect({ servers: natsUrl.split(','), maxReconnectAttempts: -1, reconnectTimeWait: 250 });
  try {
    // Not checked at creation: the first answer is what the loop waits for.
    const jsm = await jetstreamManager(nc, { timeout: 2000, checkAPI: false });
    for (;;) {
      try {
        await jsm.getAccountInfo();
        return;
      } catch (err) {
        if (Date.now() > deadline)
          throw new Error(
            `JetStream of the cluster not ready after ${timeoutMs} ms: ${(err as Error).message}`,
          );
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  } finally {
    await nc.close();
  }
}

/** Starts the nodes, then the processes: the first pipeline alone (it provisions the stream and buckets), then the rest. */
export async function startCluster(opts: ClusterOptions): Promise<Cluster> {
  const dataDir = path.resolve(opts.dataDir);
  const base = path.join(dataDir, '_cluster');
  const logs = path.join(base, 'logs');
  await fs.mkdir(logs, { recursive: true });
  const nats: NatsServerHandle[] = [];
  const natsLogs = Array.from({ length: CLUSTER_NODES }, (_, i) =>
    createWriteStream(path.join(logs, `nats-${i + 1}.log`), { flags: 'a' }),
  );
  const api: ServiceNode[] = [];
  const pipeline: ServiceNode[] = [];
  const stop = async () => {
    await Promise.all([...api, ...pipeline].map((p) => p.close()));
    // (A slot is empty when its node never started.)
    await Promise.all(nats.filter(Boolean).map((n) => n.stop()));
    for (const l of natsLogs) l.end();
  };
  opts.onStop?.(stop);
  // However this process ends, the nodes (their own process groups) are asked to stop; the api and pipeline
  // processes stop by themselves when their IPC channel closes.
  process.once('exit', () => {
    for (const n of nats) n?.signalStop();
  });
  try {
    const routePorts: number[] = [];
    const clientPorts: number[] = [];
    for (let i = 0; i < CLUSTER_NODES; i++) {
      routePorts.push(await freePort());
      clientPorts.push(await freePort());
    }
    // Each node kept as soon as it runs: if another fails to start, the ones that did are stopped too.
    const started = await Promise.all(
      routePorts.map(async (routePort, i) => {
        const node = await startNatsServer({
          dir: path.join(base, `nats-${i + 1}`),
          port: clientPorts[i],
          restartOnExit: opts.restartNodes ?? true,
          cluster: {
            name: CLUSTER_NAME,
            serverName: `n${i + 1}`,
            routePort,
            peerRoutePorts: routePorts.filter((p) => p !== routePort),
          },
          log: (line) => natsLogs[i]!.write(`${line}\n`),
        });
        nats[i] = node;
        return node;
      }),
    );
    const natsUrl = started.map((n) => n.url).join(',');
    await jetStreamReady(natsUrl, 30_000);

    const mainJs = opts.mainJs ?? defaultMainJs();
    const env = {
      ...opts.env,
      DATA_DIR: dataDir,
      NATS_URL: natsUrl,
      NATS_REPLICAS: String(CLUSTER_NODES),
      HOST: '127.0.0.1',
      // The hint goes to a log file nobody reads here: `npm run cluster` prints its own.
      PRINT_FIRST_START_HINT: 'false',
    };
    const node = async (role: ProcessRole, i: number, port: number) =>
      new ServiceNode(`${role}-${i + 1}`, role, port, {
        mainJs,
        env: { ...env, PORT: String(port) },
        logFile: path.join(logs, `${role}-${i + 1}.log`),
      });
    for (let i = 0; i < (opts.pipelines ?? 2); i++) pipeline.push(await node('pipeline', i, 0));
    for (let i = 0; i < (opts.apis ?? 2); i++)
      api.push(await node('api', i, opts.apiPorts?.[i] || (await freePort())));
    await pipeline[0]?.start();
    await Promise.all([...pipeline.slice(1), ...api].map((p) => p.start()));
    return {
      dataDir,
      nats,
      natsUrl,
      api,
      pipeline,
      describe: () => ({
        api: api.map((a) => a.url!),
        nats: nats.map((n) => ({ url: n.url, pid: n.pid() })),
        pipeline: pipeline.map((p) => ({ pid: p.pid })),
        dataDir,
      }),
      stop,
    };
  } catch (err) {
    await stop().catch(() => {});
    throw err;
  }
}

/** `npm run cluster`: DATA_DIR (default ./data-cluster), PORT (the first api's; the second takes the next one). */
export async function main(): Promise<void> {
  const dataDir = process.env.DATA_DIR || './data-cluster';
  const port = Number(process.env.PORT ?? 8080);
  // Installed before anything starts: a signal during start-up stops what has started so far.
  let stopStarted: (() => Promise<void>) | null = null;
  let stopping = false;
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      process.stderr.write(`${signal}: stopping the api and pipeline processes, then the NATS nodes\n`);
      (stopStarted ?? (async () => {}))().then(
        () => process.exit(0),
        (err) => {
          process.stderr.write(`${(err as Error).stack}\n`);
          process.exit(1);
        },
      );
    });
  const cluster = await startCluster({
    dataDir,
    apiPorts: port > 0 ? [port, port + 1] : [],
    onStop: (stop) => {
      stopStarted = stop;
    },
  });
  if (stopping) return;
  process.stdout.write(`${JSON.stringify(cluster.describe())}\n`);
  process.stderr.write(
    `logs in ${path.join(cluster.dataDir, '_cluster', 'logs')}; sign up at ${cluster.api[0]!.url}/ (either api serves the same data)\n`,
  );
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  main().catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
