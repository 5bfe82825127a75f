import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { DiscardPolicy, type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Pool } from 'undici';
import { INGEST_STREAM, PIPELINE_CONSUMER } from '../broker/provision.js';
import { CLUSTER_NODES, type Cluster, startCluster } from '../cluster.js';
import type { CommitEntry } from '../storage/commit-journal.js';
import { type DriveResult, drive, listedTotal, postIngest, procStats } from './support/load.js';
import { envOptions, wholeNumber } from './support/options.js';
import { serviceEntry, signupKey, UNLIMITED_RATES } from './support/service-process.js';
import { median } from './support/stats.js';
import { type BodyTemplate, buildTemplate, stampBody } from './traffic.js';

/**
 * Throughput across processes (issue 17, item 5): the same ingest load (bench/ingest.ts's SDK bodies, closed
 * loop) through `npm run cluster`'s setup — a 3-node NATS cluster, stream and buckets replicated three times —
 * with one api and one pipeline process, then with two of each, on a fresh cluster and DATA_DIR each time. The
 * shapes alternate round by round (1+1, 2+2, 1+1, 2+2, …) because the host is noisy; the spread is reported.
 *
 * Per run: executions/s accepted and stored (first request → all visible to the list API), and the CPU of every
 * process (api, pipeline, nats-server: /proc/<pid>/stat utime+stime over that window) per stored execution,
 * summed by role and in total; the requests each api process accepted and the messages each pipeline process
 * committed (from the commit journal's entries, one writer per process), to see the work spread, not pile up on
 * one process. The ceiling taken on each cluster first: raw JetStream publish of the same bodies to an R3 stream of
 * its own. The ratios 2+2 / 1+1 pair the shapes of one round. Before the measured load, a warm-up under another
 * account (drained) and a few idle seconds (each process's CPU at rest, to tell fixed costs from per-execution ones).
 *
 * On 2 CPUs two of each cannot be faster; what the ratios should show is that the CPU per execution stays the
 * same (no process doing the work twice, none waiting on another's lock).
 */

const here = path.dirname(fileURLToPath(import.meta.url));
const resultsDir = path.resolve(here, '..', '..', 'bench', 'results');

const USAGE = `usage: npm run bench -- cluster [options]
  --duration S       seconds of load per run (20)
  --rounds N         rounds of the two shapes, 1+1 then 2+2 (2)
  --concurrency N    HTTP connections sending at once, split over the api processes (8)
  --batch N          executions per request (500)
  --warmup S         seconds of load first, under another account, drained before the measured load (5; 0: none)
  --idle S           seconds the idle processes are measured before the load (3; 0: not measured)
  --env K=V          configuration for every api and pipeline process (repeatable)
  --no-baselines     skip the raw JetStream publish ceiling
  --keep             keep the temporary data directories
`;

interface Shape {
  name: string;
  apis: number;
  pipelines: number;
}

const SHAPES: Shape[] = [
  { name: '1+1', apis: 1, pipelines: 1 },
  { name: '2+2', apis: 2, pipelines: 2 },
];

type Role = 'api' | 'pipeline' | 'nats';

interface Options {
  duration: number;
  rounds: number;
  concurrency: number;
  batch: number;
  warmup: number;
  idle: number;
  env: Record<string, string>;
  baselines: boolean;
  keep: boolean;
}

/** As bench/ingest.ts: enough bodies for its 2,000 distinct failure fingerprints. */
const TEMPLATES = 216;
/** How long the stored count may take to catch up with what was accepted before the run is failed. */
const DRAIN_TIMEOUT_MS = 300_000;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

