import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { constraintsFromParams } from '../query/constraints.js';
import {
  buildListQuery,
  DETAIL_LOG_LIMIT,
  type ExecutionFilter,
  getExecution,
  listExecutions,
  type Page,
} from '../query/executions.js';
import { buildLogListQuery, executionLogWindow } from '../query/logs.js';
import { QueryEngine, type Row, type SqlParam } from '../storage/duckdb.js';
import { listPartitionFiles } from '../storage/layout.js';
import { type DatasetMarker, prepareDataset } from './support/dataset.js';
import { quantile } from './support/stats.js';

/**
 * Query latency over a realistic dataset (default 10 M executions over 6 hours), written through the
 * service's own writer with every context key indexed (typed ctx_* columns), and compacted as the service
 * does. Each query runs through the query layer (query/executions.ts: what the HTTP route calls once the
 * request is validated) and, as the baseline from the same run, the same SQL on the same files straight
 * through DuckDB; the ratio of the two is the layer's cost.
 *
 * Not measured over HTTP: the service only answers for a workspace that exists in its NATS control plane, and
 * a dataset written beside the service cannot be attached to one without going through ingestion.
 *
 *   npm run bench -- query [--quick] [--executions N] [--hours H] [--runs N] [--data-dir DIR]
 */

const here = path.dirname(fileURLToPath(import.meta.url));
const resultsDir = path.resolve(here, '..', '..', 'bench', 'results');
const HOUR_MS = 3_600_000;
/** CONTRACT §6.3: a context search without serviceName may span at most 24 h. */
const CONTEXT_WITHOUT_SERVICE_MAX_MS = 24 * HOUR_MS;

const USAGE = `usage: node dist/bench/query.js [options]
  --executions N   executions in the dataset (10000000)
  --quick          1000000 executions (unless --executions is given)
  --hours H        time span of the dataset, ending when it is generated (6)
  --seed N         generator seed (42)
  --runs N         measured runs per query, after the warm-up (30)
  --warmup N       warm-up runs per query and side (3)
  --batch-rows N   rows per BatchWriter.write while generating (250000)
  --data-dir DIR   keep the dataset here and reuse it when its parameters match; default a temp dir
  --keep           keep the temp dir at the end
  --explain        print DuckDB's EXPLAIN ANALYZE of each raw query once
  --only KEYS      only these queries, comma-separated: service-context,two-context,detail,sort-duration
`;

interface Options {
  executions: number;
  hours: number;
  seed: number;
  runs: number;
  warmup: number;
  batchRows: number;
  dataDir: string | null;
  keep: boolean;
  explain: boolean;
  only: string[] | null;
}

