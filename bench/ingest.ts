import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
} from '@nats-io/jetstream';
import { connect, nanos } from '@nats-io/transport-node';
import { Pool } from 'undici';
import { freePort, startNatsServer } from '../broker/nats-server.js';
import { IDEMPOTENCY_WINDOW_MS } from '../schemas/broker-messages.js';
import { loadConfig } from '../schemas/config.js';
import { compactionOptions } from '../storage/compaction.js';
import { type DiskParts, totalBytes } from './support/dataset.js';
import { type HourEndCost, hourEndCost, type PassCost, runningMergesCost } from './support/hour-end.js';
import {
  compactionSummary,
  drive,
  flushSummary,
  listedTotal,
  Prober,
  pipelineLag,
  postIngest,
  procStats,
  type Sample,
  Sampler,
} from './support/load.js';
import { envOptions, wholeNumber } from './support/options.js';
import { profilesOf, stageTable } from './support/profile-breakdown.js';
import {
  cleanupService,
  natsServerPid,
  ServiceProcess,
  serviceEntry,
  signupKey,
} from './support/service-process.js';
import { barChart, lineChart, rowChart, stack } from './support/svg-chart.js';
import { cpuByGroup, threadSnapshot } from './support/thread-cpu.js';
import { type BodyTemplate, buildTemplate, CONTEXT_KEYS, decodedBytes, stampBody } from './traffic.js';

/**
 * Ingest throughput and freshness, end to end: realistic SDK batches over HTTP (undici, keep-alive) into the
 * service, until every accepted execution is visible to queries. By default the service is started here as a
 * child process on its embedded defaults (its own nats-server); `--url` targets a running one instead.
 *
 * Reported, as a table and as JSON in bench/results/: requests/s and executions/s accepted; executions/s
 * stored (visible to the list API); 202 → visible p50/p99 from marked executions; pipeline lag and throughput
 * second by second (also as an SVG chart); the service's CPU seconds and peak RSS; and the ceilings measured
 * in the same run: raw JetStream publish of the same bodies from Node, and JSON.parse of them.
 *
 * `--sweep KNOB=v1,v2,…` runs once per value (a fresh service each) and prints which was best.
 */

const here = path.dirname(fileURLToPath(import.meta.url));
const resultsDir = path.resolve(here, '..', '..', 'bench', 'results');

/** The knobs a sweep can turn: short name → the service's configuration variable. */
export const KNOBS: Record<string, string> = {
  batch: 'BATCH_MAX_ROWS',
  flush: 'FLUSH_INTERVAL_MS',
  workers: 'PIPELINE_WORKERS',
  encoders: 'ENCODE_WORKERS',
  fetch: 'CONSUMER_MAX_MESSAGES',
  codec: 'PARQUET_COMPRESSION',
};

const USAGE = `usage: npm run bench -- ingest [options]
  --duration S       seconds of load (30)
  --warmup S         first send this many seconds of the same load and wait until it is stored, then measure: the
                     counts, CPU and peaks leave out the JIT's warm-up (0: measure from the service's first request);
                     the hour end merges the warm-up's executions too, and the measured load pays their running
                     merges, so for open loop and freshness rather than a closed loop's CPU
  --count N          stop after N executions were sent (instead of the duration)
  --concurrency N    HTTP connections sending at once (8)
  --batch N          executions per request (500)
  --rate N           open loop: offer N executions/s (default: closed loop, as fast as it goes)
  --gzip             send gzip-compressed bodies
  --url URL          target a running service (signs up two accounts there) instead of starting one
  --env K=V          configuration for the started service (repeatable), e.g. --env BATCH_MAX_ROWS=50000
  --sweep K=v1,v2    one run per value of a knob: ${Object.entries(KNOBS)
    .map(([k, v]) => `${k} (${v})`)
    .join(', ')}, or any variable
  --no-logs          executions without logs (by default each has 0–5)
  --metrics N        metric points per request (20)
  --index-context    index the bodies' context keys (customer.id, customer.tier, region, version, flags.beta) in
                     the workspace's settings, as a team filtering by them would: typed columns and their rollups
  --profile DIR      run the service with --cpu-prof, profiles (one per thread) into DIR, and split its CPU by
                     stage (bench/support/profile-breakdown.ts)
  --compare FILE     with --profile: chart the breakdown beside the one in an earlier result's JSON
  --no-baselines     skip the raw JetStream publish and JSON.parse ceilings
  --no-hour-end      skip ending the run's hours afterwards (by default two compactor passes over the stopped
                     service's data are timed: the running hour's merges the run stopped before they were due, then
                     the end of every hour: support/hour-end.ts)
  --keep             keep the temporary data directory
`;

interface Options {
  duration: number;
  warmup: number;
  count: number | undefined;
  concurrency: number;
  batch: number;
  rate: number | undefined;
  gzip: boolean;
  url: string | undefined;
  env: Record<string, string>;
  sweep: { variable: string; values: string[] } | undefined;
  profile: string | undefined;
  noLogs: boolean;
  metrics: number;
  indexContext: boolean;
  compare: string | undefined;
  baselines: boolean;
  hourEnd: boolean;
  keep: boolean;
}

/**
 * Bodies prebuilt per run: enough that their failures hold the 2,000 distinct fingerprints of the issue
 * benchmark (about 10 each outside bursts; see traffic.ts), at 175 KiB to 350 KiB a body.
 */