const fmt = (n: number | null | undefined, digits = 0) =>
  n === null || n === undefined || !Number.isFinite(n)
    ? '–'
    : n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      duration: { type: 'string', default: '20' },
      rounds: { type: 'string', default: '2' },
      concurrency: { type: 'string', default: '8' },
      batch: { type: 'string', default: '500' },
      warmup: { type: 'string', default: '5' },
      idle: { type: 'string', default: '3' },
      env: { type: 'string', multiple: true, default: [] },
      'no-baselines': { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  const maxApis = Math.max(...SHAPES.map((s) => s.apis));
  return {
    duration: wholeNumber('duration', values.duration, 1, 3600),
    rounds: wholeNumber('rounds', values.rounds, 1, 100),
    concurrency: wholeNumber('concurrency', values.concurrency, maxApis, 1024),
    batch: wholeNumber('batch', values.batch, 1, 10_000),
    warmup: wholeNumber('warmup', values.warmup, 0, 600),
    idle: wholeNumber('idle', values.idle, 0, 60),
    env: envOptions(values.env),
    baselines: !values['no-baselines'],
    keep: values.keep,
  };
}

interface ProcessFigures {
  name: string;
  role: Role;
  pid: number;
  cpuSeconds: number;
  /** Mean cores used over the window (first request → all visible). */
  cores: number;
  cpuMicrosPerExecution: number;
  /** Cores it used idle, just before the load (timers, heartbeats, replication): null when not measured. */
  idleCores: number | null;
  /** api: requests it accepted; pipeline processes are not named in the journal, see `pipelineWriters`. */
  requestsAccepted?: number;
}

interface TimelineSample {
  /** Seconds since the load started. */
  t: number;
  acceptedExecutions: number;
  /** Messages gone from the work-queue stream, times the batch: committed (acked only after the commit). */
  committedExecutions: number;
  lagMessages: number;
  /** Cores used since the previous sample, by role. */
  cores: Record<Role, number>;
}

interface ShapeRun {
  shape: string;
  round: number;
  apis: number;
  pipelines: number;
  clusterStartSeconds: number;
  rawPublishExecPerSec: number | null;
  requests: { accepted: number; refused: number };
  executions: { accepted: number; visible: number; visibleByApi: number[] };
  loadSeconds: number;
  acceptedExecPerSec: number;
  /** Every accepted execution over the time from the first request until all of them were visible. */
  storedExecPerSec: number;
  lastAcceptToVisibleMs: number;
  windowSeconds: number;
  processes: ProcessFigures[];
  /** CPU µs per stored execution, by role and in total (every api, pipeline and nats-server process). */
  cpuMicrosPerExecution: Record<Role | 'total', number>;
  /** The total less what the processes would have used idle over the window. */
  netCpuMicrosPerExecution: number | null;
  /** Messages (requests) each pipeline writer committed in the window, most first, from the commit journal. */
  pipelineWriters: { writerId: string; messages: number; commits: number }[];
  benchCpuSeconds: number;
  /** The whole machine over the window (/proc/stat): cores busy, and cores stolen by the hypervisor. */
  host: { busyCores: number; stealCores: number };
  timeline: TimelineSample[];
  problems: string[];
}

/** The cluster's processes, named as in its logs. */
function processesOf(cluster: Cluster): { name: string; role: Role; pid: number }[] {
  const pid = (name: string, p: number | null) => {
    if (p === null) throw new Error(`${name} is not running`);
    return p;
  };
  return [
    ...cluster.api.map((a) => ({ name: a.name, role: 'api' as const, pid: pid(a.name, a.pid) })),
    ...cluster.pipeline.map((p) => ({ name: p.name, role: 'pipeline' as const, pid: pid(p.name, p.pid) })),
    ...cluster.nats.map((n, i) => ({
      name: `nats-${i + 1}`,
      role: 'nats' as const,
      pid: pid(`nats-${i + 1}`, n.pid()),
    })),
  ];
}

/** CPU seconds of each pid (utime + stime of all its threads; procStats divides by CLK_TCK = 100). */
const cpuOf = (pids: number[]) => Promise.all(pids.map(async (p) => (await procStats(p)).cpuSeconds));

