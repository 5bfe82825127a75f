import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { freePort } from '../broker/nats-server.js';
import { listPartitionFiles } from '../storage/layout.js';
import {
  cleanupService,
  isAlive,
  natsServerPid,
  ServiceProcess,
  serviceEntry,
} from './support/service-process.js';

/**
 * Acceptance: `kill -9` of the service during continuous ingestion, then start again: every execution that got
 * a 202 is listed exactly once.
 *
 * Requests are classed by what the client can know about them:
 *   - accepted: 202, the service promised to store every execution exactly once;
 *   - refused: the connection was refused, so the body never reached the service and must not be stored;
 *   - in doubt: the connection broke after the body was sent, or a 503 (a publish whose ack was lost may
 *     still be in the stream). These may or may not be stored, but never twice.
 * So the strict invariants are: accepted ⊆ stored, stored ⊆ accepted ∪ in-doubt, no id stored twice, and the
 * API agrees with the files. "API total = accepted" holds exactly when no in-doubt request was stored.
 */

type KillMode = 'group' | 'service' | 'all';
type Fault = 'kill' | 'broker-pause' | 'broker-kill';

interface Options {
  loops: number;
  /** What the SIGKILL reaches: the service's process group, the service alone, or the group and the broker. */
  kill: KillMode;
  /** kill: SIGKILL (see `kill`) and restart; broker-pause: SIGSTOP the broker for `pauseS`; broker-kill: SIGKILL it. */
  fault: Fault;
  pauseS: number;
  /** Extra service environment (KEY=VALUE). */
  env: Record<string, string>;
  /** Resend a request whose answer was lost (reset, refused, 503) under its idempotency key until it is accepted. */
  retry: boolean;
  /** CPU-bound processes run beside the service, for the races a busy machine shows. */
  burn: number;
  batch: number;
  killAfterS: number;
  runAfterS: number;
  kills: number;
  restartDelayS: number;
  settleTimeoutS: number;
  ackWaitMs: number;
  ackWaitFromArgs: boolean;
  maxRequestsPerLoop: number;
  dataDir: string | null;
  keep: boolean;
  logLevel: string;
  service: string;
}

const USAGE = `usage: node dist/bench/crash-recovery.js [options]
  --loops N            concurrent ingestion loops (8)
  --kill MODE          all: SIGKILL the service's process group and its nats-server (default);
                       group: the process group only (the broker, in a group of its own, is left to the
                       restart to stop); service: the service process only
  --fault F            kill: SIGKILL as --kill says, then restart the service (default);
                       broker-pause: SIGSTOP the broker for --pause seconds, then SIGCONT;
                       broker-kill: SIGKILL the broker (the service starts it again)
  --pause S            seconds of a broker pause (10); longer than the service's PUBLISH_TIMEOUT_MS (5000)
                       for the pause to be answered with 503s
  --env KEY=VALUE      service environment, repeatable (e.g. --env PUBLISH_TIMEOUT_MS=1000)
  --no-retry           class lost answers as in doubt instead of resending them under their idempotency key
  --burn N             CPU-bound processes beside the service (0)
  --batch N            executions per request (100)
  --kill-after S       seconds of ingestion before each SIGKILL (4)
  --run-after S        seconds of ingestion after the last restart (3)
  --kills N            kill/restart cycles (2)
  --restart-delay S    seconds between the kill and the restart (1)
  --settle-timeout S   how long to wait for the stored count to settle (60)
  --ack-wait-ms MS     CONSUMER_ACK_WAIT_MS for the service (its default: 30000)
  --max-requests N     upper bound of requests per loop (100000)
  --data-dir DIR       DATA_DIR to use (must be new or empty); default a temp dir
  --log-level L        service LOG_LEVEL (warn)
  --keep               keep the temp dir (ids, data) at the end
`;