const TEMPLATES = 216;

/** The warm-up's first request number (stampBody writes it into the execution ids, 9 digits). */
const WARMUP_REQUEST_BASE = 900_000_000;

const fmt = (n: number | null | undefined, digits = 0) =>
  n === null || n === undefined || Number.isNaN(n)
    ? '–'
    : n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      duration: { type: 'string', default: '30' },
      warmup: { type: 'string', default: '0' },
      count: { type: 'string' },
      concurrency: { type: 'string', default: '8' },
      batch: { type: 'string', default: '500' },
      rate: { type: 'string' },
      gzip: { type: 'boolean', default: false },
      url: { type: 'string' },
      env: { type: 'string', multiple: true, default: [] },
      sweep: { type: 'string' },
      profile: { type: 'string' },
      'no-logs': { type: 'boolean', default: false },
      metrics: { type: 'string', default: '20' },
      'index-context': { type: 'boolean', default: false },
      compare: { type: 'string' },
      'no-baselines': { type: 'boolean', default: false },
      'no-hour-end': { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  const env = envOptions(values.env);
  let sweep: Options['sweep'];
  if (values.sweep) {
    const at = values.sweep.indexOf('=');
    if (at < 1) throw new Error(`--sweep takes KNOB=v1,v2,…, not ${values.sweep}`);
    const knob = values.sweep.slice(0, at);
    sweep = {
      variable: KNOBS[knob] ?? knob,
      values: values.sweep
        .slice(at + 1)
        .split(',')
        .filter(Boolean),
    };
  }
  const num = (name: string, v: string | undefined) => {
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} must be a positive number`);
    return n;
  };
  return {
    duration: num('duration', values.duration)!,
    warmup: wholeNumber('warmup', values.warmup, 0, 3600),
    count: num('count', values.count),
    concurrency: num('concurrency', values.concurrency)!,
    batch: num('batch', values.batch)!,
    rate: num('rate', values.rate),
    gzip: values.gzip,
    url: values.url,
    env,
    sweep,
    profile: values.profile,
    noLogs: values['no-logs'],
    compare: values.compare,
    metrics: wholeNumber('metrics', values.metrics, 0, 100_000),
    indexContext: values['index-context'],
    baselines: !values['no-baselines'],
    hourEnd: !values['no-hour-end'],
    keep: values.keep,
  };
}

interface Baselines {
  rawJetStreamPublishExecPerSec: number;
  /** The baseline nats-server's CPU per execution published: what storing the bodies alone costs it. */
  rawPublishNatsMicrosPerExecution: number | null;
  /**
   * The same bodies through a work queue as the service's (duplicate window, published with ids), consumed by a
   * pull consumer that acks each: executions/s until all were acked, and the nats-server's CPU per execution, the
   * broker's own cost of the service's pattern.
   */
  rawWorkQueueExecPerSec: number;
  rawWorkQueueNatsMicrosPerExecution: number | null;
  jsonParseExecPerSecPerThread: number;
}

/**
 * Raw JetStream publish of the same bodies, from Node, to a nats-server of its own (stopped afterwards); with
 * `workQueue`, into a work-queue stream consumed and acked as the pipeline does, until every message is acked;
 * with `requestsPerSec`, at that rate (open loop) instead of as fast as the connections go.
 */
async function rawPublishBaseline(
  dir: string,
  templates: BodyTemplate[],
  o: Options,
  workQueue = false,
  requestsPerSec?: number,
): Promise<{ execPerSec: number; natsMicrosPerExecution: number | null }> {
  // A store of its own each time: a durable stream left by an earlier call would hold its leftovers.
  const store = path.join(
    dir,
    `${workQueue ? 'baseline-wq-nats' : 'baseline-nats'}-${requestsPerSec ? 'rate' : 'max'}`,
  );
  await fs.rm(store, { recursive: true, force: true });
  const nats = await startNatsServer({
    dir: store,
    // The broker as the started service runs its own (the same Go memory limit), so their CPU compares.
    memoryLimitMb: loadConfig(o.env).NATS_MEMORY_LIMIT_MB,
  });
  const pid = nats.pid();
  const cpu = async () =>
    pid === null ? null : ((await procStats(pid).catch(() => null))?.cpuSeconds ?? null);
  try {
    const nc = await connect({ servers: nats.url });
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({
      name: 'BENCH_RAW',
      subjects: ['bench.raw'],
      max_msg_size: 8 * 1024 * 1024,
      ...(workQueue
        ? {
            retention: RetentionPolicy.Workqueue,
            discard: DiscardPolicy.New,
            duplicate_window: nanos(IDEMPOTENCY_WINDOW_MS),
          }
        : {}),
    });
    const js = jetstream(nc);
    let acked = 0;
    if (workQueue) {
      await jsm.consumers.add('BENCH_RAW', {
        durable_name: 'raw',
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        max_ack_pending: 1000,
      });
      const messages = await (await js.consumers.get('BENCH_RAW', 'raw')).consume({ max_messages: 256 });
      void (async () => {
        for await (const m of messages) {
          m.ack();
          acked++;
        }
      })();
    }
    const started = performance.now();
    const cpu0 = await cpu();
    const r = await drive({
      concurrency: o.concurrency,
      seconds: Math.min(10, o.duration),
      requestsPerSec,
      send: async (n) => {
        const t = templates[n % templates.length]!;
        await js.publish('bench.raw', stampBody(t, n), { msgID: `raw-${n}` });
        return true;
      },
    });
    const deadline = Date.now() + 120_000;
    while (workQueue && acked < r.accepted) {
      if (Date.now() > deadline)
        throw new Error(`the work queue acked ${acked} of ${r.accepted} messages in 2 minutes`);
      await new Promise((res) => setTimeout(res, 20));
    }
    const seconds = workQueue ? (performance.now() - started) / 1000 : r.seconds;
    const cpu1 = await cpu();
    await nc.close();
    const executions = r.accepted * o.batch;
    return {
      execPerSec: executions / seconds,
      natsMicrosPerExecution: cpu0 !== null && cpu1 !== null ? ((cpu1 - cpu0) * 1e6) / executions : null,
    };
  } finally {
    await nats.stop();
  }
}

/** JSON.parse of the same bodies (gunzipped first when they are compressed, as the service must). */
function jsonParseBaseline(templates: BodyTemplate[], o: Options): number {
  const decoded = templates.map(decodedBytes);
  const start = performance.now();
  let n = 0;
  while (performance.now() - start < 2000) {
    JSON.parse(decoded[n % decoded.length]!.toString('utf8'));
    n++;
  }
  return (n * o.batch) / ((performance.now() - start) / 1000);
}

export interface RunResult {
  setting: Record<string, string>;
  requests: { accepted: number; refused: number; perSec: number };
  /** Executions accepted in the measured load, and stored; `warmup`: those of the warm-up before it (--warmup). */
  executions: { accepted: number; visible: number; warmup: number };
  acceptedExecPerSec: number;
  /** All accepted executions over the time from the first request until all of them were visible. */
  storedExecPerSec: number;
  loadSeconds: number;
  lastAcceptToVisibleMs: number;
  visibleLatency: ReturnType<Prober['summary']>;
  /**
   * The baselines' work queue again after the run, at the run's stored rate: a broker at ~100 messages a second
   * spends more per message than one taking them as fast as they come (the bare work queue of plain bodies: 5.0–5.2
   * against 2.6 µs of nats-server CPU per execution), so this is what the service's pattern costs the broker at its
   * pace: a lower bound of the service's nats-server (which also serves its KV buckets and the probe).
   */
  workQueueAtStoredRate?: { execPerSec: number; natsMicrosPerExecution: number | null };
  /** The pipeline's batch flushes during the measured load and its drain (flushSummary). */
  flushes: ReturnType<typeof flushSummary>;
  /** The compactor's passes during the measured load and its drain (compactionSummary). */
  compaction: ReturnType<typeof compactionSummary>;
  /** Marked executions never listed but found by id. */
  unseenButStored: string[];
  service: {
    cpuSeconds: number | null;
    /** CPU microseconds per stored execution (service and its nats-server). */
    cpuMicrosPerExecution: number | null;
    peakRssMiB: number | null;
    natsPeakRssMiB: number | null;
    /** The service and its nats-server at once: the largest sum of their RSS in one sample (each second). */
    peakRssTogetherMiB: number | null;
    /** Of cpuSeconds, the nats-server's. */
    natsCpuSeconds: number | null;
    /** The service's process id (its CPU profiles are named by it). */
    pid: number | null;
    /** CPU seconds by thread group (thread-cpu.ts) over the run, `nats-server` beside them. */
    cpuByThread: Record<string, number> | null;
  };
  /** The running hour's merges the run stopped before (unless --no-hour-end or --url). */
  runningMerges?: PassCost;
  /** The run's hours ended afterwards (unless --no-hour-end or --url). */
  hourEnd?: HourEndCost;
  /** With --profile: µs per execution by thread group and stage (profile-breakdown.ts). */
  stages?: { group: string; stage: string; microsPerExecution: number }[];
  benchCpuSeconds: number;
  timeline: Sample[];
  latencyTimeline: [number, number][];
  chart: string | null;
  problems: string[];
}

/** One measured run, then (for a service started here) the cost of its hours' end. */
async function runOnce(
  o: Options,
  templates: BodyTemplate[],
  run: string,
  setting: Record<string, string>,
  dir: string,
): Promise<RunResult> {
  const dataDir = path.join(dir, `data-${run}`);
  try {
    const r = await runLoad(o, templates, run, setting, dataDir);
    if (o.hourEnd && !o.url) {
      const compactor = compactionOptions(loadConfig({ ...o.env, ...setting }));
      r.runningMerges = await runningMergesCost(dataDir, compactor);
      r.hourEnd = await hourEndCost(dataDir, compactor);
    }
    return r;
  } finally {
    if (!o.keep) await fs.rm(dataDir, { recursive: true, force: true });
    else process.stdout.write(`data kept in ${dataDir}\n`);
  }
}

/** The load against one service (started here with `env` on `dataDir`, or the one at --url). */
async function runLoad(
  o: Options,
  templates: BodyTemplate[],
  run: string,
  setting: Record<string, string>,
  dataDir: string,
): Promise<RunResult> {
  let svc: ServiceProcess | null = null;
  let url = o.url;
  try {
    if (!url) {
      const port = await freePort();
      svc = ServiceProcess.spawn({
        mainJs: serviceEntry(import.meta.url),
        dataDir,
        port,
        env: { ...o.env, ...setting },
        nodeArgs: o.profile ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(o.profile)}`] : [],
      });
      await svc.waitReady();
      url = svc.url;
    }
    const key = await signupKey(
      url,
      `ingest-${run}`,
      o.indexContext ? { indexedContextKeys: [...CONTEXT_KEYS] } : undefined,
    );
    const probeKey = await signupKey(url, `probe-${run}`);
    const natsPid = svc ? await natsServerPid(dataDir) : null;
    const pids = () => (svc ? [svc.pid, ...(natsPid ? [natsPid] : [])] : []);

    const pool = new Pool(url, { connections: o.concurrency, pipelining: 1 });
    const headers = {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      ...(o.gzip ? { 'content-encoding': 'gzip' } : {}),
    };
    const serviceUrl = url;
    /** Sends request `n` (its executions' ids carry the number) under the idempotency key `${run}-${idem}`. */
    const send = (n: number, idem = String(n)) =>
      postIngest(pool, headers, stampBody(templates[n % templates.length]!, n), `${run}-${idem}`);
    /** Waits (up to 5 minutes) until the pipeline has nothing left and the list counts `expected`; its count. */
    const drained = async (expected: number): Promise<number> => {
      // The pipeline's lag (consumer info behind /metrics) is cheap to ask every 50 ms; the list's total is a query
      // over every file written, so it is asked only once the lag is gone (or when /metrics does not answer).
      // Polling the total itself every 50 ms took a good part of a core away from the drain it was timing.
      let listed = 0;
      const deadline = Date.now() + 300_000;
      while (Date.now() < deadline) {
        const behind = await pipelineLag(serviceUrl);
        if (behind === null || behind === 0) {
          listed = await listedTotal(serviceUrl, key);
          if (listed >= expected) break;
        }
        await new Promise((r) => setTimeout(r, behind === null ? 250 : 50));
      }
      return listed;
    };
    // The warm-up: the same load, stored before the measured one starts (V8's optimizing compilers were 10.8 % of
    // the service's CPU samples 8–20 s into a run, 1.4 % at 38–50 s). Its executions are left out of the counts, and
    // its CPU and peaks out of the figures; the hour's end merges them too, and the measured load pays the running
    // merges of its rows.
    let warmed = 0;
    if (o.warmup > 0) {
      const warm = await drive({
        concurrency: o.concurrency,
        seconds: o.warmup,
        requestsPerSec: o.rate ? o.rate / o.batch : undefined,
        // Request numbers the measured load never reaches: no execution id is sent twice.
        send: (n) => send(WARMUP_REQUEST_BASE + n, `w${n}`),
      });
      warmed = await drained(warm.accepted * o.batch);
      if (warmed < warm.accepted * o.batch)
        throw new Error(
          `the warm-up's ${fmt(warm.accepted * o.batch)} executions were not all stored in 5 minutes`,
        );
      // The peaks (VmHWM) from here on: the warm-up's are not the measured load's.
      for (const p of pids()) await fs.writeFile(`/proc/${p}/clear_refs`, '5').catch(() => {});
      process.stdout.write(
        `warm-up: ${fmt(warmed)} executions in ${fmt(o.warmup)} s, stored; measuring from here\n`,
      );
    }
    let acceptedRequests = 0;
    const loadStart = performance.now();
    const cpuBench0 = process.cpuUsage();
    const prober = new Prober(url, probeKey, run);
    let lastLine = 0;
    const sampler = new Sampler(
      url,
      key,
      pids,
      () => acceptedRequests * o.batch,
      loadStart,
      (s) => {
        const prev = sampler.samples[sampler.samples.length - 2];
        const dt = prev ? s.t - prev.t : s.t;
        const line =
          `  ${fmt(s.t)} s │ accepted ${fmt(((s.accepted - (prev?.accepted ?? 0)) / dt) | 0)}/s` +
          ` │ stored ${fmt(((s.visible - (prev?.visible ?? 0)) / dt) | 0)}/s │ behind ${fmt(s.accepted - s.visible)} exec` +
          ` (${fmt(s.lagMessages)} msgs) │ 202→visible p50 ${fmt(prober.recentP50(5))} ms` +
          (s.cpuSeconds !== null && prev?.cpuSeconds != null
            ? ` │ CPU ${fmt((s.cpuSeconds - prev.cpuSeconds) / dt, 2)} cores │ RSS ${fmt(s.rssMiB)} MiB`
            : '');
        process.stdout.write(`\r${line.padEnd(lastLine)}`);
        lastLine = line.length;
      },
      () => prober.accepted,
    );
    sampler.visibleBase = warmed;
    await sampler.start();
    const threads0 = svc ? await threadSnapshot(svc.pid) : null;
    prober.start();
    const load = await drive({
      concurrency: o.concurrency,
      seconds: o.count ? Number.POSITIVE_INFINITY : o.duration,
      maxRequests: o.count ? Math.ceil(o.count / o.batch) : undefined,
      requestsPerSec: o.rate ? o.rate / o.batch : undefined,
      send: (n) => send(n),
      onAccepted: () => acceptedRequests++,
    });
    const expected = load.accepted * o.batch;
    // Every accepted execution must become visible; the sampler goes on recording the drain.
    const visible = Math.max(0, (await drained(warmed + expected)) - warmed);
    const visibleAt = performance.now();
    const threads1 = svc ? await threadSnapshot(svc.pid) : null;
    await prober.stop();
    await sampler.sample();
    sampler.stop();
    process.stdout.write('\n');
    await pool.close();
    const cpuBench = process.cpuUsage(cpuBench0);
    const last = sampler.samples.at(-1);
    const cpuSeconds = last?.cpuSeconds ?? null;
    const timeline = sampler.samples;
    const latencyTimeline = prober.timeline().map(([t, ms]): [number, number] => [t, ms]);
    const title = `ingest ${Object.entries(setting)
      .map(([k, v]) => `${k}=${v} `)
      .join(
        '',
      )}(${o.rate ? `open loop ${fmt(o.rate)} exec/s` : `closed loop, ${o.concurrency} connections`})`;
    const chart = stack([
      lineChart({
        title: `${title}: throughput`,
        xLabel: 'seconds since the load started',
        leftLabel: 'executions per second',
        series: [
          { name: 'accepted exec/s', points: perSecond(timeline, (s) => s.accepted) },
          { name: 'stored exec/s', points: perSecond(timeline, (s) => s.visible) },
        ],
      }),
      lineChart({
        title: `${title}: pipeline lag`,
        xLabel: 'seconds since the load started',
        leftLabel: 'executions accepted, not yet visible',
        rightLabel: '202 → visible, ms',
        series: [
          { name: 'executions behind', points: timeline.map((s) => [s.t, s.accepted - s.visible]) },
          { name: '202 → visible (marked)', points: latencyTimeline, right: true },
        ],
      }),
    ]);
    const natsPeak = natsPid ? (sampler.peakRssByPid.get(natsPid) ?? null) : null;
    return {
      setting,
      requests: { accepted: load.accepted, refused: load.refused, perSec: load.accepted / load.seconds },
      executions: { accepted: expected, visible, warmup: warmed },
      acceptedExecPerSec: expected / load.seconds,
      storedExecPerSec: visible / ((visibleAt - loadStart) / 1000),
      loadSeconds: load.seconds,
      lastAcceptToVisibleMs: visibleAt - load.lastAcceptAt,
      visibleLatency: prober.summary(),
      flushes: flushSummary(sampler.flushes0, timeline),
      compaction: compactionSummary(sampler.flushes0, timeline),
      unseenButStored: prober.unseenButStored,
      service: {
        cpuSeconds,
        cpuMicrosPerExecution: cpuSeconds !== null && visible > 0 ? (cpuSeconds * 1e6) / visible : null,
        peakRssMiB: svc ? (sampler.peakRssByPid.get(svc.pid) ?? null) : null,
        natsPeakRssMiB: natsPeak,
        peakRssTogetherMiB: svc ? sampler.peakRssTogetherMiB : null,
        natsCpuSeconds: natsPid ? (sampler.cpuByPid.get(natsPid) ?? null) : null,
        pid: svc?.pid ?? null,
        cpuByThread:
          threads0 && threads1
            ? Object.fromEntries([
                ...cpuByGroup(threads0, threads1),
                ...(natsPid ? [['nats-server', sampler.cpuByPid.get(natsPid) ?? 0] as const] : []),
              ])
            : null,
      },
      benchCpuSeconds: (cpuBench.user + cpuBench.system) / 1e6,
      timeline,
      latencyTimeline,
      chart,
      problems: svc?.problems.slice(0, 20) ?? [],
    };
  } finally {
    await cleanupService(svc, dataDir);
  }
}