/** The machine's CPU ticks so far (/proc/stat `cpu` line): busy (all but idle and iowait) and steal. */
async function hostTicks(): Promise<{ busy: number; steal: number }> {
  const line = (await fs.readFile('/proc/stat', 'utf8')).split('\n', 1)[0]!;
  // user nice system idle iowait irq softirq steal …
  const t = line.trim().split(/\s+/).slice(1).map(Number);
  const at = (i: number) => t[i] ?? 0;
  return { busy: at(0) + at(1) + at(2) + at(5) + at(6) + at(7), steal: at(7) };
}

/** Raw JetStream publish of the same bodies to an R3 stream of its own on the cluster (deleted afterwards). */
async function rawPublish(
  nc: NatsConnection,
  jsm: JetStreamManager,
  templates: BodyTemplate[],
  o: Options,
): Promise<number> {
  const name = 'BENCH_RAW';
  await jsm.streams.add({
    name,
    subjects: ['bench.raw'],
    num_replicas: CLUSTER_NODES,
    max_msg_size: 8 * 1024 * 1024,
    // Bounded, as the ingest stream is by its consumer: the ceiling is the publish, not a filling disk.
    max_bytes: 512 * 1024 * 1024,
    discard: DiscardPolicy.Old,
  });
  try {
    const js = jetstream(nc);
    const r = await drive({
      concurrency: o.concurrency,
      seconds: Math.min(10, o.duration),
      send: async (n) => {
        await js.publish('bench.raw', stampBody(templates[n % templates.length]!, n), { msgID: `raw-${n}` });
        return true;
      },
    });
    return (r.accepted * o.batch) / r.seconds;
  } finally {
    await jsm.streams.delete(name);
  }
}

const journalDir = (dataDir: string) => path.join(dataDir, '_journal');

/**
 * Messages and commits per pipeline writer (one per process), from the commit journal's entries but those in
 * `before` (no entry is pruned within minutes: CommitJournal keeps them the idempotency window).
 */
async function journalWriters(dataDir: string, before: Set<string>): Promise<ShapeRun['pipelineWriters']> {
  const dir = journalDir(dataDir);
  const byWriter = new Map<string, { messages: number; commits: number }>();
  for (const name of await fs.readdir(dir)) {
    if (!name.endsWith('.json') || before.has(name)) continue;
    const e = JSON.parse(await fs.readFile(path.join(dir, name), 'utf8')) as Partial<CommitEntry>;
    // A fence (a stalled commit another writer took over) stands under a commit's name but is no entry.
    if (!e.writerId || !e.seqs) continue;
    const w = byWriter.get(e.writerId) ?? { messages: 0, commits: 0 };
    w.messages += e.seqs.length;
    w.commits++;
    byWriter.set(e.writerId, w);
  }
  return [...byWriter].map(([writerId, w]) => ({ writerId, ...w })).sort((a, b) => b.messages - a.messages);
}

/** The cluster's log files and their sizes now: where `logProblems` starts reading. */
async function logOffsets(dataDir: string): Promise<Map<string, number>> {
  const dir = path.join(dataDir, '_cluster', 'logs');
  const names = await fs.readdir(dir).catch(() => [] as string[]);
  return new Map(
    await Promise.all(
      names.map(async (n): Promise<[string, number]> => [n, (await fs.stat(path.join(dir, n))).size]),
    ),
  );
}

/**
 * Warnings and errors in the cluster's logs (pino level ≥ 40; nats-server [WRN]/[ERR]) written after `from`, the
 * first few: the nodes' refused routes while they all start are no finding.
 */
async function logProblems(dataDir: string, from: Map<string, number>, most = 20): Promise<string[]> {
  const dir = path.join(dataDir, '_cluster', 'logs');
  const out: string[] = [];
  for (const name of (await fs.readdir(dir).catch(() => [])).sort()) {
    const text = (await fs.readFile(path.join(dir, name))).subarray(from.get(name) ?? 0).toString('utf8');
    for (const line of text.split('\n')) {
      let bad = /\[(WRN|ERR|FTL)\]/.test(line);
      if (line.startsWith('{')) {
        try {
          bad = ((JSON.parse(line) as { level?: number }).level ?? 0) >= 40;
        } catch {
          // not a pino line
        }
      }
      if (bad && out.length < most) out.push(`${name}: ${line.slice(0, 300)}`);
    }
  }
  return out;
}

