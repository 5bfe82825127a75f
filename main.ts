import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { type DestinationStream, type Logger, pino } from 'pino';
import { buildApp } from './api/app.js';
import { LOG_REDACT_PATHS, scrubSecrets } from './api/log-redaction.js';
import { type Broker, connectBroker } from './broker/connection.js';
import { type NatsServerHandle, startNatsServer } from './broker/nats-server.js';
import { provision } from './broker/provision.js';
import { claimFirstStart } from './control/bootstrap.js';
import { ControlPlane } from './control/control-plane.js';
import { openControlStore } from './control/store.js';
import { Pipeline, type PipelineOptions } from './pipeline/pipeline.js';
import { minutesCacheOf } from './query/minutes-cache.js';
import { type Config, ConfigError, loadConfig } from './schemas/config.js';
import { QueryEngine } from './storage/duckdb.js';

export type Role = 'start' | 'api' | 'pipeline';

export interface Service {
  config: Config;
  log: Logger;
  broker: Broker;
  control: ControlPlane;
  nats: NatsServerHandle | null;
  app: FastifyInstance | null;
  pipeline: Pipeline | null;
  /** The API's address once listening. */
  url: string | null;
  stop(): Promise<void>;
}

export interface StartOptions {
  role?: Role;
  log?: Logger;
  /** Listen on config.PORT (the process entry) or not at all (tests use app.inject or their own port). */
  listen?: boolean;
  afterCommit?: PipelineOptions['afterCommit'];
  beforeCommitPoint?: PipelineOptions['beforeCommitPoint'];
}

/** The root logger; `destination` lets a test read every line the service writes. */
export function createLogger(config: Config, destination?: DestinationStream): Logger {
  const to =
    destination ??
    (config.LOG_FILE
      ? pino.destination({ dest: config.LOG_FILE, append: true, mkdir: true, sync: false, minLength: 4096 })
      : undefined);
  return pino(
    {
      level: config.LOG_LEVEL,
      redact: { paths: LOG_REDACT_PATHS, censor: '[redacted]' },
      // Whatever field a key-shaped text is in (a URL, a message), it leaves the process redacted.
      hooks: { streamWrite: scrubSecrets },
    },
    to,
  );
}

function announceFirstStart(port: number): void {
  // No account exists yet: say how to make one (sign-up creates the workspace and its test key).
  const line = '-'.repeat(78);
  process.stdout.write(
    [
      line,
      `First start: no accounts yet. Open http://localhost:${port}/ and sign up, or with curl:`,
      `  curl -s -X POST http://localhost:${port}/api/auth/signup -H 'content-type: application/json' \\`,
      `    -d '{"email":"you@example.com","password":"at least 10 characters"}'`,
      line,
      '',
    ].join('\n'),
  );
}

/** Wires and starts the service; the returned stop() shuts it down in order. */
export async function startService(config: Config, opts: StartOptions = {}): Promise<Service> {
  const role = opts.role ?? 'start';
  const log = opts.log ?? createLogger(config);
  if (role !== 'start' && !config.NATS_URL) {
    // Each would launch its own embedded broker on one store and stop the other's.
    throw new ConfigError(
      'invalid configuration:\n  NATS_URL: the api and pipeline roles share a NATS server; set NATS_URL (only the start role embeds one)',
    );
  }
  if (!config.NATS_URL && config.NATS_REPLICAS > 1) {
    // The embedded broker is one server: it cannot keep copies on others.
    throw new ConfigError(
      'invalid configuration:\n  NATS_REPLICAS: more than 1 needs a NATS cluster; set NATS_URL to its nodes (or run `npm run cluster`)',
    );
  }
  // The largest message: a body as sent (stored compressed only when that is smaller) plus its headers.
  const maxMessageBytes = config.BODY_MAX_BYTES + 64 * 1024;
  let nats: NatsServerHandle | null = null;
  let url = config.NATS_URL;
  if (!url) {
    const natsLog = log.child({ module: 'nats-server' });
    nats = await startNatsServer({
      dir: path.join(config.dataDir, 'nats'),
      bin: config.NATS_SERVER_BIN,
      maxPayloadBytes: Math.max(8 * 1024 * 1024, maxMessageBytes),
      memoryLimitMb: config.NATS_MEMORY_LIMIT_MB,
      log: (l) => natsLog.debug(l),
    });
    url = nats.url;
    log.info({ url }, 'embedded nats-server started');
  }
  try {
    return await wire(config, role, log, url, nats, maxMessageBytes, opts);
  } catch (err) {
    // Leave nothing running behind a failed start.
    await nats?.stop().catch(() => {});
    throw err;
  }
}