/** Per-second rates from cumulative samples. */
function perSecond(samples: Sample[], pick: (s: Sample) => number): [number, number][] {
  const out: [number, number][] = [];
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1]!;
    const b = samples[i]!;
    if (b.t > a.t) out.push([b.t, (pick(b) - pick(a)) / (b.t - a.t)]);
  }
  return out;
}

function table(rows: [string, string][]): string {
  const w = Math.max(...rows.map((r) => r[0].length));
  return rows.map(([k, v]) => `${k.padEnd(w)}  ${v}`).join('\n');
}

function runTable(r: RunResult, o: Options, baselines: Baselines | null): string {
  const raw = baselines?.rawJetStreamPublishExecPerSec;
  const parse = baselines?.jsonParseExecPerSecPerThread;
  return table([
    [
      'load',
      o.rate ? `open loop, ${fmt(o.rate)} exec/s offered` : `closed loop, ${o.concurrency} connections`,
    ],
    ['requests accepted / refused', `${fmt(r.requests.accepted)} / ${fmt(r.requests.refused)}`],
    ['requests/s accepted', fmt(r.requests.perSec)],
    ['executions accepted / visible', `${fmt(r.executions.accepted)} / ${fmt(r.executions.visible)}`],
    ...(r.executions.warmup > 0
      ? [
          [
            'before them, the warm-up',
            `${fmt(r.executions.warmup)} executions, stored, not counted above`,
          ] as [string, string],
        ]
      : []),
    ['accepted exec/s', fmt(r.acceptedExecPerSec)],
    ['stored exec/s (first request → all visible)', fmt(r.storedExecPerSec)],
    ['last 202 → all visible', `${fmt(r.lastAcceptToVisibleMs)} ms`],
    [
      '202 → visible, marked executions',
      `p50 ${fmt(r.visibleLatency.p50Ms)} ms, p99 ${fmt(r.visibleLatency.p99Ms)} ms, max ${fmt(r.visibleLatency.maxMs)} ms (${r.visibleLatency.samples} samples${r.visibleLatency.unseen ? `, ${r.visibleLatency.unseen} NEVER SEEN` : ''})`,
    ],
    [
      'batch flushes: count, mean, worst second',
      r.flushes
        ? `${fmt(r.flushes.flushes)}, ${fmt(r.flushes.meanMs)} ms, ${fmt(r.flushes.worstSecondMeanMs)} ms`
        : '–',
    ],
    [
      'compactor passes during the run, time, memory fallbacks',
      r.compaction
        ? `${fmt(r.compaction.passes)}, ${fmt(r.compaction.seconds, 1)} s, ${fmt(r.compaction.memoryFallbacks)}`
        : '–',
    ],
    ['raw JetStream publish exec/s (ceiling)', fmt(raw)],
    ['stored / raw publish', raw ? fmt(r.storedExecPerSec / raw, 2) : '–'],
    [
      'raw work queue exec/s, published, consumed, acked',
      baselines
        ? `${fmt(baselines.rawWorkQueueExecPerSec)} (its nats-server ${fmt(baselines.rawWorkQueueNatsMicrosPerExecution, 1)} µs CPU per execution)`
        : '–',
    ],
    [
      'the same work queue at the stored rate',
      r.workQueueAtStoredRate
        ? `its nats-server ${fmt(r.workQueueAtStoredRate.natsMicrosPerExecution, 1)} µs CPU per execution (at ${fmt(r.workQueueAtStoredRate.execPerSec)} exec/s)`
        : '–',
    ],
    ['JSON.parse exec/s per thread (ceiling)', fmt(parse)],
    ['stored / JSON.parse one thread', parse ? fmt(r.storedExecPerSec / parse, 2) : '–'],
    [
      'service CPU per execution ÷ JSON.parse per execution',
      parse && r.service.cpuMicrosPerExecution !== null
        ? fmt((r.service.cpuMicrosPerExecution * parse) / 1e6, 1)
        : '–',
    ],
    [
      'service CPU seconds (node + nats-server)',
      `${fmt(r.service.cpuSeconds, 1)} (nats-server ${fmt(r.service.natsCpuSeconds, 1)})`,
    ],
    ['service CPU µs per execution', fmt(r.service.cpuMicrosPerExecution, 1)],
    ...hourEndRows(r),
    [
      'service peak RSS',
      r.service.peakRssMiB === null
        ? '–'
        : `${fmt(r.service.peakRssMiB)} MiB (nats-server ${fmt(r.service.natsPeakRssMiB)} MiB)`,
    ],
    [
      'peak RSS, service + nats-server at once',
      r.service.peakRssTogetherMiB == null ? '–' : `${fmt(r.service.peakRssTogetherMiB)} MiB`,
    ],
    ['benchmark client CPU seconds', fmt(r.benchCpuSeconds, 1)],
  ]);
}

