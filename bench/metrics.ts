import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { nodeFlags } from '../main.js';
import type { QueryEngine, Row } from '../storage/duckdb.js';
import { listPartitionFiles } from '../storage/layout.js';
import { MINUTES_SUFFIX } from '../storage/minutes.js';
import { endpointTemplateSql } from '../storage/rollup.js';
import { RELATIVE_ERROR } from '../storage/sketch.js';
import { prepareDataset } from './support/dataset.js';
import { timeGets } from './support/http-timer.js';
import { serviceEntry } from './support/service-process.js';
import { type BenchService, startBenchService } from './support/service-session.js';
import { quantile } from './support/stats.js';

/**
 * The metrics (CONTRACT §8) over a realistic dataset (default 10M executions over 24 h, the query benchmark's
 * shape), through HTTP with a session, each beside the same question answered exactly by DuckDB over the raw
 * executions files in the same run. Before anything is timed, the answers are checked against the raw ones:
 * counts equal, percentiles within the sketch's bound. The service runs as its own process, as `npm start` runs it
 * (with its V8 flags); the requests are timed from a worker thread, from sending to the last byte of the answer.
 *
 *   npm run bench -- metrics [--executions N] [--hours H] [--data-dir DIR] [--runs N] [--raw-runs N]
 */

const USAGE = `usage: npm run bench -- metrics [options]
  --executions N   dataset size (10000000)
  --hours H        time span of the dataset, ending when it is generated (24)
  --data-dir DIR   keep the dataset there and reuse it (the query benchmark's, for the same parameters)
  --runs N         timed runs of each measured query, after 10 warm-ups (30)
  --raw-runs N     timed runs of each raw statement, after 1 warm-up (5)
  --only KEYS      some of: overview, ts-requests, ts-failure-rate, ts-p95, endpoints-p99
  --in-process     run the service in the benchmark's process (default: its own, as npm start runs it)`;

interface Options {
  executions: number;
  hours: number;
  dataDir: string | null;
  runs: number;
  rawRuns: number;
  only: string[] | null;
  inProcess: boolean;
}