function parseOptions(args: string[]): Options {
  const { values } = parseArgs({
    args,
    options: {
      loops: { type: 'string', default: '8' },
      kill: { type: 'string', default: 'all' },
      fault: { type: 'string', default: 'kill' },
      pause: { type: 'string', default: '10' },
      env: { type: 'string', multiple: true, default: [] },
      'no-retry': { type: 'boolean', default: false },
      burn: { type: 'string', default: '0' },
      batch: { type: 'string', default: '100' },
      'kill-after': { type: 'string', default: '4' },
      'run-after': { type: 'string', default: '3' },
      kills: { type: 'string', default: '2' },
      'restart-delay': { type: 'string', default: '1' },
      'settle-timeout': { type: 'string', default: '60' },
      'ack-wait-ms': { type: 'string' },
      'max-requests': { type: 'string', default: '100000' },
      'data-dir': { type: 'string' },
      'log-level': { type: 'string', default: 'warn' },
      keep: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  const num = (name: string, raw: string | undefined, min: number, max: number): number => {
    const n = Number(raw);
    if (!Number.isFinite(n) || n < min || n > max)
      throw new Error(`--${name} must be a number in [${min}, ${max}]`);
    return n;
  };
  const ackRaw = values['ack-wait-ms'] ?? process.env.CONSUMER_ACK_WAIT_MS;
  const kill = values.kill as KillMode;
  if (!['group', 'service', 'all'].includes(kill)) throw new Error('--kill must be all, group or service');
  const fault = values.fault as Fault;
  if (!['kill', 'broker-pause', 'broker-kill'].includes(fault))
    throw new Error('--fault must be kill, broker-pause or broker-kill');
  return {
    loops: Math.floor(num('loops', values.loops, 1, 256)),
    kill,
    fault,
    pauseS: num('pause', values.pause, 0.1, 600),
    env: Object.fromEntries(
      (values.env ?? []).map((kv) => {
        const at = kv.indexOf('=');
        if (at < 1) throw new Error(`--env ${kv}: expected KEY=VALUE`);
        return [kv.slice(0, at), kv.slice(at + 1)];
      }),
    ),
    retry: !values['no-retry'],
    burn: Math.floor(num('burn', values.burn, 0, 64)),
    batch: Math.floor(num('batch', values.batch, 1, 1000)),
    killAfterS: num('kill-after', values['kill-after'], 0.1, 600),
    runAfterS: num('run-after', values['run-after'], 0, 600),
    kills: Math.floor(num('kills', values.kills, 1, 50)),
    restartDelayS: num('restart-delay', values['restart-delay'], 0, 60),
    settleTimeoutS: num('settle-timeout', values['settle-timeout'], 1, 3600),
    ackWaitMs:
      ackRaw === undefined || ackRaw === ''
        ? 30_000
        : Math.floor(num('ack-wait-ms', ackRaw, 1000, 3_600_000)),
    ackWaitFromArgs: values['ack-wait-ms'] !== undefined,
    maxRequestsPerLoop: Math.floor(num('max-requests', values['max-requests'], 1, 10_000_000)),
    dataDir: values['data-dir'] ? path.resolve(values['data-dir']) : null,
    keep: values.keep ?? false,
    logLevel: values['log-level'] ?? 'warn',
    service: 'bench',
  };
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

type Outcome = 'accepted' | 'refused' | 'inDoubt' | 'other';

interface RequestRecord {
  /** Request number, global across loops: the ids are `<prefix>-<reqNo>-<i>`. */
  reqNo: number;
  outcome: Outcome;
  /** Which service start (0 = first) was up when the answer came. */
  segment: number;
  at: number;
  detail?: string;
}

interface IngestState {
  stopped: boolean;
  nextReq: number;
  segment: number;
  records: RequestRecord[];
  /** 202s marked duplicate on a first attempt: every body is unique, so never expected. */
  duplicateFlags: number;
  /** 202s marked duplicate on a retry: an earlier attempt had been stored (expected, and exactly once). */
  retriedDuplicates: number;
  attempts: number;
  /** 503 answers, and those of them without a retry-after header (CONTRACT §3: never). */
  unavailable: number;
  unavailableWithoutRetryAfter: number;
  /** Until when a lost answer is sent again; set when ingestion stops. */
  retryDeadline: number;
  errorKinds: Map<string, number>;
  otherStatuses: Map<number, number>;
}

interface KillRecord {
  n: number;
  killedPid: number;
  killedAt: number;
  /** The nats-server the killed process left running (its pid file still names it). */
  orphanNatsPid: number | null;
  orphanAliveAfterKill: boolean;
  orphanGoneAfterRestart: boolean | null;
  restartedPid: number;
  readyAfterMs: number;
  newNatsPid: number | null;
  /** Kill → first 202 from the new process (broker faults: from the fault's end). */
  firstAcceptAfterMs: number | null;
  /** When a broker pause ended, or a killed broker was back (null: the service was killed). */
  resumedAt: number | null;
  /** Executions accepted before this kill. */
  acceptedBefore: number;
  /** Restart ready → every execution accepted before the kill listed again (null: not within the wait). */
  visibleAfterMs: number | null;
}

function faultName(opts: Options): string {
  if (opts.fault === 'broker-pause') return `the broker stopped (SIGSTOP) for ${opts.pauseS} s`;
  if (opts.fault === 'broker-kill') return 'kill -9 of the broker alone';
  return `kill -9 of ${opts.kill === 'all' ? 'the group and the broker' : `the ${opts.kill}`}`;
}

const execId = (prefix: string, reqNo: number, i: number) => `${prefix}-${reqNo}-${i}`;

function errorKind(err: unknown): string {
  const e = err as { code?: unknown; cause?: { code?: unknown }; name?: unknown };
  const code = e?.code ?? e?.cause?.code ?? e?.name;
  return typeof code === 'string' ? code : 'UNKNOWN';
}

/** Connection refused is the only failure that proves the body never left this process. */
const NEVER_SENT = new Set(['ECONNREFUSED']);

interface Attempt {
  outcome: Outcome;
  /** A 503 without retry-after. */
  noRetryAfter?: boolean;
  detail?: string;
  /** 202 with `duplicate: true`: the broker had stored an earlier attempt. */
  duplicate?: boolean;
  retryAfterMs?: number;
}

async function sendOnce(pool: Pool, key: string, idempotencyKey: string, body: string): Promise<Attempt> {
  try {
    const res = await pool.request({
      path: '/api/ingest',
      method: 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        'idempotency-key': idempotencyKey,
      },
      body,
      headersTimeout: 15_000,
      bodyTimeout: 15_000,
    });
    const text = await res.body.text();
    if (res.statusCode === 202) {
      return {
        outcome: 'accepted',
        duplicate: (JSON.parse(text) as { duplicate?: unknown }).duplicate === true,
      };
    }
    if (res.statusCode === 503) {
      const after = Number(res.headers['retry-after']);
      return {
        outcome: 'inDoubt',
        detail: '503',
        retryAfterMs: Number.isFinite(after) ? after * 1000 : 1000,
        noRetryAfter: res.headers['retry-after'] === undefined,
      };
    }
    return { outcome: 'other', detail: `${res.statusCode} ${text.slice(0, 200)}` };
  } catch (err) {
    const kind = errorKind(err);
    return { outcome: NEVER_SENT.has(kind) ? 'refused' : 'inDoubt', detail: kind };
  }
}

/**
 * Sends requests one after another. A request whose answer is lost (refused, reset, 503) is sent again, the same
 * bytes under the same idempotency key, until it is accepted, as an SDK does; with --no-retry it stays in doubt.
 */
async function ingestLoop(
  pool: Pool,
  key: string,
  prefix: string,
  opts: Options,
  state: IngestState,
  hardDeadline: number,
): Promise<void> {
  for (let n = 0; n < opts.maxRequestsPerLoop && !state.stopped && Date.now() < hardDeadline; n++) {
    const reqNo = state.nextReq++;
    const now = Date.now();
    const executions = Array.from({ length: opts.batch }, (_, i) => ({
      executionId: execId(prefix, reqNo, i),
      endpoint: `/orders/${i}`,
      method: 'GET',
      startedAt: now - i,
      durationMs: 12.3,
      statusCode: 200,
    }));
    const body = JSON.stringify({
      resource: { service: opts.service, environment: 'production' },
      executions,
    });
    let attempts = 0;
    let anyInDoubt = false;
    for (;;) {
      attempts++;
      const a = await sendOnce(pool, key, `${prefix}-${reqNo}`, body);
      if (a.outcome === 'refused' || a.outcome === 'inDoubt') {
        state.errorKinds.set(a.detail ?? '?', (state.errorKinds.get(a.detail ?? '?') ?? 0) + 1);
      }
      if (a.outcome === 'other') {
        const status = Number(a.detail?.split(' ')[0]);
        state.otherStatuses.set(status, (state.otherStatuses.get(status) ?? 0) + 1);
      }
      if (a.outcome === 'inDoubt') anyInDoubt = true;
      if (a.detail === '503') {
        state.unavailable++;
        if (a.noRetryAfter) state.unavailableWithoutRetryAfter++;
      }
      const retryable = a.outcome === 'refused' || a.outcome === 'inDoubt';
      if (!retryable || !opts.retry || Date.now() >= state.retryDeadline) {
        // A refused last attempt after an earlier one in doubt is still in doubt: that one may be stored.
        const outcome = a.outcome === 'refused' && anyInDoubt ? 'inDoubt' : a.outcome;
        if (a.duplicate) {
          if (attempts === 1) state.duplicateFlags++;
          else state.retriedDuplicates++;
        }
        state.attempts += attempts;
        state.records.push({ reqNo, outcome, segment: state.segment, at: Date.now(), detail: a.detail });
        break;
      }
      // While the service is down every attempt fails at once: back off a little instead of spinning.
      await sleep(Math.min(a.retryAfterMs ?? 100, 2000));
    }
  }
}

async function getJson<T>(
  pool: Pool,
  key: string,
  urlPath: string,
): Promise<{ status: number; body: T | null }> {
  const res = await pool.request({
    path: urlPath,
    method: 'GET',
    headers: { authorization: `Bearer ${key}` },
    headersTimeout: 30_000,
    bodyTimeout: 30_000,
  });
  const text = await res.body.text();
  if (res.statusCode !== 200) return { status: res.statusCode, body: null };
  return { status: res.statusCode, body: JSON.parse(text) as T };
}

async function apiTotal(pool: Pool, key: string, query: string): Promise<number> {
  const r = await getJson<{ total: number }>(pool, key, `/api/executions?${query}`);
  if (!r.body) throw new Error(`GET /api/executions?${query} answered ${r.status}`);
  return r.body.total;
}

/** The service's own figure of messages accepted and not yet committed (GET /metrics). */
async function pipelineLag(pool: Pool): Promise<number | null> {
  try {
    const res = await pool.request({ path: '/metrics', method: 'GET', headersTimeout: 10_000 });
    const m = /^svc_pipeline_lag_messages (\d+)/m.exec(await res.body.text());
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

async function writeIds(
  file: string,
  prefix: string,
  batch: number,
  records: RequestRecord[],
): Promise<void> {
  function* lines(): Generator<string> {
    yield 'execution_id\n';
    for (const r of records) {
      let chunk = '';
      for (let i = 0; i < batch; i++) chunk += `${execId(prefix, r.reqNo, i)}\n`;
      yield chunk;
    }
  }
  await pipeline(Readable.from(lines()), createWriteStream(file));
}

const sqlString = (s: string) => `'${s.replaceAll("'", "''")}'`;

interface ParquetReport {
  files: number;
  rows: number;
  distinctIds: number;
  duplicateIds: number;
  duplicateSample: { execution_id: string; n: number; files: string }[];
  missing: number;
  missingSample: string[];
  storedInDoubt: number;
  storedRefused: number;
  storedOther: number;
  storedUnknown: number;
  unknownSample: string[];
}

async function checkParquet(dataDir: string, idFiles: Record<Outcome, string>): Promise<ParquetReport> {
  const files = await listVisible(dataDir);
  const { DuckDBInstance } = await import('@duckdb/node-api');
  const db = await DuckDBInstance.create(':memory:');
  const c = await db.connect();
  try {
    const rows = async (sql: string) => (await c.runAndReadAll(sql)).getRowObjectsJS();
    const one = async (sql: string) => Number((await rows(sql))[0]?.n ?? Number.NaN);
    if (files.length > 0) {
      await c.run(
        `CREATE TABLE stored AS SELECT execution_id, filename AS file, ingest_seq
         FROM read_parquet([${files.map(sqlString).join(', ')}], union_by_name = true, filename = true)`,
      );
    } else {
      await c.run('CREATE TABLE stored (execution_id VARCHAR, file VARCHAR, ingest_seq BIGINT)');
    }
    for (const [name, file] of Object.entries(idFiles)) {
      await c.run(
        `CREATE TABLE ${name} AS SELECT DISTINCT execution_id
         FROM read_csv(${sqlString(file)}, header = true, columns = {'execution_id': 'VARCHAR'})`,
      );
    }
    const dupRows = await rows(
      `SELECT execution_id, count(*)::INTEGER AS n,
              string_agg(regexp_replace(file, '^.*/executions/', '') || '#seq' || ingest_seq, ' ') AS files
       FROM stored GROUP BY execution_id HAVING count(*) > 1 ORDER BY n DESC, execution_id LIMIT 20`,
    );
    const missingRows = await rows(
      'SELECT a.execution_id FROM accepted a ANTI JOIN stored s USING (execution_id) ORDER BY 1 LIMIT 20',
    );
    const unknownRows = await rows(
      `SELECT DISTINCT s.execution_id FROM stored s
       ANTI JOIN accepted a USING (execution_id) ANTI JOIN inDoubt d USING (execution_id)
       ANTI JOIN refused r USING (execution_id) ANTI JOIN other o USING (execution_id) ORDER BY 1 LIMIT 20`,
    );
    const storedIn = (table: string) =>
      one(
        `SELECT count(DISTINCT s.execution_id)::INTEGER AS n FROM stored s SEMI JOIN ${table} t USING (execution_id)`,
      );
    return {
      files: files.length,
      rows: await one('SELECT count(*)::INTEGER AS n FROM stored'),
      distinctIds: await one('SELECT count(DISTINCT execution_id)::INTEGER AS n FROM stored'),
      duplicateIds: await one(
        'SELECT count(*)::INTEGER AS n FROM (SELECT execution_id FROM stored GROUP BY 1 HAVING count(*) > 1)',
      ),
      duplicateSample: dupRows.map((r) => ({
        execution_id: String(r.execution_id),
        n: Number(r.n),
        files: String(r.files),
      })),
      missing: await one(
        'SELECT count(*)::INTEGER AS n FROM accepted a ANTI JOIN stored s USING (execution_id)',
      ),
      missingSample: missingRows.map((r) => String(r.execution_id)),
      storedInDoubt: await storedIn('inDoubt'),
      storedRefused: await storedIn('refused'),
      storedOther: await storedIn('other'),
      storedUnknown: await one(
        `SELECT count(DISTINCT s.execution_id)::INTEGER AS n FROM stored s
         ANTI JOIN accepted a USING (execution_id) ANTI JOIN inDoubt d USING (execution_id)
         ANTI JOIN refused r USING (execution_id) ANTI JOIN other o USING (execution_id)`,
      ),
      unknownSample: unknownRows.map((r) => String(r.execution_id)),
    };
  } finally {
    c.closeSync();
    db.closeSync();
  }
}

/**
 * The files a reader sees, as the service lists them: committed files, through each partition's manifest (a
 * compaction's merged file replaces the files it merged; both exist during the grace period).
 */
async function listVisible(dataDir: string): Promise<string[]> {
  const out: string[] = [];
  const base = path.join(dataDir, 'executions');
  for (const ws of (await fs.readdir(base).catch(() => [] as string[])).filter((d) => d.startsWith('ws='))) {
    for (const mode of ['test', 'live']) {
      out.push(
        ...(await listPartitionFiles(dataDir, 'executions', ws.slice(3), mode, 0, Number.MAX_SAFE_INTEGER)),
      );
    }
  }
  return out;
}

/** Groups service log lines by message and error, so a flood of one failure reads as one line. */
function summarizeProblems(lines: string[]): { kind: string; count: number }[] {
  const counts = new Map<string, number>();
  for (const line of lines) {
    let kind = line.slice(0, 160);
    if (line.startsWith('{')) {
      try {
        const rec = JSON.parse(line) as { msg?: unknown; err?: { message?: unknown } };
        const err = typeof rec.err?.message === 'string' ? `: ${rec.err.message}` : '';
        kind = `${String(rec.msg)}${err}`.slice(0, 200);
      } catch {
        // keep the raw prefix
      }
    }
    counts.set(kind, (counts.get(kind) ?? 0) + 1);
  }
  return [...counts].map(([kind, count]) => ({ kind, count })).sort((a, b) => b.count - a.count);
}

interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

function table(rows: [string, string | number][]): string {
  const width = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`).join('\n');
}

export interface CrashRecoveryResult {
  pass: boolean;
  checks: Check[];
  resultFile: string;
}

export async function main(args: string[] = process.argv.slice(2)): Promise<CrashRecoveryResult> {
  const opts = parseOptions(args);
  const run = `${Date.now().toString(36)}${crypto.randomBytes(3).toString('hex')}`;
  const prefix = `cr-${run}`;
  const mainJs = serviceEntry(import.meta.url);
  await fs.access(mainJs).catch(() => {
    throw new Error(`${mainJs} not found: build first (npx tsc -p tsconfig.build.json)`);
  });

  if (opts.dataDir) {
    const existing = await fs.readdir(opts.dataDir).catch(() => [] as string[]);
    // The test key is printed only on the first start of a DATA_DIR, and old rows would blur the counts.
    if (existing.length > 0) throw new Error(`--data-dir ${opts.dataDir} is not empty`);
  }
  const workDir = await fs.mkdtemp(path.join(os.tmpdir(), 'svc-crash-recovery-'));
  const dataDir = opts.dataDir ?? path.join(workDir, 'data');
  await fs.mkdir(dataDir, { recursive: true });
  const port = await freePort();
  const log = (s: string) => process.stderr.write(`[crash-recovery] ${s}\n`);

  let svc: ServiceProcess | null = null;
  const starts: ServiceProcess[] = [];
  const onSignal = () => {
    void cleanupService(svc, dataDir)
      .then(() => (opts.keep ? undefined : fs.rm(workDir, { recursive: true, force: true })))
      .finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const pool = new Pool(`http://127.0.0.1:${port}`, {
    connections: opts.loops + 2,
    keepAliveTimeout: 10_000,
  });

  const startOne = async () => {
    const s = ServiceProcess.spawn({
      detached: true,
      mainJs,
      dataDir,
      port,
      logLevel: opts.logLevel,
      env: { ...opts.env, ...(opts.ackWaitFromArgs ? { CONSUMER_ACK_WAIT_MS: String(opts.ackWaitMs) } : {}) },
    });
    svc = s;
    starts.push(s);
    const readyMs = await s.waitReady(60_000);
    return { s, readyMs };
  };

  const state: IngestState = {
    stopped: false,
    nextReq: 0,
    segment: 0,
    records: [],
    duplicateFlags: 0,
    retriedDuplicates: 0,
    attempts: 0,
    unavailable: 0,
    unavailableWithoutRetryAfter: 0,
    retryDeadline: Number.POSITIVE_INFINITY,
    errorKinds: new Map(),
    otherStatuses: new Map(),
  };
  const kills: KillRecord[] = [];
  const watchers: Promise<void>[] = [];
  const burners = Array.from({ length: opts.burn }, () =>
    spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }),
  );
  let loops: Promise<void>[] = [];
  try {
    log(`DATA_DIR ${dataDir}, port ${port}, run ${run}`);
    const first = await startOne();
    const key = await first.s.signup('crash-recovery');
    log(`service ready in ${first.readyMs} ms (pid ${first.s.pid}); ingesting with ${opts.loops} loops`);
    const countQuery = `serviceName=${encodeURIComponent(opts.service)}&pageSize=1`;
    /** Polls until everything accepted before the kill is listed again, or the next kill comes. */
    const watchVisible = async (kr: KillRecord, readyAt: number) => {
      const until = readyAt + opts.ackWaitMs + 30_000;
      while (Date.now() < until && kills.at(-1) === kr) {
        const t = await apiTotal(pool, key, countQuery).catch(() => -1);
        if (t >= kr.acceptedBefore) {
          kr.visibleAfterMs = Date.now() - readyAt;
          return;
        }
        await sleep(100);
      }
    };

    const ingestStart = Date.now();
    const plannedMs =
      (opts.kills * (opts.killAfterS + opts.restartDelayS) + opts.runAfterS) * 1000 + opts.kills * 60_000;
    const hardDeadline = ingestStart + plannedMs + 60_000;
    loops = Array.from({ length: opts.loops }, () =>
      ingestLoop(pool, key, prefix, opts, state, hardDeadline),
    );

    for (let k = 1; k <= opts.kills; k++) {
      await sleep(opts.killAfterS * 1000);
      const victim = svc as ServiceProcess | null;
      if (!victim || victim.exit)
        throw new Error(`the service died on its own before kill ${k}\n${victim?.tailText(30)}`);
      const natsBefore = await natsServerPid(dataDir);
      const acceptedBefore = state.records.filter((r) => r.outcome === 'accepted').length * opts.batch;
      const killedAt = Date.now();
      if (opts.fault !== 'kill') {
        if (natsBefore === null) throw new Error('no nats-server to fault');
        state.segment = k;
        let natsAfter: number | null = natsBefore;
        if (opts.fault === 'broker-pause') {
          process.kill(natsBefore, 'SIGSTOP');
          log(`fault ${k}: nats-server ${natsBefore} stopped (SIGSTOP) for ${opts.pauseS} s`);
          await sleep(opts.pauseS * 1000);
          process.kill(natsBefore, 'SIGCONT');
        } else {
          process.kill(natsBefore, 'SIGKILL');
          log(`fault ${k}: nats-server ${natsBefore} killed (SIGKILL)`);
          const until = Date.now() + 60_000;
          do {
            await sleep(50);
            natsAfter = await natsServerPid(dataDir);
          } while ((natsAfter === null || natsAfter === natsBefore) && Date.now() < until);
        }
        const resumedAt = Date.now();
        kills.push({
          n: k,
          killedPid: natsBefore,
          killedAt,
          orphanNatsPid: null,
          orphanAliveAfterKill: false,
          orphanGoneAfterRestart: null,
          restartedPid: victim.pid,
          readyAfterMs: resumedAt - killedAt,
          newNatsPid: natsAfter,
          firstAcceptAfterMs: null,
          resumedAt,
          acceptedBefore,
          visibleAfterMs: null,
        });
        watchers.push(watchVisible(kills.at(-1)!, resumedAt));
        log(`fault ${k}: broker back after ${resumedAt - killedAt} ms (nats-server ${natsAfter ?? '-'})`);
        continue;
      }
      if (opts.kill === 'service') process.kill(victim.pid, 'SIGKILL');
      else process.kill(-victim.pid, 'SIGKILL');
      if (opts.kill === 'all' && natsBefore !== null) process.kill(natsBefore, 'SIGKILL');
      await victim.exited;
      // Give the orphan a moment: it may die on its own (SIGPIPE on its log pipe) or keep running.
      await sleep(100);
      const orphanAlive = natsBefore !== null && isAlive(natsBefore);
      log(
        `kill ${k}: SIGKILL pid ${victim.pid}; orphaned nats-server ${natsBefore ?? '-'} alive=${orphanAlive}`,
      );
      await sleep(opts.restartDelayS * 1000);
      state.segment = k;
      const next = await startOne();
      const natsAfter = await natsServerPid(dataDir);
      kills.push({
        n: k,
        killedPid: victim.pid,
        killedAt,
        orphanNatsPid: natsBefore,
        orphanAliveAfterKill: orphanAlive,
        orphanGoneAfterRestart: natsBefore === null ? null : !isAlive(natsBefore),
        restartedPid: next.s.pid,
        readyAfterMs: next.readyMs,
        newNatsPid: natsAfter,
        firstAcceptAfterMs: null,
        resumedAt: null,
        acceptedBefore,
        visibleAfterMs: null,
      });
      watchers.push(watchVisible(kills.at(-1)!, next.s.startedAt + next.readyMs));
      log(`restart ${k}: ready in ${next.readyMs} ms (pid ${next.s.pid}, nats-server ${natsAfter ?? '-'})`);
    }
    await sleep(opts.runAfterS * 1000);
    state.stopped = true;
    state.retryDeadline = Date.now() + 60_000;
    await Promise.all(loops);
    await Promise.all(watchers);
    const ingestEnd = Date.now();

    const byOutcome = (o: Outcome) => state.records.filter((r) => r.outcome === o);
    const accepted = byOutcome('accepted');
    const acceptedExecutions = accepted.length * opts.batch;
    for (const kr of kills) {
      const from = kr.resumedAt ?? kr.killedAt;
      const firstAfter = accepted.find((r) => r.segment === kr.n && r.at >= from);
      kr.firstAcceptAfterMs = firstAfter ? firstAfter.at - from : null;
    }
    log(
      `ingestion stopped after ${((ingestEnd - ingestStart) / 1000).toFixed(1)} s: ${accepted.length} requests accepted ` +
        `(${acceptedExecutions} executions); waiting for the stored count to settle`,
    );

    // A message the killed process took but did not ack comes back only after the ack wait: its rows (once or
    // twice) can appear that late, so the count is not final before then.
    const lastKill = kills.at(-1)?.killedAt ?? ingestStart;
    const notBefore = lastKill + opts.ackWaitMs + 3000;
    const settleDeadline = Math.max(ingestEnd + opts.settleTimeoutS * 1000, notBefore + 10_000);
    const QUIET_MS = 3000;
    const query = countQuery;
    let total = -1;
    let changedAt = Date.now();
    let settled = false;
    const samples: { at: number; total: number; lag: number | null }[] = [];
    while (Date.now() < settleDeadline) {
      let t: number;
      try {
        t = await apiTotal(pool, key, query);
      } catch (err) {
        log(`count query failed: ${(err as Error).message}`);
        await sleep(500);
        continue;
      }
      if (t !== total) {
        total = t;
        changedAt = Date.now();
        samples.push({ at: changedAt - ingestEnd, total: t, lag: await pipelineLag(pool) });
      }
      if (total >= acceptedExecutions && Date.now() >= notBefore && Date.now() - changedAt >= QUIET_MS) {
        settled = true;
        break;
      }
      await sleep(500);
    }
    if (!settled) samples.push({ at: Date.now() - ingestEnd, total, lag: await pipelineLag(pool) });
    log(
      `count ${settled ? 'settled' : 'did NOT settle'} at ${total} (pipeline lag ${samples.at(-1)?.lag} messages) after ${((Date.now() - ingestEnd) / 1000).toFixed(1)} s`,
    );

    // Per-id lookups of the requests most at risk: the last ones accepted before each kill.
    const sampleIds: string[] = [];
    for (let seg = 0; seg <= opts.kills; seg++) {
      const inSeg = accepted.filter((r) => r.segment === seg).slice(-4);
      for (const r of inSeg)
        sampleIds.push(execId(prefix, r.reqNo, 0), execId(prefix, r.reqNo, opts.batch - 1));
    }
    const lookups: { id: string; total: number }[] = [];
    for (const id of sampleIds) {
      lookups.push({
        id,
        total: await apiTotal(pool, key, `executionId=${encodeURIComponent(id)}&pageSize=1`),
      });
    }

    const idFiles: Record<Outcome, string> = {
      accepted: path.join(workDir, 'accepted-ids.csv'),
      inDoubt: path.join(workDir, 'in-doubt-ids.csv'),
      refused: path.join(workDir, 'refused-ids.csv'),
      other: path.join(workDir, 'other-ids.csv'),
    };
    for (const o of ['accepted', 'inDoubt', 'refused', 'other'] as const) {
      await writeIds(idFiles[o], prefix, opts.batch, byOutcome(o));
    }
    const pq = await checkParquet(dataDir, idFiles);
    // Read again after the files: a late row between the two reads would show up as a mismatch, not hide.
    const totalAfter = await apiTotal(pool, key, query);
    const journalDir = path.join(dataDir, '_journal');
    let journalLeft = 0;
    for (const n of await fs.readdir(journalDir).catch(() => [] as string[])) {
      // Entries, not fences (a commit taken over by another writer).
      if (
        n.endsWith('.json') &&
        !(await fs.readFile(path.join(journalDir, n), 'utf8')).includes('"fencedBy"')
      )
        journalLeft++;
    }

    const inDoubt = byOutcome('inDoubt');
    const refused = byOutcome('refused');
    const other = byOutcome('other');
    const checks: Check[] = [
      {
        name: 'ingestion resumed after every restart',
        ok: kills.every((k) => k.firstAcceptAfterMs !== null),
        detail: kills.map((k) => k.firstAcceptAfterMs ?? 'never').join(', '),
      },
      {
        name: 'everything accepted before a kill listed again after the restart',
        ok: kills.every((k) => k.visibleAfterMs !== null),
        detail: kills.map((k) => `${k.visibleAfterMs ?? 'never'} ms`).join(', '),
      },
      {
        name: 'orphaned nats-server stopped by the restart',
        ok: kills.every((k) => k.orphanGoneAfterRestart !== false),
        detail: kills.map((k) => `${k.orphanNatsPid ?? '-'}:${k.orphanGoneAfterRestart}`).join(', '),
      },
      { name: 'stored count settled', ok: settled, detail: `${total}` },
      {
        name: 'no duplicate ids in Parquet',
        ok: pq.duplicateIds === 0 && pq.rows === pq.distinctIds,
        detail: `${pq.duplicateIds} ids, ${pq.rows - pq.distinctIds} extra rows`,
      },
      { name: 'every accepted id in Parquet', ok: pq.missing === 0, detail: `${pq.missing} missing` },
      {
        name: 'no refused/unknown id stored',
        ok: pq.storedRefused === 0 && pq.storedUnknown === 0 && pq.storedOther === 0,
        detail: `refused ${pq.storedRefused}, other ${pq.storedOther}, unknown ${pq.storedUnknown}`,
      },
      {
        name: 'API total = Parquet rows',
        ok: total === pq.rows && totalAfter === pq.rows,
        detail: `${total} / ${totalAfter} vs ${pq.rows}`,
      },
      {
        name: 'API total = accepted + stored in-doubt',
        ok: total === acceptedExecutions + pq.storedInDoubt,
        detail: `${total} = ${acceptedExecutions} + ${pq.storedInDoubt}`,
      },
      {
        name: 'per-id lookups find exactly one',
        ok: lookups.every((l) => l.total === 1),
        detail: `${lookups.filter((l) => l.total === 1).length}/${lookups.length}`,
      },
      { name: 'no 202 marked duplicate', ok: state.duplicateFlags === 0, detail: `${state.duplicateFlags}` },
      ...(opts.fault === 'broker-pause'
        ? [
            {
              name: 'the stopped broker answered with 503s',
              ok: state.unavailable > 0,
              detail: `${state.unavailable}`,
            },
          ]
        : []),
      {
        name: 'every 503 says when to retry',
        ok: state.unavailableWithoutRetryAfter === 0,
        detail: `${state.unavailableWithoutRetryAfter} of ${state.unavailable} without retry-after`,
      },
      {
        name: 'no unexpected HTTP status',
        ok: other.length === 0,
        detail: [...state.otherStatuses].map(([s, n]) => `${s}×${n}`).join(', ') || 'none',
      },
    ];
    const pass = checks.every((c) => c.ok);

    // The final stop is not part of the acceptance point, but a non-clean exit is worth seeing.
    const finalStop = await (svc as ServiceProcess | null)?.stop('SIGTERM', 30_000);
    const leftoverNats = await natsServerPid(dataDir);

    const summary: [string, string | number][] = [
      ['kills (SIGKILL + restart)', kills.length],
      ['ingestion time (s)', ((ingestEnd - ingestStart) / 1000).toFixed(1)],
      ['requests sent', state.records.length],
      ['accepted requests (202)', accepted.length],
      ['accepted executions', acceptedExecutions],
      ['refused requests (conn refused)', refused.length],
      ['in-doubt requests (reset/503)', inDoubt.length],
      [
        '503 answers (all with retry-after?)',
        `${state.unavailable} (${state.unavailableWithoutRetryAfter} without)`,
      ],
      ['attempts (with retries)', state.attempts],
      ['202 duplicate on a retry', state.retriedDuplicates],
      ['other-status requests', other.length],
      ['Parquet files', pq.files],
      ['rows stored (Parquet)', pq.rows],
      ['distinct execution_id', pq.distinctIds],
      ['duplicate ids', pq.duplicateIds],
      ['missing accepted ids', pq.missing],
      ['stored in-doubt executions', pq.storedInDoubt],
      ['API total', `${total} (re-read ${totalAfter})`],
      ['API total − accepted', total - acceptedExecutions],
      ['journal entries left', journalLeft],
      ['restart ready (ms)', kills.map((k) => k.readyAfterMs).join(', ')],
      ['kill → first 202 (ms)', kills.map((k) => k.firstAcceptAfterMs ?? 'never').join(', ')],
      ['ready → accepted listed (ms)', kills.map((k) => k.visibleAfterMs ?? 'never').join(', ')],
      [
        'final SIGTERM exit',
        finalStop
          ? `code ${finalStop.code} signal ${finalStop.signal}${finalStop.forced ? ' (forced)' : ''}`
          : '-',
      ],
      ['client error kinds', [...state.errorKinds].map(([k, n]) => `${k}×${n}`).join(', ') || 'none'],
      ['RESULT', pass ? 'PASS' : 'FAIL'],
    ];
    process.stdout.write(
      `\ncrash recovery (${faultName(opts)} during ingestion${opts.retry ? ', lost answers resent' : ''}${opts.burn ? `, ${opts.burn} CPU burners` : ''}), ${opts.loops} loops × ${opts.batch} executions/request\n`,
    );
    process.stdout.write(`${table(summary)}\n\nchecks:\n`);
    for (const c of checks) process.stdout.write(`  ${c.ok ? 'ok  ' : 'FAIL'}  ${c.name}: ${c.detail}\n`);
    if (pq.duplicateSample.length > 0) {
      process.stdout.write('\nduplicate ids (file#ingest_seq of each copy):\n');
      for (const d of pq.duplicateSample) process.stdout.write(`  ${d.execution_id} ×${d.n}: ${d.files}\n`);
    }
    if (pq.missingSample.length > 0)
      process.stdout.write(`\nmissing accepted ids (first 20): ${pq.missingSample.join(' ')}\n`);
    if (pq.unknownSample.length > 0)
      process.stdout.write(`\nstored ids never sent (first 20): ${pq.unknownSample.join(' ')}\n`);
    const problems = starts.flatMap((s, i) => s.problems.map((p) => `start ${i} (pid ${s.pid}): ${p}`));
    const problemKinds = summarizeProblems(starts.flatMap((s) => s.problems));
    if (problemKinds.length > 0) {
      process.stdout.write(`\nservice warnings/errors (${problems.length} lines), by kind:\n`);
      for (const k of problemKinds.slice(0, 10))
        process.stdout.write(`  ${String(k.count).padStart(6)}×  ${k.kind}\n`);
      process.stdout.write(`  first: ${problems[0]?.slice(0, 600)}\n`);
    }
    if (leftoverNats !== null)
      process.stdout.write(`\nnats-server ${leftoverNats} still running after the final stop\n`);

    const resultsDir = path.resolve(
      path.dirname(fileURLToPath(import.meta.url)),
      '..',
      '..',
      'bench',
      'results',
    );
    await fs.mkdir(resultsDir, { recursive: true });
    const stamp = new Date().toISOString().replace(/[:.]/g, '-');
    const resultFile = path.join(resultsDir, `crash-recovery-${stamp}.json`);
    const result = {
      bench: 'crash-recovery',
      at: new Date().toISOString(),
      pass,
      options: { ...opts, dataDir },
      run,
      port,
      node: process.version,
      ingest: {
        durationMs: ingestEnd - ingestStart,
        requests: state.records.length,
        accepted: accepted.length,
        acceptedExecutions,
        refused: refused.length,
        inDoubt: inDoubt.length,
        other: other.length,
        errorKinds: Object.fromEntries(state.errorKinds),
        otherStatuses: Object.fromEntries(state.otherStatuses),
        acceptedBySegment: Array.from(
          { length: opts.kills + 1 },
          (_, seg) => accepted.filter((r) => r.segment === seg).length,
        ),
        duplicateFlags: state.duplicateFlags,
        retriedDuplicates: state.retriedDuplicates,
        attempts: state.attempts,
      },
      kills,
      settle: { settled, total, totalAfter, samples, waitedMs: Date.now() - ingestEnd },
      parquet: pq,
      lookups,
      journalLeft,
      finalStop,
      leftoverNats,
      checks,
      serviceProblemKinds: problemKinds,
      serviceProblems: problems.slice(0, 200),
    };
    await fs.writeFile(resultFile, `${JSON.stringify(result, null, 2)}\n`);
    process.stdout.write(`\nresult: ${resultFile}\n`);
    if (opts.keep) process.stdout.write(`kept: ${workDir}\n`);
    else if (!pass) process.stdout.write('rerun with --keep to inspect the ids and Parquet files\n');
    process.exitCode = pass ? 0 : 1;
    return { pass, checks, resultFile };
  } catch (err) {
    state.stopped = true;
    await Promise.allSettled(loops);
    const s = svc as ServiceProcess | null;
    if (s) process.stderr.write(`[crash-recovery] last service output:\n${s.tailText(30)}\n`);
    throw err;
  } finally {
    state.stopped = true;
    for (const b of burners) b.kill('SIGKILL');
    await cleanupService(svc, dataDir);
    await pool.close().catch(() => {});
    if (!opts.keep) await fs.rm(workDir, { recursive: true, force: true }).catch(() => {});
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  main(process.argv.slice(2)).then(
    () => process.exit(process.exitCode ?? 0),
    (err) => {
      process.stderr.write(`crash-recovery failed: ${err instanceof Error ? err.stack : String(err)}\n`);
      process.exit(1);
    },
  );
}