/** Closed-loop load through every api process, the connections split between them; the loops share one clock. */
async function load(
  urls: string[],
  key: string,
  tag: string,
  templates: BodyTemplate[],
  o: Options,
  seconds: number,
  onAccepted: () => void,
): Promise<DriveResult[]> {
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  return Promise.all(
    urls.map(async (url, k) => {
      const connections = Math.floor(o.concurrency / urls.length) + (k < o.concurrency % urls.length ? 1 : 0);
      const pool = new Pool(url, { connections, pipelining: 1 });
      try {
        return await drive({
          concurrency: connections,
          seconds,
          send: (n) => {
            // Request numbers interleaved over the api processes: every execution id and idempotency key once.
            const no = n * urls.length + k;
            return postIngest(
              pool,
              headers,
              stampBody(templates[no % templates.length]!, no),
              `${tag}-${no}`,
            );
          },
          onAccepted,
        });
      } finally {
        await pool.close();
      }
    }),
  );
}

/** One shape on a fresh cluster and DATA_DIR: started, loaded, drained, measured, stopped. */
async function runShape(
  o: Options,
  templates: BodyTemplate[],
  shape: Shape,
  round: number,
  dir: string,
): Promise<ShapeRun> {
  const tag = `${shape.name.replace('+', 'x')}-r${round}-${Date.now().toString(36)}`;
  const dataDir = path.join(dir, `data-${tag}`);
  let cluster: Cluster | null = null;
  let nc: NatsConnection | null = null;
  // The nats-servers run in process groups of their own: a Ctrl-C must stop them here or they outlive the bench.
  const onSignal = () => {
    void (cluster?.stop() ?? Promise.resolve()).finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    const started = performance.now();
    cluster = await startCluster({
      dataDir,
      apis: shape.apis,
      pipelines: shape.pipelines,
      mainJs: serviceEntry(import.meta.url),
      // A node that died is a failed run here, not one to restart: its pid and CPU would be another's.
      restartNodes: false,
      env: { ...UNLIMITED_RATES, ...o.env },
    });
    const clusterStartSeconds = (performance.now() - started) / 1000;
    const urls = cluster.api.map((a) => a.url!);
    const key = await signupKey(urls[0]!, `cluster-${tag}`);
    nc = await connect({ servers: cluster.natsUrl.split(',') });
    const jsm = await jetstreamManager(nc);
    const rawPublishExecPerSec = o.baselines ? await rawPublish(nc, jsm, templates, o) : null;
    const lagMessages = async () => {
      const info = await jsm.consumers.info(INGEST_STREAM, PIPELINE_CONSUMER);
      return info.num_pending + info.num_ack_pending;
    };
    const drained = async () => {
      for (const deadline = Date.now() + DRAIN_TIMEOUT_MS; Date.now() < deadline; await sleep(50))
        if ((await lagMessages()) === 0) return;
      throw new Error(`the pipeline did not drain within ${DRAIN_TIMEOUT_MS} ms`);
    };
    /** Work-queue retention: a message leaves the stream when the pipeline acks it, after its commit. */
    const committedMessages = async () => {
      const { state } = await jsm.streams.info(INGEST_STREAM);
      return state.last_seq - state.messages;
    };

    // Fresh processes compile as they go: a warm-up (under another account, so the measured workspace holds only
    // the measured load) keeps the JIT of two processes instead of one out of the comparison.
    if (o.warmup > 0) {
      const warmKey = await signupKey(urls[0]!, `cluster-warmup-${tag}`);
      await load(urls, warmKey, `${tag}-warmup`, templates, o, o.warmup, () => {});
      await drained();
    }
    const procs = processesOf(cluster);
    const pids = procs.map((p) => p.pid);
    let idleCores: number[] | null = null;
    if (o.idle > 0) {
      const before = await cpuOf(pids);
      const t = performance.now();
      await sleep(o.idle * 1000);
      const after = await cpuOf(pids);
      const seconds = (performance.now() - t) / 1000;
      idleCores = pids.map((_, i) => (after[i]! - before[i]!) / seconds);
    }
    const committed0 = await committedMessages();
    const logsFrom = await logOffsets(dataDir);
    const journalBefore = new Set(await fs.readdir(journalDir(dataDir)));
    const [cpu0, host0] = await Promise.all([cpuOf(pids), hostTicks()]);
    const bench0 = process.cpuUsage();
    let acceptedRequests = 0;
    const loadStart = performance.now();

    // Once a second: accepted, committed and the backlog, and the cores each role used (a progress line).
    const timeline: TimelineSample[] = [];
    let prev = { t: 0, cpu: cpu0, accepted: 0, committed: 0 };
    let busy = false;
    let lastLine = 0;
    const sample = async () => {
      if (busy) return;
      busy = true;
      try {
        const accepted = acceptedRequests;
        const [lag, committed, cpu] = await Promise.all([lagMessages(), committedMessages(), cpuOf(pids)]);
        const t = (performance.now() - loadStart) / 1000;
        const dt = t - prev.t;
        const cores = { api: 0, pipeline: 0, nats: 0 };
        procs.forEach((p, i) => {
          cores[p.role] += (cpu[i]! - prev.cpu[i]!) / dt;
        });
        const s: TimelineSample = {
          t,
          acceptedExecutions: accepted * o.batch,
          committedExecutions: (committed - committed0) * o.batch,
          lagMessages: lag,
          cores,
        };
        timeline.push(s);
        const line =
          `  ${shape.name} r${round} ${fmt(t)} s │ accepted ${fmt((s.acceptedExecutions - prev.accepted) / dt)}/s` +
          ` │ committed ${fmt((s.committedExecutions - prev.committed) / dt)}/s │ behind ${fmt(lag)} msgs` +
          ` │ cores api ${fmt(cores.api, 2)} pipeline ${fmt(cores.pipeline, 2)} nats ${fmt(cores.nats, 2)}`;
        process.stdout.write(`\r${line.padEnd(lastLine)}`);
        lastLine = line.length;
        prev = { t, cpu, accepted: s.acceptedExecutions, committed: s.committedExecutions };
      } catch {
        // a missed second; the next one covers it
      } finally {
        busy = false;
      }
    };
    const timer = setInterval(() => void sample(), 1000);
    let loads: DriveResult[];
    let visible = 0;
    let expected = 0;
    try {
      loads = await load(urls, key, tag, templates, o, o.duration, () => acceptedRequests++);
      expected = loads.reduce((n, l) => n + l.accepted, 0) * o.batch;
      // Every accepted execution must become visible. The backlog (consumer info) is cheap to ask every 50 ms; the
      // list's total is a query over every file written, asked only once the backlog is gone.
      const deadline = Date.now() + DRAIN_TIMEOUT_MS;
      while (Date.now() < deadline) {
        if ((await lagMessages()) === 0) {
          visible = await listedTotal(urls[0]!, key);
          if (visible >= expected) break;
        }
        await sleep(50);
      }
    } finally {
      clearInterval(timer);
    }
    const visibleAt = performance.now();
    const [cpu1, host1] = await Promise.all([cpuOf(pids), hostTicks()]);
    const benchCpu = process.cpuUsage(bench0);
    await sample();
    process.stdout.write('\n');

    // Every api process lists the same (each reads the files itself; another's generation may reach it later).
    const visibleByApi = await Promise.all(
      urls.map(async (url) => {
        let n = 0;
        for (const until = Date.now() + 10_000; Date.now() < until; await sleep(100)) {
          n = await listedTotal(url, key);
          if (n >= expected) break;
        }
        return n;
      }),
    );

    const windowSeconds = (visibleAt - loadStart) / 1000;
    const per = (cpuSeconds: number) => (visible > 0 ? (cpuSeconds * 1e6) / visible : Number.NaN);
    const processes: ProcessFigures[] = procs.map((p, i) => {
      const cpuSeconds = cpu1[i]! - cpu0[i]!;
      return {
        ...p,
        cpuSeconds,
        cores: cpuSeconds / windowSeconds,
        cpuMicrosPerExecution: per(cpuSeconds),
        idleCores: idleCores?.[i] ?? null,
        ...(p.role === 'api' ? { requestsAccepted: loads[i]!.accepted } : {}),
      };
    });
    const byRole = (role: Role) =>
      per(processes.filter((p) => p.role === role).reduce((s, p) => s + p.cpuSeconds, 0));
    const loadSeconds = Math.max(...loads.map((l) => l.seconds));
    const ticks = (n: number) => n / 100 / windowSeconds;
    return {
      shape: shape.name,
      round,
      apis: shape.apis,
      pipelines: shape.pipelines,
      clusterStartSeconds,
      rawPublishExecPerSec,
      requests: {
        accepted: loads.reduce((n, l) => n + l.accepted, 0),
        refused: loads.reduce((n, l) => n + l.refused, 0),
      },
      executions: { accepted: expected, visible, visibleByApi },
      loadSeconds,
      acceptedExecPerSec: expected / loadSeconds,
      storedExecPerSec: visible / windowSeconds,
      lastAcceptToVisibleMs: visibleAt - Math.max(...loads.map((l) => l.lastAcceptAt)),
      windowSeconds,
      processes,
      cpuMicrosPerExecution: {
        api: byRole('api'),
        pipeline: byRole('pipeline'),
        nats: byRole('nats'),
        total: per(processes.reduce((s, p) => s + p.cpuSeconds, 0)),
      },
      netCpuMicrosPerExecution: idleCores
        ? per(processes.reduce((s, p) => s + p.cpuSeconds - (p.idleCores ?? 0) * windowSeconds, 0))
        : null,
      pipelineWriters: await journalWriters(dataDir, journalBefore),
      benchCpuSeconds: (benchCpu.user + benchCpu.system) / 1e6,
      host: { busyCores: ticks(host1.busy - host0.busy), stealCores: ticks(host1.steal - host0.steal) },
      timeline,
      problems: await logProblems(dataDir, logsFrom),
    };
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await nc?.close().catch(() => {});
    await cluster?.stop().catch(() => {});
    if (!o.keep) await fs.rm(dataDir, { recursive: true, force: true });
  }
}