/**
 * The running hour's merges the run did not reach and the hours' end (support/hour-end.ts): their CPU per execution
 * by dataset, the whole an execution costs, and the disk after.
 */
function hourEndRows(r: RunResult): [string, string][] {
  const h = r.hourEnd;
  const m = r.runningMerges;
  // The hours' end merges every execution stored, the warm-up's too.
  const n = r.executions.visible + r.executions.warmup;
  if (!h || !m || n === 0) return [];
  const per = (seconds: number) => fmt((seconds * 1e6) / n, 1);
  const cost = (c: PassCost) => {
    const byDataset = Object.entries(c.cpuSecondsByDataset)
      .filter(([, s]) => (s * 1e6) / n >= 0.05)
      .map(([d, s]) => `${d} ${per(s)}`)
      .join(', ');
    return `${per(c.cpuSeconds)} (${byDataset}; ${fmt(c.seconds, 1)} s)`;
  };
  const bytes = (d: DiskParts) => totalBytes(d) / n;
  const e = h.disk.executions;
  const ingest = r.service.cpuMicrosPerExecution;
  return [
    ['running-hour merges left, CPU µs per execution', cost(m)],
    ['hour-end compaction CPU µs per execution', cost(h)],
    [
      // With a warm-up, the service's merges during it count nowhere, and those during the load count per
      // measured execution though they merge the warm-up's too.
      `CPU µs per execution, ingest + running merges + hour end${r.executions.warmup > 0 ? ' (warm-up: rough)' : ''}`,
      ingest === null ? '–' : fmt(ingest + ((m.cpuSeconds + h.cpuSeconds) * 1e6) / n, 1),
    ],
    [
      'bytes on disk per execution after the hour end',
      `executions ${fmt(bytes(e), 1)} (hour files ${fmt(e.hourFiles / n, 1)}, by-id copies ${fmt(e.byIdCopies / n, 1)}, id filters ${fmt(e.idFilters / n, 1)}, ` +
        `rollups ${fmt((e.rollups + e.minutes) / n, 1)}, manifests ${fmt(e.other / n, 1)}); logs ${fmt(bytes(h.disk.logs), 1)}`,
    ],
  ];
}