async function wire(
  config: Config,
  role: Role,
  log: Logger,
  url: string,
  nats: NatsServerHandle | null,
  maxMessageBytes: number,
  opts: StartOptions,
): Promise<Service> {
  const broker = await connectBroker(url, log.child({ module: 'broker' }), `svc-${role}`);
  const serverMax = broker.nc.info?.max_payload ?? 0;
  if (serverMax < maxMessageBytes) {
    await broker.close();
    throw new ConfigError(
      `invalid configuration:\n  BODY_MAX_BYTES: ${config.BODY_MAX_BYTES} bytes (plus headers) do not fit the NATS server's max_payload of ${serverMax}; raise max_payload in its config or lower BODY_MAX_BYTES`,
    );
  }
  let control: ControlPlane | null = null;
  let pipeline: Pipeline | null = null;
  let app: FastifyInstance | null = null;
  let engine: QueryEngine | null = null;
  let stopping: Promise<void> | null = null;
  const stop = () => {
    stopping ??= (async () => {
      // Fixed order: stop intake → drain the consumer → flush the writers → close clients → stop the broker.
      await app?.close();
      await pipeline?.stop();
      await control?.stop();
      await broker.close();
      engine?.close();
      await nats?.stop();
    })();
    return stopping;
  };
  try {
    await whileElecting(log, () =>
      provision(broker.jsm, broker.kvm, {
        maxAgeHours: config.STREAM_MAX_AGE_HOURS,
        maxBytes: config.STREAM_MAX_BYTES,
        maxMsgBytes: maxMessageBytes,
        ackWaitMs: config.CONSUMER_ACK_WAIT_MS,
        maxAckPending: Math.max(1000, config.CONSUMER_MAX_MESSAGES * 4),
        soleConsumer: nats !== null && role !== 'api',
        replicas: config.NATS_REPLICAS,
        log: (msg) => log.warn(msg),
      }),
    );
    control = new ControlPlane(await openControlStore(broker), log.child({ module: 'control' }), {
      retentionDays: config.RETENTION_DAYS,
    });
    await control.start();
    if ((await claimFirstStart(control.store)) && config.PRINT_FIRST_START_HINT)
      announceFirstStart(config.PORT);
    if (role !== 'api') {
      pipeline = new Pipeline({
        broker,
        config,
        control,
        log: log.child({ module: 'pipeline' }),
        afterCommit: opts.afterCommit,
        beforeCommitPoint: opts.beforeCommitPoint,
        sole: nats !== null,
      });
      await pipeline.start();
    }
    let listenUrl: string | null = null;
    if (role !== 'pipeline') {
      engine = await QueryEngine.open(config.dataDir, undefined, config.QUERY_MEMORY_MB);
      minutesCacheOf(engine, config.METRICS_CACHE_MB * 2 ** 20);
      app = await buildApp({ config, broker, control, engine, pipeline }, log);
      if (opts.listen) listenUrl = await app.listen({ port: config.PORT, host: config.HOST });
      else await app.ready();
    }
    return { config, log, broker, control, nats, app, pipeline, url: listenUrl, stop };
  } catch (err) {
    await stop().catch(() => {});
    throw err;
  }
}

/**
 * libuv's threadpool runs the process's DuckDB statements (each holds a thread for its whole run), its file system
 * calls, and the zlib work of ingest bodies: a gzip body's decoding (api/body-parser.ts) and the compression of an
 * uncompressed one before it is published (broker/ingest-publisher.ts), which its 202 waits for. At libuv's default of
 * four threads, four slow queries at once would hold every ingest request and every batch's writes until one ended.
 */
export const THREADPOOL_SIZE = 16;