function table(header: string[], rows: string[][], textColumns = 1): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i < textColumns ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' │ ');
  return [line(header), widths.map((w) => '─'.repeat(w)).join('─┼─'), ...rows.map(line)].join('\n');
}

function runsTable(runs: ShapeRun[]): string {
  return table(
    [
      'shape',
      'round',
      'accepted/s',
      'stored/s',
      'raw R3 pub/s',
      'stored/raw',
      'µs/exec api',
      'pipeline',
      'nats',
      'total',
      'net of idle',
      'idle cores',
      'bench cores',
      'host busy (steal) cores',
    ],
    runs.map((r) => [
      r.shape,
      String(r.round),
      fmt(r.acceptedExecPerSec),
      fmt(r.storedExecPerSec),
      fmt(r.rawPublishExecPerSec),
      r.rawPublishExecPerSec ? fmt(r.storedExecPerSec / r.rawPublishExecPerSec, 2) : '–',
      fmt(r.cpuMicrosPerExecution.api, 1),
      fmt(r.cpuMicrosPerExecution.pipeline, 1),
      fmt(r.cpuMicrosPerExecution.nats, 1),
      fmt(r.cpuMicrosPerExecution.total, 1),
      fmt(r.netCpuMicrosPerExecution, 1),
      fmt(
        r.processes.some((p) => p.idleCores === null)
          ? null
          : r.processes.reduce((s, p) => s + p.idleCores!, 0),
        2,
      ),
      fmt(r.benchCpuSeconds / r.windowSeconds, 2),
      `${fmt(r.host.busyCores, 2)} (${fmt(r.host.stealCores, 2)})`,
    ]),
    2,
  );
}