/** CPU µs per stored execution by thread group, and by stage when profiled. */
function breakdownTable(r: RunResult): string {
  const n = r.executions.visible;
  const rows: [string, string][] = [['CPU µs per execution, by thread', '']];
  for (const [group, s] of Object.entries(r.service.cpuByThread!).sort((a, b) => b[1] - a[1]))
    rows.push([`  ${group}`, fmt((s * 1e6) / n, 2)]);
  if (r.stages) {
    rows.push(['by thread and stage (shares of each thread from its CPU profile)', '']);
    for (const s of r.stages)
      if (s.microsPerExecution >= 0.05) rows.push([`  ${s.group}: ${s.stage}`, fmt(s.microsPerExecution, 2)]);
  }
  return table(rows);
}

/** The stage breakdown as bars, beside an earlier result's (`--compare`) when given. */
async function breakdownChart(r: RunResult, compare: string | undefined): Promise<string> {
  const key = (s: { group: string; stage: string }) => `${s.group}: ${s.stage}`;
  const now = new Map(r.stages!.map((s) => [key(s), s.microsPerExecution]));
  let before: Map<string, number> | null = null;
  let beforeName = '';
  if (compare) {
    const earlier = JSON.parse(await fs.readFile(compare, 'utf8')) as Partial<RunResult> & { at?: string };
    if (!earlier.stages) throw new Error(`${compare} has no stage breakdown (run with --profile)`);
    before = new Map(earlier.stages.map((s) => [key(s), s.microsPerExecution]));
    beforeName = `before (${earlier.service?.cpuMicrosPerExecution?.toFixed(1) ?? '?'} µs/exec)`;
  }
  const names = [...new Set([...(before?.keys() ?? []), ...now.keys()])].filter(
    (n) => Math.max(now.get(n) ?? 0, before?.get(n) ?? 0) >= 0.1,
  );
  names.sort(
    (a, b) => Math.max(now.get(b) ?? 0, before?.get(b) ?? 0) - Math.max(now.get(a) ?? 0, before?.get(a) ?? 0),
  );
  const nowName = `${before ? 'after' : 'this run'} (${r.service.cpuMicrosPerExecution?.toFixed(1)} µs/exec)`;
  return rowChart({
    title: 'Service CPU per stored execution, by thread and stage',
    valueLabel: 'µs of CPU per execution',
    series: before ? [beforeName, nowName] : [nowName],
    rows: names.map((n) => ({
      name: n,
      values: before ? [before.get(n) ?? 0, now.get(n) ?? 0] : [now.get(n) ?? 0],
    })),
  });
}