/**
 * The environment to start a service process with: `env` and the threadpool's size (unless `env` sets its own). libuv
 * reads it when the pool first starts, which is before any of the process's own code runs (the module loader's file
 * reads): it cannot be set from inside.
 */
export function serviceProcessEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return { UV_THREADPOOL_SIZE: String(THREADPOOL_SIZE), ...env };
}

/**
 * The node options the service wants on its command line (V8 flags cannot be set once it runs): what
 * `npm start` and the benchmarks start `dist/main.js` with.
 */
export function nodeFlags(env: Record<string, string | undefined> = process.env): string[] {
  const config = loadConfig(env);
  return [
    ...(config.singleThreadedGc ? ['--single-threaded-gc'] : []),
    ...(config.INITIAL_OLD_SPACE_MB > 0 ? [`--initial-old-space-size=${config.INITIAL_OLD_SPACE_MB}`] : []),
  ];
}

/** What JetStream answers while a cluster elects a leader (a node was lost, or the cluster is starting). */
const ELECTING =
  /timeout|temporarily unavailable|not enabled|insufficient resources|no suitable peers|no responders/i;

/** Runs `fn`, again for up to a minute while JetStream is electing a leader: a process started meanwhile waits. */
async function whileElecting<T>(log: Logger, fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 60_000;
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (!ELECTING.test(String((err as Error)?.message)) || Date.now() > deadline) throw err;
      log.warn(
        { err: (err as Error).message, attempt },
        'JetStream not ready (a leader election?); trying again',
      );
      await new Promise((r) => setTimeout(r, Math.min(2000, 250 * 2 ** attempt)));
    }
  }
}

/** A signal this soon after the first is the same stop asked twice (see main). */
const DUPLICATE_SIGNAL_MS = 1000;

export async function main(argv: string[] = process.argv.slice(2)): Promise<void> {
  const role = (argv[0] ?? 'start') as Role;
  if (!['start', 'api', 'pipeline'].includes(role)) {
    process.stderr.write(`unknown role ${role}: use start, api or pipeline\n`);
    process.exit(2);
  }
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const log = createLogger(config);
  // Fault injection for the cluster test, never set otherwise: SIGUSR2 makes this process stop itself (SIGSTOP)
  // at its next commit point, past the batch's checks, as a long pause or a hung disk would stall it there.
  let stallArmed = false;
  const beforeCommitPoint =
    process.env.FAULT_STALL_ON_SIGUSR2 === '1'
      ? () => {
          if (!stallArmed) return;
          stallArmed = false;
          process.kill(process.pid, 'SIGSTOP');
        }
      : undefined;
  if (beforeCommitPoint)
    process.on('SIGUSR2', () => {
      stallArmed = true;
    });
  let service: Service;
  try {
    service = await startService(config, { role, log, listen: true, beforeCommitPoint });
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  log.info({ role, url: service.url, dataDir: config.dataDir }, 'service started');
  // However the process ends (a second signal, a crash), the embedded broker is asked to stop: it runs in its own
  // process group, so nothing else would stop it. (A SIGKILL of this process leaves it to the next start, which
  // stops a stale broker before it starts its own.)
  process.on('exit', () => service.nats?.signalStop());
  let firstSignalAt = 0;
  const onSignal = (signal: string) => {
    const now = Date.now();
    if (firstSignalAt > 0) {
      // `npm start` passes a terminal's or a process group's signal on to the service, which the group's delivery
      // reached already: one stop asked twice within a second, not a second request.
      if (now - firstSignalAt < DUPLICATE_SIGNAL_MS) return;
      log.warn({ signal }, 'second signal: exiting now');
      process.exit(130);
    }
    firstSignalAt = now;
    log.info({ signal }, 'shutting down');
    service.stop().then(
      () => {
        log.info('stopped');
        process.exit(0);
      },
      (err) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => onSignal('SIGINT'));
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  // Started by a supervisor with an IPC channel (`npm run cluster`): tell it, whatever the log level or file; and
  // stop when it is gone, so that a launcher killed outright leaves no process behind.
  if (process.send) {
    process.send({ type: 'ready', role, url: service.url });
    process.on('disconnect', () => onSignal('SIGTERM'));
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  main().catch((err) => {
    process.stderr.write(`fatal: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