function processTable(runs: ShapeRun[]): string {
  const rows: string[][] = [];
  for (const r of runs) {
    const total = r.processes.reduce((s, p) => s + p.cpuSeconds, 0);
    for (const p of r.processes) {
      rows.push([
        `${r.shape} r${r.round}`,
        p.name,
        String(p.pid),
        fmt(p.cpuSeconds, 1),
        fmt(p.cores, 2),
        fmt(p.idleCores, 3),
        fmt(p.cpuMicrosPerExecution, 1),
        `${fmt((100 * p.cpuSeconds) / total, 0)} %`,
        p.requestsAccepted === undefined
          ? ''
          : `${fmt(p.requestsAccepted)} (${fmt((100 * p.requestsAccepted) / r.requests.accepted)} %)`,
      ]);
    }
  }
  return table(
    ['run', 'process', 'pid', 'CPU s', 'cores', 'idle cores', 'µs/exec', 'of run CPU', 'requests accepted'],
    rows,
    3,
  );
}

const spread = (xs: number[]) => `${fmt(median(xs))} (${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))})`;
const spread1 = (xs: number[]) =>
  `${fmt(median(xs), 1)} (${fmt(Math.min(...xs), 1)}–${fmt(Math.max(...xs), 1)})`;

interface Ratio {
  round: number | 'median';
  acceptedExecPerSec: number;
  storedExecPerSec: number;
  cpuMicrosPerExecution: Record<Role | 'total', number>;
}