async function writeResult(name: string, json: unknown, svg: string | null): Promise<string> {
  await fs.mkdir(resultsDir, { recursive: true });
  const base = path.join(resultsDir, `${name}-${new Date().toISOString().replace(/[:.]/g, '-')}`);
  await fs.writeFile(`${base}.json`, `${JSON.stringify(json, null, 2)}\n`);
  if (svg) await fs.writeFile(`${base}.svg`, svg);
  return path.relative(process.cwd(), base);
}

export async function main(argv: string[] = process.argv.slice(2)): Promise<void> {
  const o = parseOptions(argv);
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'svc-bench-ingest-'));
  try {
    const run = `b${Date.now().toString(36)}`;
    const templates: BodyTemplate[] = [];
    for (let i = 0; i < TEMPLATES; i++) {
      const firstFingerprint = templates.at(-1)?.nextFingerprint ?? 0;
      templates.push(
        buildTemplate(1000 + i, run, o.batch, {
          gzip: o.gzip,
          firstFingerprint,
          noLogs: o.noLogs,
          metrics: o.metrics,
        }),
      );
    }
    const t0 = templates[0]!;
    process.stdout.write(
      `bodies: ${o.batch} executions, ${fmt(t0.logs)} logs, ${t0.metrics} metric points, ` +
        `${fmt(t0.bytes.length / 1024)} KiB${o.gzip ? ` gzip (${fmt(decodedBytes(t0).length / 1024)} KiB decoded)` : ''}; ` +
        `${o.rate ? `open loop at ${fmt(o.rate)} exec/s` : `closed loop, ${o.concurrency} connections`}; ` +
        `${o.count ? `${fmt(o.count)} executions` : `${o.duration} s`}; ${o.url ? `target ${o.url}` : 'service started here'}\n`,
    );
    let baselines: Baselines | null = null;
    if (o.baselines) {
      const raw = await rawPublishBaseline(dir, templates, o);
      const wq = await rawPublishBaseline(dir, templates, o, true);
      baselines = {
        rawWorkQueueExecPerSec: wq.execPerSec,
        rawWorkQueueNatsMicrosPerExecution: wq.natsMicrosPerExecution,
        jsonParseExecPerSecPerThread: jsonParseBaseline(templates, o),
        rawJetStreamPublishExecPerSec: raw.execPerSec,
        rawPublishNatsMicrosPerExecution: raw.natsMicrosPerExecution,
      };
      process.stdout.write(
        `ceilings: raw JetStream publish ${fmt(baselines.rawJetStreamPublishExecPerSec)} exec/s ` +
          `(nats-server ${fmt(raw.natsMicrosPerExecution, 1)} µs CPU per execution), work queue published, ` +
          `consumed and acked ${fmt(wq.execPerSec)} exec/s (nats-server ${fmt(wq.natsMicrosPerExecution, 1)} µs), ` +
          `JSON.parse ${fmt(baselines.jsonParseExecPerSecPerThread)} exec/s per thread\n`,
      );
    }
    const settings = o.sweep
      ? o.sweep.values.map((v) => ({ [o.sweep!.variable]: v }))
      : [{} as Record<string, string>];
    const results: RunResult[] = [];
    for (const [i, setting] of settings.entries()) {
      if (o.sweep) process.stdout.write(`\n── ${o.sweep.variable}=${setting[o.sweep.variable]} ──\n`);
      const r = await runOnce(o, templates, `${run}${i}`, setting, dir);
      // After the run (the service has stopped), the same work queue at the pace the service stored; not below 2
      // messages a second (a few messages would share the idle broker's CPU). A failure here loses the figure, not
      // the run's.
      const perSec = r.storedExecPerSec / o.batch;
      if (o.baselines && !o.url && perSec >= 2) {
        try {
          r.workQueueAtStoredRate = await rawPublishBaseline(dir, templates, o, true, perSec);
        } catch (err) {
          process.stdout.write(`the work queue at the stored rate failed: ${String(err)}\n`);
        }
      }
      results.push(r);
      process.stdout.write(`\n${runTable(r, o, baselines)}\n`);
      if (r.service.cpuByThread) {
        // The service has stopped: its profiles (one per thread) are written.
        if (o.profile && r.service.pid !== null)
          r.stages = stageTable(
            new Map(Object.entries(r.service.cpuByThread)),
            await profilesOf(path.resolve(o.profile), r.service.pid),
            r.executions.visible,
          );
        process.stdout.write(`\n${breakdownTable(r)}\n`);
      }
      if (r.executions.visible !== r.executions.accepted) {
        process.stdout.write(`FAIL: ${r.executions.accepted} accepted but ${r.executions.visible} visible\n`);
        process.exitCode = 1;
      }
      if (r.visibleLatency.unseen > 0) {
        process.stdout.write(
          `FAIL: ${r.visibleLatency.unseen} marked executions never became visible` +
            ` (${r.unseenButStored.length} of them found by id: ${r.unseenButStored.join(', ')})\n`,
        );
        process.exitCode = 1;
      }
    }
    const { chart: _c, ...first } = results[0]!;
    const json = {
      at: new Date().toISOString(),
      options: o,
      bodyKiB: t0.bytes.length / 1024,
      machine: { cpus: os.availableParallelism(), node: process.version },
      baselines,
      ...(o.sweep
        ? { sweep: o.sweep, runs: results.map(({ chart: _, ...r }) => r) }
        : {
            ...first,
            ratios: baselines && {
              storedToRawPublish: first.storedExecPerSec / baselines.rawJetStreamPublishExecPerSec,
              storedToJsonParseThread: first.storedExecPerSec / baselines.jsonParseExecPerSecPerThread,
            },
          }),
    };
    let svg = results[0]!.chart;
    if (o.sweep) {
      const { best, text } = sweepSummary(o, results);
      process.stdout.write(`\n${text}\n`);
      Object.assign(json, { best });
      svg = barChart({
        title: `sweep of ${o.sweep.variable}: ${o.rate ? '202 → visible p99 (lower is better)' : 'stored executions/s (higher is better)'}`,
        valueLabel: o.rate ? 'p99 ms' : 'stored exec/s',
        bars: results.map((r) => ({
          name: r.setting[o.sweep!.variable]!,
          value: (o.rate ? r.visibleLatency.p99Ms : r.storedExecPerSec) ?? 0,
        })),
        best,
      });
    }
    const base = await writeResult(o.sweep ? 'ingest-sweep' : 'ingest', json, svg);
    process.stdout.write(`\nresults: ${base}.json, chart: ${base}.svg\n`);
    if (results[0]!.stages) {
      await fs.writeFile(`${base}-breakdown.svg`, await breakdownChart(results[0]!, o.compare));
      process.stdout.write(`breakdown chart: ${base}-breakdown.svg\n`);
    }
  } finally {
    if (!o.keep) await fs.rm(dir, { recursive: true, force: true });
  }
}