function parseOptions(argv: string[]): Options | null {
  const { values } = parseArgs({
    args: argv,
    options: {
      executions: { type: 'string', default: '10000000' },
      hours: { type: 'string', default: '24' },
      'data-dir': { type: 'string' },
      runs: { type: 'string', default: '30' },
      'raw-runs': { type: 'string', default: '5' },
      'in-process': { type: 'boolean', default: false },
      only: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return null;
  }
  const int = (name: string, v: string) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer`);
    return n;
  };
  return {
    executions: int('executions', values.executions),
    hours: int('hours', values.hours),
    dataDir: values['data-dir'] ?? null,
    runs: int('runs', values.runs),
    rawRuns: int('raw-runs', values['raw-runs']),
    only: values.only ? values.only.split(',') : null,
    inProcess: values['in-process'],
  };
}

const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

interface Scenario {
  key: string;
  label: string;
  targetP95Ms: number;
  /** The HTTP request's path and query. */
  url: string;
  /** The exact statements over the raw files (run in turn, as one answer). */
  raw: string[];
  /** Checks the service's answer against the raw rows; throws on a difference. */
  check(answer: unknown, raw: Row[][]): void;
}

const fail = (what: string): never => {
  throw new Error(`metrics: ${what}`);
};

const withinBound = (got: number | null, exact: number, what: string) => {
  if (got === null || Math.abs(got - exact) > RELATIVE_ERROR * Math.abs(exact) + 1e-9)
    fail(`${what}: ${got} against the exact ${exact}`);
};

interface TimeseriesBody {
  series: { group: Record<string, string>; points: { t: string; value: number | null }[] }[];
}
interface OverviewBody {
  services: {
    service: string;
    requests: number;
    failed: number;
    latency: { p50: number | null; p95: number | null; p99: number | null };
    previous: { requests: number };
  }[];
}
interface EndpointsBody {
  data: { service: string; method: string | null; endpoint: string; requests: number; p99: number | null }[];
}

const RAW_FROM = 'read_parquet($files, union_by_name = true, hive_partitioning = false)';
const IN_RANGE = 'started_at >= epoch_ms($from::BIGINT) AND started_at < epoch_ms($to::BIGINT)';
const MINUTE_SQL = "(epoch_ms(date_trunc('minute', started_at)))::DOUBLE";

function scenarios(range: string): Scenario[] {
  const perMinute = (measure: string) =>
    `SELECT ${MINUTE_SQL} AS t, service, ${measure} FROM ${RAW_FROM} WHERE ${IN_RANGE} GROUP BY ALL`;
  /** Per (minute, service) of the raw rows, `value(row)`; the top series of the answer compared with it. */
  const checkSeries =
    (value: (r: Row) => number, exact: boolean) =>
    (answer: unknown, [rows]: Row[][]) => {
      const byKey = new Map(rows!.map((r) => [`${r.t} ${r.service}`, r]));
      let compared = 0;
      for (const s of (answer as TimeseriesBody).series) {
        const service = s.group.service!;
        if (service === '__other__') continue;
        for (const p of s.points) {
          const r = byKey.get(`${Date.parse(p.t)} ${service}`);
          if (!r) {
            if (p.value !== null && p.value !== 0)
              fail(`${service} ${p.t}: ${p.value} where the raw rows have none`);
            continue;
          }
          compared++;
          const v = value(r);
          if (exact) {
            if (p.value === null || Math.abs(p.value - v) > 1e-12 * Math.max(1, v))
              fail(`${service} ${p.t}: ${p.value} against the exact ${v}`);
          } else withinBound(p.value, v, `${service} ${p.t}`);
        }
      }
      if (compared === 0) fail('no point compared');
    };
  return [
    {
      key: 'overview',
      label: 'overview, all services',
      targetP95Ms: 30,
      url: `/api/metrics/overview?${range}`,
      // The period and the one before, as the route answers them.
      raw: [
        `SELECT service, count(*)::DOUBLE AS n, count(*) FILTER (WHERE outcome = 'failed')::DOUBLE AS failed,
           avg(duration_ms) AS avg, quantile_cont(duration_ms, [0.5, 0.95, 0.99]) AS q
         FROM ${RAW_FROM} WHERE ${IN_RANGE} GROUP BY service`,
        `SELECT service, count(*)::DOUBLE AS n FROM ${RAW_FROM}
         WHERE started_at >= epoch_ms((2 * $from - $to)::BIGINT) AND started_at < epoch_ms($from::BIGINT) GROUP BY service`,
      ],
      check: (answer, [rows]) => {
        const byService = new Map(rows!.map((r) => [r.service as string, r]));
        const services = (answer as OverviewBody).services;
        if (services.length !== byService.size)
          fail(`${services.length} services, ${byService.size} in the raw rows`);
        for (const s of services) {
          const r = byService.get(s.service) ?? fail(`${s.service} is not in the raw rows`);
          if (s.requests !== Number(r.n) || s.failed !== Number(r.failed))
            fail(`${s.service}: ${s.requests}/${s.failed} requests/failed, the raw rows ${r.n}/${r.failed}`);
          const [p50, p95, p99] = r.q as number[];
          withinBound(s.latency.p50, p50!, `${s.service} p50`);
          withinBound(s.latency.p95, p95!, `${s.service} p95`);
          withinBound(s.latency.p99, p99!, `${s.service} p99`);
        }
      },
    },
    {
      key: 'ts-requests',
      label: 'timeseries requests, 1m, groupBy=service',
      targetP95Ms: 30,
      url: `/api/metrics/timeseries?${range}&metric=requests&interval=1m&groupBy=service`,
      raw: [perMinute('count(*)::DOUBLE AS n')],
      check: checkSeries((r) => Number(r.n), true),
    },
    {
      key: 'ts-failure-rate',
      label: 'timeseries failure_rate, 1m, groupBy=service',
      targetP95Ms: 30,
      url: `/api/metrics/timeseries?${range}&metric=failure_rate&interval=1m&groupBy=service`,
      raw: [perMinute("count(*)::DOUBLE AS n, count(*) FILTER (WHERE outcome = 'failed')::DOUBLE AS failed")],
      check: checkSeries((r) => Number(r.failed) / Number(r.n), true),
    },
    {
      key: 'ts-p95',
      label: 'timeseries latency_p95, 1m, groupBy=service',
      targetP95Ms: 30,
      url: `/api/metrics/timeseries?${range}&metric=latency_p95&interval=1m&groupBy=service`,
      raw: [perMinute('quantile_cont(duration_ms, 0.95) AS p95')],
      check: checkSeries((r) => Number(r.p95), false),
    },
    {
      key: 'endpoints-p99',
      label: 'endpoints sorted by p99',
      targetP95Ms: 50,
      url: `/api/metrics/endpoints?${range}&sort=p99`,
      raw: [
        `SELECT service, method, ${endpointTemplateSql('endpoint')} AS endpoint, count(*)::DOUBLE AS n,
           quantile_cont(duration_ms, 0.99) AS p99
         FROM ${RAW_FROM} WHERE ${IN_RANGE} GROUP BY ALL`,
      ],
      check: (answer, [rows]) => {
        const byKey = new Map(rows!.map((r) => [`${r.service} ${r.method} ${r.endpoint}`, r]));
        const data = (answer as EndpointsBody).data;
        if (data.length !== Math.min(20, byKey.size)) fail(`${data.length} endpoints listed`);
        for (const e of data) {
          const r =
            byKey.get(`${e.service} ${e.method} ${e.endpoint}`) ?? fail(`${e.endpoint} not in the raw rows`);
          if (e.requests !== Number(r.n)) fail(`${e.endpoint}: ${e.requests} requests, the raw rows ${r.n}`);
          withinBound(e.p99, Number(r.p99), `${e.service} ${e.method} ${e.endpoint} p99`);
        }
        // The 20 slowest by the raw p99 are listed, up to ties within the sketch's bound.
        const slowest = [...byKey.values()].map((r) => Number(r.p99)).sort((a, b) => b - a);
        const cut = slowest[data.length - 1]!;
        for (const e of data)
          if (e.p99! < cut * (1 - 2 * RELATIVE_ERROR))
            fail(`${e.endpoint} (p99 ${e.p99}) is not among the slowest`);
      },
    },
  ];
}

/**
 * Warm-up calls before the timed ones: the first reads the rollups into memory (1–2 s), and the collector takes a
 * few more calls to settle after that much was allocated.
 */
const WARMUP = 10;

const timed = async (runs: number, warmup: number, fn: () => Promise<unknown>) => {
  for (let i = 0; i < warmup; i++) await fn();
  const ms: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    await fn();
    ms.push(performance.now() - t);
  }
  const s = ms.sort((a, b) => a - b);
  return { p50: quantile(s, 0.5)!, p95: quantile(s, 0.95)!, runs };
};

/** The per-minute rollups' bytes and rows, beside the executions'. */
async function rollupSizes(engine: QueryEngine, files: string[]) {
  let bytes = 0;
  const rollups: string[] = [];
  for (const dir of new Set(files.map((f) => path.dirname(f)))) {
    for (const name of await fs.readdir(dir)) {
      if (!name.endsWith(MINUTES_SUFFIX)) continue;
      rollups.push(path.join(dir, name));
      bytes += (await fs.stat(path.join(dir, name))).size;
    }
  }
  const rows =
    rollups.length === 0
      ? []
      : await engine.all(
          'SELECT kind, count(*)::DOUBLE AS n FROM read_parquet($files) GROUP BY kind ORDER BY kind',
          { files: rollups },
        );
  return { files: rollups.length, bytes, rows: rows.map((r) => Number(r.n)) };
}

export async function main(argv: string[] = process.argv.slice(2)): Promise<void> {
  const o = parseOptions(argv);
  if (!o) return;
  const tempDir = o.dataDir ? null : await fs.mkdtemp(path.join(os.tmpdir(), 'svc-bench-metrics-'));
  const dataDir = o.dataDir ?? path.join(tempDir!, 'data');
  let bench: BenchService | null = null;
  try {
    process.stdout.write(`dataset: ${fmt(o.executions)} executions over ${o.hours} h, in ${dataDir}\n`);
    const { marker, reused } = await prepareDataset(
      dataDir,
      { executions: o.executions, hours: o.hours, seed: 42 },
      {
        batchRows: 250_000,
        onProgress: (done, total) => process.stdout.write(`\r  generated ${fmt(done)} / ${fmt(total)}   `),
      },
    );
    if (!reused) process.stdout.write('\n');
    bench = await startBenchService(
      dataDir,
      marker,
      [],
      o.inProcess ? {} : { separateProcess: serviceEntry(import.meta.url) },
    );
    process.stdout.write(
      o.inProcess
        ? 'service: in this process\n'
        : `service: its own process, as npm start runs it (node ${nodeFlags().join(' ')} dist/main.js)\n`,
    );
    const b = bench;
    const files = await listPartitionFiles(
      dataDir,
      'executions',
      marker.workspaceId,
      marker.mode,
      0,
      Number.MAX_SAFE_INTEGER,
    );
    const sizes = await rollupSizes(b.rawEngine, files);
    let executionBytes = 0;
    for (const f of files) executionBytes += (await fs.stat(f)).size;
    process.stdout.write(
      `per-minute rollups: ${sizes.files} files, ${fmt(sizes.bytes / 2 ** 20, 1)} MiB = ${fmt(sizes.bytes / o.executions, 2)} bytes per execution ` +
        `(the executions' files: ${fmt(executionBytes / o.executions, 1)}); ${fmt(sizes.rows[0] ?? 0)} count rows, ` +
        `${fmt(sizes.rows[1] ?? 0)} sketch rows\n`,
    );
    const range = `from=${marker.fromMs}&to=${marker.toMs}`;
    const params = { files, from: marker.fromMs, to: marker.toMs };
    const wanted = scenarios(range).filter((s) => o.only === null || o.only.includes(s.key));
    const results: Record<string, unknown> = {};
    const lines: string[][] = [];
    for (const s of wanted) {
      process.stdout.write(`  ${s.label} …`);
      const rawAnswer = async () => {
        const out: Row[][] = [];
        for (const sql of s.raw) out.push(await b.rawEngine.all(sql, params));
        return out;
      };
      s.check(await b.get(s.url), await rawAnswer());
      const measured = await timeGets(`${b.url}${s.url}`, b.authHeaders, o.runs, WARMUP);
      const raw = await timed(o.rawRuns, 1, rawAnswer);
      results[s.key] = { label: s.label, url: s.url, targetP95Ms: s.targetP95Ms, measured, raw };
      process.stdout.write(` p50 ${fmt(measured.p50, 1)} ms\n`);
      lines.push([
        s.label,
        fmt(measured.p50, 1),
        fmt(measured.p95, 1),
        fmt(raw.p50, 1),
        fmt(raw.p95, 1),
        fmt(measured.p50 / raw.p50, 3),
        fmt(s.targetP95Ms),
        measured.p95 <= s.targetP95Ms ? 'ok' : 'MISSED',
      ]);
    }
    const header = [
      'query (24 h of data, through HTTP)',
      'p50 ms',
      'p95 ms',
      'raw p50',
      'raw p95',
      'ratio',
      'target',
      '',
    ];
    const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
    const row = (cells: string[]) =>
      cells
        .map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)))
        .join('  ')
        .trimEnd();
    process.stdout.write(
      `\n${[row(header), widths.map((w) => '-'.repeat(w)).join('  '), ...lines.map(row)].join('\n')}\n\n` +
        `answers checked against the raw statements first: counts equal, percentiles within ${fmt(100 * RELATIVE_ERROR, 2)} %.\n` +
        `raw = the same question answered exactly by DuckDB over the executions files (${o.rawRuns} runs); ratio = p50 / raw p50.\n`,
    );
    const out = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'bench', 'results');
    await fs.mkdir(out, { recursive: true });
    const file = path.join(out, `metrics-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    await fs.writeFile(
      file,
      `${JSON.stringify({ params: o, rollups: sizes, executionBytes, results }, null, 2)}\n`,
    );
    process.stdout.write(`results: ${path.relative(process.cwd(), file)}\n`);
  } finally {
    await bench?.stop();
    if (tempDir) await fs.rm(tempDir, { recursive: true, force: true });
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  main().catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