/** 2+2 over 1+1, round by round (the two runs of a round are next to each other in time), and of the medians. */
function ratios(runs: ShapeRun[], rounds: number): Ratio[] {
  const [one, two] = SHAPES.map((s) => runs.filter((r) => r.shape === s.name));
  const ratio = (a: ShapeRun[], b: ShapeRun[], round: Ratio['round']): Ratio => {
    const m = (xs: ShapeRun[], f: (r: ShapeRun) => number) => median(xs.map(f));
    const cpu = (role: Role | 'total') =>
      m(b, (r) => r.cpuMicrosPerExecution[role]) / m(a, (r) => r.cpuMicrosPerExecution[role]);
    return {
      round,
      acceptedExecPerSec: m(b, (r) => r.acceptedExecPerSec) / m(a, (r) => r.acceptedExecPerSec),
      storedExecPerSec: m(b, (r) => r.storedExecPerSec) / m(a, (r) => r.storedExecPerSec),
      cpuMicrosPerExecution: {
        api: cpu('api'),
        pipeline: cpu('pipeline'),
        nats: cpu('nats'),
        total: cpu('total'),
      },
    };
  };
  const out: Ratio[] = [];
  for (let round = 1; round <= rounds; round++) {
    const a = one!.filter((r) => r.round === round);
    const b = two!.filter((r) => r.round === round);
    if (a.length && b.length) out.push(ratio(a, b, round));
  }
  if (rounds > 1) out.push(ratio(one!, two!, 'median'));
  return out;
}

function summaryText(runs: ShapeRun[], rs: Ratio[]): string {
  const shapes = table(
    [
      'shape',
      'runs',
      'accepted/s median (min–max)',
      'stored/s median (min–max)',
      'total µs/exec median (min–max)',
    ],
    SHAPES.map((s) => {
      const xs = runs.filter((r) => r.shape === s.name);
      return [
        s.name,
        String(xs.length),
        spread(xs.map((r) => r.acceptedExecPerSec)),
        spread(xs.map((r) => r.storedExecPerSec)),
        spread1(xs.map((r) => r.cpuMicrosPerExecution.total)),
      ];
    }),
  );
  const ratioTable = table(
    ['2+2 / 1+1', 'accepted/s', 'stored/s', 'µs/exec api', 'pipeline', 'nats', 'total'],
    rs.map((r) => [
      r.round === 'median' ? 'of the medians' : `round ${r.round}`,
      fmt(r.acceptedExecPerSec, 2),
      fmt(r.storedExecPerSec, 2),
      fmt(r.cpuMicrosPerExecution.api, 2),
      fmt(r.cpuMicrosPerExecution.pipeline, 2),
      fmt(r.cpuMicrosPerExecution.nats, 2),
      fmt(r.cpuMicrosPerExecution.total, 2),
    ]),
  );
  const writers = runs
    .map(
      (r) =>
        `  ${r.shape} r${r.round}: ${r.pipelineWriters
          .map((w) => `${w.writerId} ${fmt(w.messages)} msgs in ${fmt(w.commits)} commits`)
          .join(', ')} (of ${fmt(r.requests.accepted)} requests accepted)`,
    )
    .join('\n');
  return `${shapes}\n\n${ratioTable}\n\nmessages committed per pipeline writer (one writer per process; commit journal):\n${writers}`;
}