/** Closed loop: the most executions stored per second; open loop: the lowest 202 → visible p99. */
function sweepSummary(o: Options, results: RunResult[]): { best: string; text: string } {
  const variable = o.sweep!.variable;
  const score = (r: RunResult) =>
    o.rate ? -(r.visibleLatency.p99Ms ?? Number.POSITIVE_INFINITY) : r.storedExecPerSec;
  const best = results.reduce((a, b) => (score(b) > score(a) ? b : a));
  const rows: [string, string][] = [
    [variable, 'stored exec/s │ accepted exec/s │ 202→visible p50 / p99 ms │ CPU µs/exec │ peak RSS MiB'],
    ...results.map((r): [string, string] => [
      `${r.setting[variable]}${r === best ? ' (best)' : ''}`,
      `${fmt(r.storedExecPerSec).padStart(13)} │ ${fmt(r.acceptedExecPerSec).padStart(15)} │ ` +
        `${`${fmt(r.visibleLatency.p50Ms)} / ${fmt(r.visibleLatency.p99Ms)}`.padStart(24)} │ ` +
        `${fmt(r.service.cpuMicrosPerExecution, 1).padStart(11)} │ ${fmt(r.service.peakRssMiB)}`,
    ]),
  ];
  return {
    best: best.setting[variable]!,
    text: `${table(rows)}\n\nbest ${variable}: ${best.setting[variable]} (${o.rate ? 'lowest 202 → visible p99' : 'most executions stored per second'})`,
  };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  main().catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
