import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { freePort, startNatsServer } from '../../broker/nats-server.js';
import { createWorkspace } from '../../control/workspaces.js';
import { type Service, startService } from '../../main.js';
import { loadConfig } from '../../schemas/config.js';
import type { IssueOccurrences } from '../../schemas/issues.js';
import { QueryEngine } from '../../storage/duckdb.js';
import { listPartitionFiles } from '../../storage/layout.js';
import type { DatasetMarker } from './dataset.js';
import { cleanupService, ServiceProcess } from './service-process.js';

/**
 * The service started in this process on a benchmark dataset (query.ts, metrics.ts): a nats-server of its own, the
 * workspace and owner the generator's rows belong to, its indexed keys and issue records, and a session.
 */

/** The owner the benchmarks sign in as (over HTTP, or through the dashboard's form). */
export const OWNER_EMAIL = 'owner@bench-query.example';
/** Only ever held by the throwaway control plane a benchmark starts. */
export const OWNER_PASSWORD = 'bench-query-owner-password';

/** The service started on a benchmark dataset, with what the scenarios over HTTP need. */
export interface BenchService {
  dataDir: string;
  marker: DatasetMarker;
  /** The service, when it runs in this process (else `process` is the one that answers). */
  service: Service | null;
  process: ServiceProcess | null;
  url: string;
  /** Biggest first, as the generator saved them. */
  occurrences: IssueOccurrences[];
  /** The baseline's engine, configured as the service's; its figures are of warm caches, as the service's are. */
  rawEngine: QueryEngine;
  failuresFiles: string[];
  setup: { seconds: number; recordSeconds: number };
  /** The session's headers, for requests made elsewhere (support/http-timer.ts). */
  authHeaders: Record<string, string>;
  /** GET with the session; anything but 200 throws (a benchmark that times errors is worthless). */
  get<T>(pathAndQuery: string): Promise<T>;
  stop(): Promise<void>;
}

async function until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * A nats-server of its own (store in a temp dir) and the service on the dataset's directory, in this process;
 * then what the pipeline and sign-up would have made: the workspace, its owner, its indexed keys and the issue
 * records (recordOccurrences, as the pipeline calls it per batch), and a session from a log-in over HTTP.
 */
export async function startBenchService(
  dataDir: string,
  marker: DatasetMarker,
  occurrences: IssueOccurrences[],
  opts: {
    /**
     * The compiled entry (dist/main.js) to run the service as its own process, as `npm start` does (with its node
     * flags): the service set up in this process is stopped, and the process answers on the same broker and files.
     */
    separateProcess?: string;
  } = {},
): Promise<BenchService> {
  const started = performance.now();
  const natsDir = await fs.mkdtemp(path.join(os.tmpdir(), 'svc-bench-query-nats-'));
  // Undone last first: the engine, the service, the broker, its directory.
  const undo: (() => Promise<void> | void)[] = [() => fs.rm(natsDir, { recursive: true, force: true })];
  const stop = async () => {
    while (undo.length > 0) await undo.pop()!();
  };
  try {
    const nats = await startNatsServer({ dir: natsDir });
    undo.push(() => nats.stop());
    const config = loadConfig({
      DATA_DIR: dataDir,
      NATS_URL: nats.url,
      HOST: '127.0.0.1',
      PORT: '0',
      LOG_LEVEL: 'warn',
      PRINT_FIRST_START_HINT: 'false',
      // Nothing may rewrite the files while they are measured.
      COMPACTION_INTERVAL_MS: '0',
      READ_RATE_PER_SEC: '1000000',
      READ_BURST: '1000000',
    });
    const service = await startService(config, { role: 'start', listen: true });
    undo.push(() => service.stop());
    if (!service.url) throw new Error('the service did not listen');
    const { control } = service;
    const ws = marker.workspaceId;
    await createWorkspace(control.store, 'Query benchmark', ws);
    await control.addMember(ws, {
      email: OWNER_EMAIL,
      role: 'owner',
      password: OWNER_PASSWORD,
      name: 'Benchmark owner',
    });
    await control.patchSettings(ws, { indexedContextKeys: marker.indexedContextKeys });
    const recordStart = performance.now();
    await control.issues.recordOccurrences(ws, marker.mode, occurrences);
    await until(
      () => control.issues.list(ws, marker.mode).length === occurrences.length,
      60_000,
      `${occurrences.length} issue records in the control plane's watched copy`,
    );
    const recordSeconds = (performance.now() - recordStart) / 1000;
    // In a process of its own, the service answers from here on: this one's work (the set-up) is done.
    let answering = service as Service | null;
    let child: ServiceProcess | null = null;
    if (opts.separateProcess) {
      await service.stop();
      answering = null;
      undo.pop();
      const port = await freePort();
      child = ServiceProcess.spawn({
        mainJs: opts.separateProcess,
        dataDir,
        port,
        env: {
          NATS_URL: nats.url,
          PRINT_FIRST_START_HINT: 'false',
          COMPACTION_INTERVAL_MS: '0',
          QUERY_MEMORY_MB: String(config.QUERY_MEMORY_MB),
        },
      });
      const spawned = child;
      undo.push(() => cleanupService(spawned, dataDir));
      await child.waitReady();
    }
    const url = child ? child.url : service.url;
    const login = await fetch(`${url}/api/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: OWNER_EMAIL, password: OWNER_PASSWORD }),
    });
    const loginText = await login.text();
    if (login.status !== 200) throw new Error(`log-in: ${login.status} ${loginText.slice(0, 300)}`);
    const token = (JSON.parse(loginText) as { session: { token: string } }).session.token;
    const rawEngine = await QueryEngine.open(dataDir, undefined, config.QUERY_MEMORY_MB);
    undo.push(() => rawEngine.close());
    const failuresFiles = await listPartitionFiles(
      dataDir,
      'failures',
      ws,
      marker.mode,
      0,
      Number.MAX_SAFE_INTEGER,
    );
    const headers = { authorization: `Bearer ${token}` };
    return {
      dataDir,
      marker,
      service: answering,
      process: child,
      url,
      occurrences,
      rawEngine,
      failuresFiles,
      setup: { seconds: (performance.now() - started) / 1000, recordSeconds },
      authHeaders: headers,
      get: async <T>(pathAndQuery: string): Promise<T> => {
        const res = await fetch(`${url}${pathAndQuery}`, { headers });
        const text = await res.text();
        if (res.status !== 200) throw new Error(`GET ${pathAndQuery}: ${res.status} ${text.slice(0, 300)}`);
        return JSON.parse(text) as T;
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