export async function main(argv: string[] = process.argv.slice(2)): Promise<void> {
  const o = parseOptions(argv);
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'svc-bench-cluster-'));
  try {
    const run = `c${Date.now().toString(36)}`;
    const templates: BodyTemplate[] = [];
    for (let i = 0; i < TEMPLATES; i++) {
      const firstFingerprint = templates.at(-1)?.nextFingerprint ?? 0;
      templates.push(buildTemplate(1000 + i, run, o.batch, { firstFingerprint }));
    }
    process.stdout.write(
      `cluster: ${CLUSTER_NODES} NATS nodes, stream and buckets replicated ${CLUSTER_NODES} times, the same for both shapes; ` +
        `shapes ${SHAPES.map((s) => `${s.name} (${s.apis} api, ${s.pipelines} pipeline)`).join(' and ')}, ` +
        `each on a fresh cluster and DATA_DIR, alternating for ${o.rounds} rounds\n` +
        `load: closed loop, ${o.concurrency} connections split over the api processes, ${o.duration} s, ` +
        `${o.batch} executions (${fmt(templates[0]!.bytes.length / 1024)} KiB) a request; ` +
        `${o.warmup ? `${o.warmup} s warm-up first; ` : ''}` +
        `${os.availableParallelism()} CPUs here (benchmark client included)\n`,
    );
    const runs: ShapeRun[] = [];
    for (let round = 1; round <= o.rounds; round++) {
      for (const shape of SHAPES) {
        const r = await runShape(o, templates, shape, round, dir);
        runs.push(r);
        if (r.executions.visibleByApi.some((n) => n !== r.executions.accepted)) {
          process.stdout.write(
            `FAIL: ${shape.name} round ${round}: ${fmt(r.executions.accepted)} accepted, listed ${r.executions.visibleByApi.map((n) => fmt(n)).join(' / ')} by the api processes\n`,
          );
          process.exitCode = 1;
        }
        if (r.problems.length > 0)
          process.stdout.write(`  ${r.problems.length} warnings in the logs, first: ${r.problems[0]}\n`);
      }
    }
    const rs = ratios(runs, o.rounds);
    process.stdout.write(
      `\n${runsTable(runs)}\n\nper process (CPU over first request → all visible, per stored execution):\n${processTable(runs)}\n\n${summaryText(runs, rs)}\n`,
    );
    await fs.mkdir(resultsDir, { recursive: true });
    const at = new Date().toISOString();
    const file = path.join(resultsDir, `cluster-${at.replace(/[:.]/g, '-')}.json`);
    const json = {
      at,
      options: o,
      setup: {
        natsNodes: CLUSTER_NODES,
        replicas: CLUSTER_NODES,
        shapes: SHAPES,
        bodyKiB: templates[0]!.bytes.length / 1024,
      },
      machine: { cpus: os.availableParallelism(), node: process.version },
      runs,
      ratios: rs,
    };
    await fs.writeFile(file, `${JSON.stringify(json, null, 2)}\n`);
    process.stdout.write(`\nresults: ${path.relative(process.cwd(), file)}\n`);
  } finally {
    if (!o.keep) await fs.rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  main().catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