function parseOptions(args: string[]): Options | null {
  const { values } = parseArgs({
    args,
    options: {
      executions: { type: 'string' },
      quick: { type: 'boolean', default: false },
      hours: { type: 'string', default: '6' },
      seed: { type: 'string', default: '42' },
      runs: { type: 'string', default: '30' },
      warmup: { type: 'string', default: '3' },
      'batch-rows': { type: 'string', default: '250000' },
      'data-dir': { type: 'string' },
      keep: { type: 'boolean', default: false },
      explain: { type: 'boolean', default: false },
      only: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return null;
  }
  const int = (name: string, raw: string | undefined, min: number, max: number): number => {
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max)
      throw new Error(`--${name} must be a whole number in [${min}, ${max}]`);
    return n;
  };
  return {
    executions:
      values.executions !== undefined
        ? int('executions', values.executions, 1000, 1_000_000_000)
        : values.quick
          ? 1_000_000
          : 10_000_000,
    hours: int('hours', values.hours, 2, 24 * 30),
    seed: int('seed', values.seed, 0, 2 ** 31),
    runs: int('runs', values.runs, 1, 100_000),
    warmup: int('warmup', values.warmup, 0, 1000),
    batchRows: int('batch-rows', values['batch-rows'], 1000, 5_000_000),
    dataDir: values['data-dir'] ? path.resolve(values['data-dir']) : null,
    keep: values.keep ?? false,
    explain: values.explain ?? false,
    only: values.only ? values.only.split(',').map((k) => k.trim()) : null,
  };
}

/** What a run answered, to check that the layer and the raw SQL agree. */
interface Answer {
  total: number;
  ids: string[];
}

interface Scenario {
  key: string;
  label: string;
  /** The contract's targets, where it has one. */
  targetP95Ms: number | null;
  /** Number of files the query reads. */
  files: number;
  /** `run` numbers each call (warm-ups included), so the detail can look up a different id each time. */
  layer: (engine: QueryEngine, run: number) => Promise<Answer>;
  raw: (engine: QueryEngine, run: number) => Promise<Answer>;
  /** The raw statements, for --explain. */
  statements: (
    engine: QueryEngine,
    run: number,
  ) => Promise<{ sql: string; params: Record<string, SqlParam> }[]>;
}

/**
 * The statement of `getExecution` (query/executions.ts), which does not export it; keep the two in step. Raw,
 * it reads every file's id column: the layer goes through the id indexes first.
 */
const DETAIL_SQL = `SELECT execution_id, trace_id, service, environment, source, endpoint, method, status_code,
  duration_ms, outcome, epoch_ms(started_at)::DOUBLE AS started_at_ms, issue_id, exception_type, span_id,
  parent_span_id, context, request, response, exception, outcome_reason, outcome_evidence, truncated
FROM read_parquet($files, union_by_name = true)
WHERE execution_id = $id
ORDER BY received_at ASC, ingest_seq ASC`;

async function listScenario(
  dataDir: string,
  key: string,
  label: string,
  targetP95Ms: number | null,
  f: ExecutionFilter,
  p: Page,
): Promise<Scenario> {
  // Listed once for the raw side: the layer lists them on every call, which is part of what it costs.
  const files = await listPartitionFiles(dataDir, 'executions', f.workspaceId, f.mode, f.from, f.to);
  // Built on first use, with the columns the files have (as the layer does for a context search); untimed.
  let built: ReturnType<typeof buildListQuery> | null = null;
  const build = async (engine: QueryEngine) => {
    built ??= buildListQuery(f, p, f.context?.length ? await engine.columnsOf(files) : undefined);
    return built;
  };
  // As listExecutions runs them: the head (total and bound), then the page within the bound.
  const run = async (engine: QueryEngine) => {
    const q = await build(engine);
    const [head] = await engine.all(q.head.sql, { ...q.head.params, files });
    const page = { sql: q.page.sql, params: { ...q.page.params, files, bound: Number(head!.bound) } };
    return { head: head!, page, rows: await engine.all(page.sql, page.params) };
  };
  const statements = async (engine: QueryEngine) => {
    const q = await build(engine);
    return [{ sql: q.head.sql, params: { ...q.head.params, files } }, (await run(engine)).page];
  };
  return {
    key,
    label,
    targetP95Ms,
    files: files.length,
    layer: async (engine) => {
      const page = await listExecutions(engine, dataDir, f, p);
      return { total: page.total, ids: page.data.map((d) => d.executionId) };
    },
    raw: async (engine) => {
      const { head, rows } = await run(engine);
      return { total: Number(head.total), ids: rows.map((r) => r.execution_id as string) };
    },
    statements,
  };
}

async function detailScenario(dataDir: string, m: DatasetMarker): Promise<Scenario> {
  const scope = { workspaceId: m.workspaceId, mode: m.mode };
  // The same window getExecution lists: every partition there is.
  const files = await listPartitionFiles(
    dataDir,
    'executions',
    m.workspaceId,
    m.mode,
    0,
    Number.MAX_SAFE_INTEGER,
  );
  // A stride coprime with the sample count visits every sampled id before repeating one.
  const idFor = (run: number) => m.sampleIds[(run * 97 + 13) % m.sampleIds.length]!;
  const statement = (run: number) => ({ sql: DETAIL_SQL, params: { files, id: idFor(run) } });
  /** The execution's logs as the detail lists them (the first DETAIL_LOG_LIMIT + 1), every file of their window read. */
  const logStatement = async (id: string, row: Row) => {
    const window = executionLogWindow({
      startedAt: Number(row.started_at_ms),
      durationMs: Number(row.duration_ms),
    });
    const logFiles = await listPartitionFiles(dataDir, 'logs', m.workspaceId, m.mode, window.from, window.to);
    const q = buildLogListQuery(
      { ...scope, ...window, executionId: id },
      { page: 1, pageSize: DETAIL_LOG_LIMIT + 1, sort: 'timestamp' },
    );
    return { sql: q.list.sql, params: { ...q.list.params, files: logFiles } };
  };
  // The execution and the timestamps and messages of its logs: the layer and the raw SQL must agree on all.
  const answer = (id: string | null, logs: { ts: number; message: string }[]) => ({
    total: id ? 1 : 0,
    ids: id ? [id, ...logs.map((l) => `${l.ts} ${l.message}`)] : [],
  });
  return {
    key: 'detail',
    label: 'detail by execution id, with its logs',
    targetP95Ms: 20,
    files: files.length,
    layer: async (engine, run) => {
      const d = await getExecution(engine, dataDir, scope, idFor(run));
      return answer(
        d?.executionId ?? null,
        (d?.logs ?? []).map((l) => ({ ts: Date.parse(l.timestamp), message: l.message })),
      );
    },
    raw: async (engine, run) => {
      const s = statement(run);
      const [row] = await engine.all(s.sql, s.params);
      if (!row) return answer(null, []);
      const logs = await logStatement(s.params.id, row);
      const rows = await engine.all(logs.sql, logs.params);
      return answer(
        row.execution_id as string,
        rows.map((l) => ({ ts: Number(l.ts_ms), message: l.message as string })),
      );
    },
    statements: async (engine, run) => {
      const s = statement(run);
      const [row] = await engine.all(s.sql, s.params);
      return row ? [s, await logStatement(s.params.id, row)] : [s];
    },
  };
}

async function buildScenarios(dataDir: string, m: DatasetMarker): Promise<Scenario[]> {
  const base = { workspaceId: m.workspaceId, mode: m.mode };
  const firstPage: Page = { page: 1, pageSize: 50, sort: '-startedAt' };
  const busiest = m.services[0]!.name;
  const contextFrom = Math.max(m.fromMs, m.toMs - CONTEXT_WITHOUT_SERVICE_MAX_MS);
  return [
    await listScenario(
      dataDir,
      'service-context',
      `list: service=${busiest}, last 1 h, customer.tier`,
      50,
      {
        ...base,
        from: m.toMs - HOUR_MS,
        to: m.toMs,
        constraints: constraintsFromParams({ serviceName: busiest }),
        context: [{ path: 'customer.tier', values: ['enterprise'] }],
      },
      firstPage,
    ),
    await listScenario(
      dataDir,
      'two-context',
      `list: no service, ${Math.round((m.toMs - contextFrom) / HOUR_MS)} h, customer.tier + region`,
      null,
      {
        ...base,
        from: contextFrom,
        to: m.toMs,
        constraints: [],
        context: [
          { path: 'customer.tier', values: ['pro'] },
          { path: 'region', values: ['eu-west-1'] },
        ],
      },
      firstPage,
    ),
    await detailScenario(dataDir, m),
    await listScenario(
      dataDir,
      'sort-duration',
      `list: whole ${m.params.hours} h, sort -durationMs`,
      null,
      { ...base, from: m.fromMs, to: m.toMs, constraints: [] },
      { ...firstPage, sort: '-durationMs' },
    ),
  ];
}

/** Interpolated percentile (bench/support/stats.ts). */
const percentile = (sorted: number[], p: number): number => quantile(sorted, p / 100) ?? Number.NaN;

interface Summary {
  p50: number;
  p95: number;
  min: number;
  max: number;
  mean: number;
}

function summarize(samples: number[]): Summary {
  const s = [...samples].sort((a, b) => a - b);
  return {
    p50: percentile(s, 50),
    p95: percentile(s, 95),
    min: s[0] ?? Number.NaN,
    max: s[s.length - 1] ?? Number.NaN,
    mean: s.reduce((a, b) => a + b, 0) / Math.max(1, s.length),
  };
}

const sameAnswer = (a: Answer, b: Answer) =>
  a.total === b.total && a.ids.length === b.ids.length && a.ids.every((id, i) => id === b.ids[i]);

interface Measured {
  layer: Summary;
  raw: Summary;
  ratio: number;
  total: number;
  samples: { layer: number[]; raw: number[] };
  /** EXPLAIN ANALYZE of the raw statements, with --explain. */
  plans: string[];
}

async function timed(fn: () => Promise<Answer>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

/**
 * Each side gets its own fresh engine (neither warms the other's caches) and the same warm-up; the measured
 * runs alternate between the sides, swapping which goes first, so drift on a noisy machine hits both alike.
 */
async function measure(dataDir: string, s: Scenario, o: Options): Promise<Measured> {
  const layerEngine = await QueryEngine.open(dataDir);
  const rawEngine = await QueryEngine.open(dataDir);
  try {
    let run = 0;
    const first = await s.layer(layerEngine, run);
    const firstRaw = await s.raw(rawEngine, run);
    run++;
    if (!sameAnswer(first, firstRaw))
      throw new Error(
        `${s.key}: the layer and the raw SQL disagree (${first.total} vs ${firstRaw.total} rows)`,
      );
    // Every query is built to match: none means the files are not what the generator writes (a stale cache
    // from an older generator, or indexed-context columns missing), and timing it would mean nothing.
    if (first.total === 0)
      throw new Error(
        `${s.key}: no execution matched; delete the data directory to generate the dataset again`,
      );
    for (let w = 1; w < o.warmup; w++, run++) {
      await s.layer(layerEngine, run);
      await s.raw(rawEngine, run);
    }
    const layer: number[] = [];
    const raw: number[] = [];
    for (let i = 0; i < o.runs; i++, run++) {
      const r = run;
      if (i % 2 === 0) {
        layer.push(await timed(() => s.layer(layerEngine, r)));
        raw.push(await timed(() => s.raw(rawEngine, r)));
      } else {
        raw.push(await timed(() => s.raw(rawEngine, r)));
        layer.push(await timed(() => s.layer(layerEngine, r)));
      }
    }
    const plans: string[] = [];
    if (o.explain) {
      for (const st of await s.statements(rawEngine, 0)) {
        const rows = await rawEngine.all(`EXPLAIN ANALYZE ${st.sql}`, st.params);
        plans.push(rows.map((r) => String(r.explain_value)).join('\n'));
      }
    }
    const l = summarize(layer);
    const rw = summarize(raw);
    return { layer: l, raw: rw, ratio: l.p50 / rw.p50, total: first.total, samples: { layer, raw }, plans };
  } finally {
    layerEngine.close();
    rawEngine.close();
  }
}

const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  // The first and last columns are text (left-aligned), the rest numbers.
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === 0 || i === cells.length - 1 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

/** The overhead the query layer may add to the raw DuckDB time (p50 over p50). */
const MAX_RATIO = 1.3;

export async function main(argv: string[] = process.argv.slice(2)): Promise<void> {
  const o = parseOptions(argv);
  if (!o) return;
  const tempDir = o.dataDir ? null : await fs.mkdtemp(path.join(os.tmpdir(), 'svc-bench-query-'));
  const dataDir = o.dataDir ?? path.join(tempDir!, 'data');
  try {
    const params = { executions: o.executions, hours: o.hours, seed: o.seed };
    process.stdout.write(
      `dataset: ${fmt(o.executions)} executions over ${o.hours} h, seed ${o.seed}, in ${dataDir}\n`,
    );
    const { marker, reused } = await prepareDataset(dataDir, params, {
      batchRows: o.batchRows,
      onProgress: (done, total, s) =>
        process.stdout.write(
          `\r  generated ${fmt(done)} / ${fmt(total)}  ${fmt(done / Math.max(s, 1e-3))} rows/s   `,
        ),
    });
    const g = marker.generation!;
    if (!reused) process.stdout.write('\n');
    process.stdout.write(
      `${reused ? 'reused (generated earlier: ' : 'generated ('}${fmt(g.rowsPerSec)} rows/s through BatchWriter, ` +
        `${fmt(g.seconds, 1)} s + compaction ${fmt(g.compaction.seconds, 1)} s); ` +
        `${g.files} files, ${fmt(g.parquetBytes / 2 ** 20, 1)} MiB of Parquet; ` +
        `${fmt(g.logs)} logs, ${fmt(g.logParquetBytes / 2 ** 20, 1)} MiB\n\n`,
    );

    const all = await buildScenarios(dataDir, marker);
    const unknown = (o.only ?? []).filter((k) => !all.some((s) => s.key === k));
    if (unknown.length > 0) throw new Error(`--only: no query ${unknown.join(', ')}`);
    const scenarios = all.filter((s) => o.only === null || o.only.includes(s.key));
    const results: Record<string, Measured & { label: string; files: number; targetP95Ms: number | null }> =
      {};
    for (const s of scenarios) {
      process.stdout.write(`  ${s.label} …`);
      const m = await measure(dataDir, s, o);
      results[s.key] = { label: s.label, files: s.files, targetP95Ms: s.targetP95Ms, ...m };
      process.stdout.write(` p50 ${fmt(m.layer.p50, 1)} ms\n`);
      for (const plan of m.plans) process.stdout.write(`\n${plan}\n\n`);
    }

    const misses: string[] = [];
    const rows = scenarios.map((s) => {
      const r = results[s.key]!;
      const verdicts: string[] = [];
      if (s.targetP95Ms !== null && r.layer.p95 > s.targetP95Ms) verdicts.push(`p95 > ${s.targetP95Ms} ms`);
      if (r.ratio > MAX_RATIO) verdicts.push(`ratio > ${MAX_RATIO}`);
      for (const v of verdicts) misses.push(`${s.key}: ${v}`);
      return [
        s.label,
        fmt(r.total),
        fmt(r.layer.p50, 1),
        fmt(r.layer.p95, 1),
        fmt(r.raw.p50, 1),
        fmt(r.raw.p95, 1),
        fmt(r.ratio, 2),
        s.targetP95Ms === null ? '-' : `${s.targetP95Ms}`,
        verdicts.length === 0 ? 'ok' : `MISS (${verdicts.join(', ')})`,
      ];
    });
    process.stdout.write(
      `\n${table(
        ['query', 'matched', 'p50 ms', 'p95 ms', 'raw p50', 'raw p95', 'ratio', 'p95 target', ''],
        rows,
      )}\n`,
    );
    process.stdout.write(
      `\n${o.runs} runs after ${o.warmup} warm-up runs each; ratio = layer p50 / raw p50 (target ≤ ${MAX_RATIO}).\n` +
        'Measured in process through query/executions.ts, not over HTTP (the workspace would have to exist in NATS).\n',
    );

    const at = new Date().toISOString();
    const result = {
      at,
      options: o,
      machine: {
        cpus: os.availableParallelism(),
        memoryGiB: os.totalmem() / 2 ** 30,
        node: process.version,
      },
      dataset: {
        dataDir,
        reused,
        params: marker.params,
        window: { from: new Date(marker.fromMs).toISOString(), to: new Date(marker.toMs).toISOString() },
        services: marker.services,
        generation: marker.generation,
      },
      http: 'not measured: the service answers only for workspaces in its NATS control plane',
      queries: results,
      targets: { serviceContextP95Ms: 50, detailP95Ms: 20, maxRatio: MAX_RATIO },
      misses,
      peakRssMiB: process.resourceUsage().maxRSS / 1024,
    };
    await fs.mkdir(resultsDir, { recursive: true });
    const file = path.join(resultsDir, `query-${at.replace(/[:.]/g, '-')}.json`);
    await fs.writeFile(file, `${JSON.stringify(result, null, 2)}\n`);
    process.stdout.write(
      `peak RSS ${fmt(result.peakRssMiB)} MiB\nresults: ${path.relative(process.cwd(), file)}\n`,
    );
  } finally {
    if (tempDir && !o.keep) await fs.rm(tempDir, { recursive: true, force: true });
    else if (tempDir) process.stdout.write(`kept ${dataDir}\n`);
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  main().catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
