import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { LightMyRequestResponse } from 'fastify';
import { type Broker, connectBroker } from '../../broker/connection.js';
import { type NatsServerHandle, startNatsServer } from '../../broker/nats-server.js';
import { createApiKey } from '../../control/api-keys.js';
import { createWorkspace } from '../../control/workspaces.js';
import { type Service, type StartOptions, startService } from '../../main.js';
import { type Config, loadConfig } from '../../schemas/config.js';
import type { Permission } from '../../schemas/control.js';
import type { Mode } from '../../schemas/records.js';

/** A temp directory that the test removes at the end. */
export async function tempDir(prefix: string): Promise<string> {
  return fs.mkdtemp(path.join(os.tmpdir(), `svc-${prefix}-`));
}

/** A real nats-server with JetStream on a free port, its store in its own temp directory. */
export async function startTestNats(dir: string): Promise<NatsServerHandle> {
  return startNatsServer({ dir: path.join(dir, 'nats') });
}

export interface TestBroker {
  dir: string;
  nats: NatsServerHandle;
  broker: Broker;
  close(): Promise<void>;
}

const quiet = { info() {}, warn() {}, error() {}, debug() {} };

/** A temp directory, a real nats-server in it and a connection to it: for tests below the service. */
export async function startTestBroker(prefix: string): Promise<TestBroker> {
  const dir = await tempDir(prefix);
  const nats = await startTestNats(dir);
  const broker = await connectBroker(nats.url, quiet, `${prefix}-test`);
  return {
    dir,
    nats,
    broker,
    async close() {
      await broker.close();
      await nats.stop();
      await fs.rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * `npm test` (scripts/test.mjs) names a directory for the run's logs: every service a test starts logs there at debug
 * level, and the run fails if any line holds a key, a session token or a test password.
 */
const LOG_DIR = process.env.SVC_TEST_LOG_DIR;
let logFiles = 0;
const logging = (): Record<string, string> =>
  LOG_DIR
    ? { LOG_LEVEL: 'debug', LOG_FILE: path.join(LOG_DIR, `${process.pid}-${++logFiles}.log`) }
    : { LOG_LEVEL: 'silent' };

export function testConfig(dataDir: string, natsUrl: string, extra: Record<string, string> = {}): Config {
  return loadConfig({
    DATA_DIR: dataDir,
    NATS_URL: natsUrl,
    PRINT_FIRST_START_HINT: 'false',
    ...logging(),
    FLUSH_INTERVAL_MS: '100',
    CONSUMER_ACK_WAIT_MS: '2000',
    PIPELINE_WORKERS: '1',
    // Generous rates so tests that send bursts are not limited; the rate-limit tests set their own.
    INGEST_RATE_PER_SEC: '100000',
    INGEST_BURST: '100000',
    READ_RATE_PER_SEC: '100000',
    READ_BURST: '100000',
    // Compaction runs when a test asks for it (pipeline.compact()), not on a timer.
    COMPACTION_INTERVAL_MS: '0',
    // Every answer a test receives is checked against the schema its route declares (the OpenAPI document's).
    VALIDATE_ANSWERS: 'true',
    ...extra,
  });
}

export interface TestTenant {
  workspaceId: string;
  keys: Record<string, string>;
}

/** A fresh workspace with a test key (ingest+read) and a live key (ingest+read), plus any extra keys asked for. */
export async function createTenant(
  service: Service,
  extra: Record<string, { mode: Mode; permissions: Permission[] }> = {},
): Promise<TestTenant> {
  const ws = await createWorkspace(service.control.store, 'test workspace');
  const specs: Record<string, { mode: Mode; permissions: Permission[] }> = {
    test: { mode: 'test', permissions: ['ingest', 'read'] },
    live: { mode: 'live', permissions: ['ingest', 'read'] },
    ...extra,
  };
  const keys: Record<string, string> = {};
  for (const [name, spec] of Object.entries(specs)) {
    keys[name] = (await createApiKey(service.control.store, { workspaceId: ws.id, name, ...spec })).key;
  }
  return { workspaceId: ws.id, keys };
}

export interface TestStack {
  dir: string;
  nats: NatsServerHandle;
  service: Service;
  config: Config;
  /** Stops the service, the broker, and removes the directory. */
  close(): Promise<void>;
}

export async function startStack(
  name: string,
  extra: Record<string, string> = {},
  opts: StartOptions = {},
): Promise<TestStack> {
  const dir = await tempDir(name);
  const nats = await startTestNats(dir);
  const config = testConfig(path.join(dir, 'data'), nats.url, extra);
  const service = await startService(config, opts);
  return {
    dir,
    nats,
    service,
    config,
    close: async () => {
      await service.stop().catch(() => {});
      await nats.stop();
      await fs.rm(dir, { recursive: true, force: true });
    },
  };
}

export function ingest(service: Service, key: string, body: unknown, headers: Record<string, string> = {}) {
  return service.app!.inject({
    method: 'POST',
    url: '/api/ingest',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    payload: typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body),
  });
}

export function get(service: Service, key: string, url: string) {
  return service.app!.inject({ method: 'GET', url, headers: { 'x-api-key': key } });
}

export const json = <T = Record<string, unknown>>(res: LightMyRequestResponse) => res.json() as T;

/** Polls until `check` returns true; fails with the last value seen. */
export async function eventually<T>(
  fn: () => Promise<T>,
  check: (v: T) => boolean,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T = await fn();
  while (!check(last)) {
    if (Date.now() > deadline)
      throw new Error(
        `condition not met in ${timeoutMs} ms; last value: ${JSON.stringify(last).slice(0, 500)}`,
      );
    await new Promise((r) => setTimeout(r, 50));
    last = await fn();
  }
  return last;
}

let seq = 0;
/** A valid execution; `over` replaces fields. */
export function execution(over: Record<string, unknown> = {}): Record<string, unknown> {
  seq++;
  return {
    executionId: `ex-${process.pid}-${Date.now().toString(36)}-${seq}`,
    service: 'checkout',
    environment: 'production',
    endpoint: '/orders/42',
    method: 'GET',
    startedAt: new Date(Date.now() - 1000).toISOString(),
    durationMs: 12.5,
    statusCode: 200,
    ...over,
  };
}
