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
  findExecution,
  getExecution,
  listExecutions,
  type Page,
} from '../query/executions.js';
import {
  addScannedBaseline,
  buildFactorBaselineQuery,
  buildFactorHitsQuery,
  candidatesOf,
  emptyBaseline,
  factorsOf as factorsPassing,
  ISSUE_STATS_SQL,
  issueFactors,
  oneIssueStats,
  wholeHours,
} from '../query/issues.js';
import { buildLogListQuery, executionLogWindow } from '../query/logs.js';
import type { IssueOccurrences } from '../schemas/issues.js';
import { DAY_MS, HOUR_MS } from '../schemas/time.js';
import { QueryEngine, type Row, type SqlParam } from '../storage/duckdb.js';
import { listPartitionFiles } from '../storage/layout.js';
import { readManifest, wholeRowFiles } from '../storage/manifest.js';
import {
  type DatasetMarker,
  type DiskParts,
  diskParts,
  prepareDataset,
  readIssueOccurrences,
  totalBytes,
} from './support/dataset.js';
import { wholeNumber } from './support/options.js';
import { type BenchService, startBenchService } from './support/service-session.js';
import { quantile } from './support/stats.js';

/**
 * Query latency over a realistic dataset (default 10 M executions over 6 hours, 2.5 % of them failed and grouped
 * into about 2,000 issues), written through the service's own writer with every context key indexed (typed ctx_*
 * columns), and compacted as the service does. Each figure comes with a baseline from the same run: the same SQL
 * on the same files straight through DuckDB, and the ratio of the two.
 *
 * The execution queries (list, detail) run in process through the query layer (query/executions.ts: what the
 * HTTP route calls once the request is validated). The issue queries (CONTRACT §9; issue 12's targets: list p95
 * ≤ 50 ms, one issue with its common factors p95 ≤ 150 ms) go over HTTP with a real session: a nats-server and
 * the service (role start) are started in this process on the dataset's directory, the workspace, an owner and
 * the issue records the pipeline would have made are put into its control plane, and a log-in gives the session.
 * Their baselines are the failures aggregate (ISSUE_STATS_SQL.all) for the list, and one issue's statistics
 * (ISSUE_STATS_SQL.one) then its common factors' two passes (buildFactorHitsQuery, buildFactorBaselineQuery) for the detail.
 *
 *   npm run bench -- query [--quick] [--executions N] [--hours H] [--runs N] [--data-dir DIR] [--only KEYS]
 */

const here = path.dirname(fileURLToPath(import.meta.url));
const resultsDir = path.resolve(here, '..', '..', 'bench', 'results');
/** CONTRACT §6.3: a context search without serviceName may span at most 24 h. */
const CONTEXT_WITHOUT_SERVICE_MAX_MS = 24 * HOUR_MS;

const USAGE = `usage: node dist/bench/query.js [options]
  --executions N   executions in the dataset (10000000)
  --quick          1000000 executions (unless --executions is given)
  --hours H        time span of the dataset, ending when it is generated (6)
  --span-ids       execution ids of 16 random hex digits, as the Node SDK and OTLP send them (span ids), instead
                   of ULIDs: every hour's by-id copy then has a part whose range holds any id
  --seed N         generator seed (42)
  --runs N         measured runs per query, after the warm-up (30)
  --warmup N       warm-up runs per query and side (3)
  --batch-rows N   rows per BatchWriter.write while generating (250000)
  --data-dir DIR   keep the dataset here and reuse it when its parameters match; default a temp dir
  --keep           keep the temp dir at the end
  --explain        print DuckDB's EXPLAIN ANALYZE of each raw query once
  --only KEYS      only these queries, comma-separated: service-context,two-context,detail,sort-duration,
                   issues-list (by last seen and by occurrences), issue-detail
`;

interface Options {
  executions: number;
  hours: number;
  spanIds: boolean;
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
      'span-ids': { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return null;
  }
  const int = wholeNumber;
  return {
    executions:
      values.executions !== undefined
        ? int('executions', values.executions, 1000, 1_000_000_000)
        : values.quick
          ? 1_000_000
          : 10_000_000,
    hours: int('hours', values.hours, 2, 24 * 30),
    spanIds: values['span-ids'] ?? false,
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

/** What a run answered, to check that the measured side and the raw SQL agree. */
interface Answer {
  total: number;
  ids: string[];
}

interface Statement {
  sql: string;
  params: Record<string, SqlParam>;
}

/** A timed call; `run` numbers each call (warm-ups included), so a detail can look up a different id each time. */
type Side = (run: number) => Promise<Answer>;

/** The two sides of a scenario, ready to run: what is measured, and its baseline. */
interface Sides {
  measured: Side;
  raw: Side;
  /** The engine the raw side runs on, for --explain. */
  rawEngine: QueryEngine;
  /** The raw statements, for --explain. */
  statements: (run: number) => Promise<Statement[]>;
  close(): void;
}

interface Scenario {
  key: string;
  label: string;
  /** The contract's targets, where it has one. */
  targetP95Ms: number | null;
  /** `layer`: in process through query/, on an engine of its own; `http`: through the service started here. */
  via: 'layer' | 'http';
  /** Number of files the query reads. */
  files: number;
  /** Untimed: engines, listings, built statements. */
  open(): Promise<Sides>;
}

/** A scenario of the query layer: each side gets its own fresh engine, so neither warms the other's caches. */
function inProcess(
  dataDir: string,
  sides: {
    layer: (engine: QueryEngine, run: number) => Promise<Answer>;
    raw: (engine: QueryEngine, run: number) => Promise<Answer>;
    statements: (engine: QueryEngine, run: number) => Promise<Statement[]>;
  },
): () => Promise<Sides> {
  return async () => {
    const layerEngine = await QueryEngine.open(dataDir);
    const rawEngine = await QueryEngine.open(dataDir);
    return {
      measured: (run) => sides.layer(layerEngine, run),
      raw: (run) => sides.raw(rawEngine, run),
      rawEngine,
      statements: (run) => sides.statements(rawEngine, run),
      close: () => {
        layerEngine.close();
        rawEngine.close();
      },
    };
  };
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
    via: 'layer',
    files: files.length,
    open: inProcess(dataDir, {
      layer: async (engine) => {
        const page = await listExecutions(engine, dataDir, f, p);
        return { total: page.total, ids: page.data.map((d) => d.executionId) };
      },
      raw: async (engine) => {
        const { head, rows } = await run(engine);
        return { total: Number(head.total), ids: rows.map((r) => r.execution_id as string) };
      },
      statements,
    }),
  };
}

async function detailScenario(dataDir: string, m: DatasetMarker): Promise<Scenario> {
  const scope = { workspaceId: m.workspaceId, mode: m.mode };
  // The same window getExecution lists: every partition there is, each file's rows where all their columns are
  // (a scan-only hour file's in its by-id parts).
  const visible = await listPartitionFiles(
    dataDir,
    'executions',
    m.workspaceId,
    m.mode,
    0,
    Number.MAX_SAFE_INTEGER,
  );
  const files = (
    await Promise.all(
      visible.map(async (f) => {
        const manifest = await readManifest(path.dirname(f));
        return manifest ? wholeRowFiles(path.dirname(f), manifest, [path.basename(f)]) : [f];
      }),
    )
  ).flat();
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
    via: 'layer',
    files: files.length,
    open: inProcess(dataDir, {
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
    }),
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

// ---- issues, over HTTP ----

/** Issues whose detail is timed, spread over the ranks by size (log-spaced), from the biggest to the smallest. */
const ISSUE_SAMPLE = 15;
/** The common factors' window, as api/routes/issues.ts: the 7 days before the issue's last occurrence. */
const FACTOR_WINDOW_MS = 7 * DAY_MS;
const ISSUE_KEYS = ['issues-list', 'issues-list:occurrences', 'issue-detail'];

interface IssueItemBody {
  id: string;
  lastSeenAt: string;
  occurrences: { total: number; last24h: number; last7d: number };
}

interface IssuePageBody {
  data: IssueItemBody[];
  total: number;
  hasMore: boolean;
}

interface IssueDetailBody extends IssueItemBody {
  commonFactors: { field: string; value: string | number | boolean; baselineShare: number }[];
  representativeExecution: { executionId: string; issueId: string | null; startedAt: string } | null;
  recentActivity: unknown[];
}

const statsParams = (files: string[], now: number) => ({
  files,
  day: now - DAY_MS,
  week: now - 7 * DAY_MS,
});

/** A sampled issue and its common factors' statement, built once (untimed) as the route builds it. */
interface SampledIssue {
  rank: number;
  occurrences: IssueOccurrences;
  /** The common factors' two passes: the issue's executions, then the baseline counting their candidates. */
  factors: Statement[];
  /** What the raw statements answered: the baseline's size and the common factors (`field=value`, sorted). */
  baseline: number;
  expectedFactors: string[];
  /** `field=value: baselineShare` of each, to check the rollups' counts against the scan's exactly. */
  expectedShares: string[];
}

/** The raw statements of one issue's detail: its statistics, then its common factors over its window. */
async function sampleIssue(b: BenchService, rank: number): Promise<SampledIssue> {
  const o = b.occurrences[rank]!;
  const [stats] = await b.rawEngine.all(ISSUE_STATS_SQL.one, {
    ...statsParams(b.failuresFiles, Date.now()),
    issue: o.issueId,
  });
  if (!stats) throw new Error(`issue ${o.issueId}: no failures rows`);
  const lastSeen = Math.max(o.lastStartedAt, Number(stats.last_ms));
  // The route's window, whole hours (query/issues.ts).
  const { from, to } = wholeHours(lastSeen - FACTOR_WINDOW_MS, lastSeen + 1);
  const m = b.marker;
  const files = await listPartitionFiles(b.dataDir, 'executions', m.workspaceId, m.mode, from, to);
  const q = {
    issueId: o.issueId,
    services: stats.services as string[],
    endpoints: stats.endpoints as string[],
    from,
    to,
    indexedKeys: m.indexedContextKeys,
  };
  const available = await b.rawEngine.columnsOf(files);
  // As the route reads them: the issue's own executions from their failures rows, the baseline from executions.
  const failureFiles = await listPartitionFiles(b.dataDir, 'failures', m.workspaceId, m.mode, from, to);
  const hits = buildFactorHitsQuery(q, await b.rawEngine.columnsOf(failureFiles));
  const hitsStatement = { sql: hits.sql, params: { ...hits.params, files: failureFiles } };
  const first = candidatesOf(await b.rawEngine.all(hitsStatement.sql, hitsStatement.params), hits.keys);
  const baseline = buildFactorBaselineQuery(q, first.candidates, available);
  const baselineStatement = { sql: baseline.sql, params: { ...baseline.params, files } };
  // A scan of every executions file (the rollups are what is measured).
  const base = addScannedBaseline(
    emptyBaseline(first.candidates.length),
    await b.rawEngine.all(baselineStatement.sql, baselineStatement.params),
  );
  const expected = factorsPassing(first.candidates, first.hits, base.base, (i) => base.counts[i]!);
  return {
    rank,
    occurrences: o,
    factors: [hitsStatement, baselineStatement],
    baseline: base.base,
    expectedFactors: expected.map((f) => `${f.field}=${String(f.value)}`).sort(),
    expectedShares: expected.map((f) => `${f.field}=${String(f.value)}: ${f.baselineShare}`).sort(),
  };
}

/** Log-spaced ranks from the biggest issue (0) to the smallest, without repeats. */
function sampleRanks(issues: number, count: number): number[] {
  if (issues <= count) return Array.from({ length: issues }, (_, i) => i);
  const ranks = new Set<number>();
  for (let i = 0; i < count; i++) ranks.add(Math.round(Math.exp((i / (count - 1)) * Math.log(issues))) - 1);
  return [...ranks];
}

const fail = (what: string): never => {
  throw new Error(`issues: ${what}`);
};

/**
 * Before anything is timed, the answers are checked against the dataset (untimed): every issue listed once with
 * its occurrences as generated, in the sort's order; the occurrences sum to the failures written; the raw
 * aggregate agrees; each sampled issue's detail has its count, its representative execution and the common
 * factors the raw statement gives.
 */
async function verifyIssues(b: BenchService, sample: SampledIssue[]): Promise<void> {
  const m = b.marker;
  const byId = new Map(b.occurrences.map((o) => [o.issueId, o]));
  const listed: IssueItemBody[] = [];
  for (let page = 1; ; page++) {
    const body = await b.get<IssuePageBody>(`/api/issues?pageSize=200&page=${page}`);
    if (body.total !== b.occurrences.length)
      fail(`the list's total is ${body.total}, ${b.occurrences.length} issues were created`);
    listed.push(...body.data);
    if (!body.hasMore) break;
  }
  if (listed.length !== b.occurrences.length || new Set(listed.map((i) => i.id)).size !== listed.length)
    fail(`${listed.length} listed, ${b.occurrences.length} expected, each once`);
  let sum = 0;
  for (const [i, item] of listed.entries()) {
    const o = byId.get(item.id) ?? fail(`${item.id} is no issue of the dataset`);
    if (item.occurrences.total !== o.count)
      fail(`${item.id} has ${item.occurrences.total} occurrences, ${o.count} were generated`);
    sum += item.occurrences.total;
    const prev = listed[i - 1];
    if (prev) {
      const a = Date.parse(prev.lastSeenAt);
      const c = Date.parse(item.lastSeenAt);
      if (a < c || (a === c && prev.id > item.id)) fail(`not sorted by -lastSeenAt at ${i}`);
    }
  }
  if (sum !== m.failures) fail(`the occurrences sum to ${sum}, ${m.failures} failures were written`);
  const top = await b.get<IssuePageBody>('/api/issues?pageSize=50&sort=-occurrences');
  const expected = b.occurrences.slice(0, 50).map((o) => `${o.issueId} ${o.count}`);
  const got = top.data.map((i) => `${i.id} ${i.occurrences.total}`);
  if (got.join() !== expected.join()) fail('sort=-occurrences: the first page is not the 50 biggest issues');
  const rows = await b.rawEngine.all(ISSUE_STATS_SQL.all, statsParams(b.failuresFiles, Date.now()));
  const rawSum = rows.reduce((n, r) => n + Number(r.total), 0);
  if (rows.length !== b.occurrences.length || rawSum !== m.failures)
    fail(`the raw aggregate has ${rows.length} issues and ${rawSum} occurrences`);
  for (const s of sample) {
    const id = s.occurrences.issueId;
    const d = await b.get<IssueDetailBody>(`/api/issues/${id}`);
    const rep = d.representativeExecution;
    if (d.id !== id || d.occurrences.total !== s.occurrences.count)
      fail(`${id}: ${d.occurrences.total} occurrences, ${s.occurrences.count} generated`);
    if (!rep || rep.issueId !== id || Date.parse(rep.startedAt) !== Date.parse(d.lastSeenAt))
      fail(`${id}: the representative execution is not its last occurrence`);
    const factors = d.commonFactors.map((f) => `${f.field}=${String(f.value)}`).sort();
    if (factors.join() !== s.expectedFactors.join())
      fail(
        `${id}: common factors ${factors.join(', ')}; the raw statement gives ${s.expectedFactors.join(', ')}`,
      );
    const shares = d.commonFactors.map((f) => `${f.field}=${String(f.value)}: ${f.baselineShare}`).sort();
    if (shares.join() !== s.expectedShares.join())
      fail(`${id}: baseline shares ${shares.join(', ')}; the raw scan gives ${s.expectedShares.join(', ')}`);
    if (d.recentActivity.length === 0) fail(`${id}: no activity (every issue has its created event)`);
  }
}

function issueListScenario(b: BenchService, key: string, label: string, query: string): Scenario {
  return {
    key,
    label,
    targetP95Ms: 50,
    via: 'http',
    files: b.failuresFiles.length,
    open: async () => ({
      measured: async () => {
        const body = await b.get<IssuePageBody>(`/api/issues?${query}`);
        return { total: body.total, ids: [] };
      },
      // The whole aggregate: the route needs every issue's figures to sort and page by them.
      raw: async () => {
        const rows = await b.rawEngine.all(ISSUE_STATS_SQL.all, statsParams(b.failuresFiles, Date.now()));
        return { total: rows.length, ids: [] };
      },
      rawEngine: b.rawEngine,
      statements: async () => [
        { sql: ISSUE_STATS_SQL.all, params: statsParams(b.failuresFiles, Date.now()) },
      ],
      close: () => {},
    }),
  };
}

/** A stride coprime with the sample size visits every sampled issue before repeating one. */
const sampledFor = (sample: SampledIssue[], run: number) => sample[(run * 97 + 13) % sample.length]!;

function issueDetailScenario(b: BenchService, sample: SampledIssue[]): Scenario {
  const counts = sample.map((s) => s.occurrences.count);
  const statements = (s: SampledIssue): Statement[] => [
    {
      sql: ISSUE_STATS_SQL.one,
      params: { ...statsParams(b.failuresFiles, Date.now()), issue: s.occurrences.issueId },
    },
    ...s.factors,
  ];
  return {
    key: 'issue-detail',
    label: `GET /api/issues/{id}: ${sample.length} issues, ${fmt(Math.min(...counts))}–${fmt(Math.max(...counts))} occurrences`,
    targetP95Ms: 150,
    via: 'http',
    files:
      b.failuresFiles.length +
      Math.max(0, ...sample.map((s) => (s.factors[1]!.params.files as string[]).length)),
    open: async () => ({
      measured: async (run) => {
        const id = sampledFor(sample, run).occurrences.issueId;
        const d = await b.get<IssueDetailBody>(`/api/issues/${id}`);
        return { total: 1, ids: [d.id, String(d.occurrences.total)] };
      },
      // As the route runs them: the statistics first (the factors' scope and window come from them).
      raw: async (run) => {
        const s = sampledFor(sample, run);
        const [stats, ...factors] = statements(s);
        const [row] = await b.rawEngine.all(stats!.sql, stats!.params);
        for (const f of factors) await b.rawEngine.all(f.sql, f.params);
        return row
          ? { total: 1, ids: [s.occurrences.issueId, String(Number(row.total))] }
          : { total: 0, ids: [] };
      },
      rawEngine: b.rawEngine,
      statements: async (run) => statements(sampledFor(sample, run)),
      close: () => {},
    }),
  };
}

/** What the detail's parts cost, each alone, in process on the baseline's engine (ms per call, over the sample). */
interface DetailParts {
  /** The parts, as the route runs them: the statistics, then the other three concurrently. */
  parts: Record<'stats' | 'factors' | 'representative' | 'comments' | 'route', Summary>;
  /** Per sampled issue: p50 of its common factors statement through issueFactors. */
  factorsByIssue: number[];
}

async function detailParts(b: BenchService, sample: SampledIssue[], o: Options): Promise<DetailParts> {
  const m = b.marker;
  const scope = { workspaceId: m.workspaceId, mode: m.mode };
  const engine = b.rawEngine;
  const { control } = b.service!;
  const samples = { stats: [], factors: [], representative: [], comments: [], route: [] } as Record<
    keyof DetailParts['parts'],
    number[]
  >;
  const byIssue = sample.map(() => [] as number[]);
  const time = async <T>(into: number[] | null, fn: () => Promise<T>): Promise<T> => {
    const t = performance.now();
    const out = await fn();
    into?.push(performance.now() - t);
    return out;
  };
  const rounds = Math.max(3, Math.round(o.runs / Math.max(1, sample.length)));
  // The first round warms up.
  for (let round = 0; round <= rounds; round++) {
    for (const [i, s] of sample.entries()) {
      const keep = round > 0;
      const id = s.occurrences.issueId;
      const now = Date.now();
      const stats = await time(keep ? samples.stats : null, () =>
        oneIssueStats(engine, b.dataDir, scope, id, now),
      );
      if (!stats) throw new Error(`issues: ${id} has no statistics`);
      const q = {
        issueId: id,
        services: stats.services,
        endpoints: stats.endpoints,
        from: stats.lastSeenMs - FACTOR_WINDOW_MS,
        to: stats.lastSeenMs + 1,
        indexedKeys: m.indexedContextKeys,
      };
      await time(keep ? samples.factors : null, () => issueFactors(engine, b.dataDir, scope, q));
      if (keep) byIssue[i]!.push(samples.factors.at(-1)!);
      await time(keep ? samples.representative : null, () =>
        findExecution(engine, b.dataDir, scope, stats.lastExecutionId),
      );
      await time(keep ? samples.comments : null, () => control.issues.comments(m.workspaceId, m.mode, id));
      await time(keep ? samples.route : null, async () => {
        const st = await oneIssueStats(engine, b.dataDir, scope, id, Date.now());
        await Promise.all([
          issueFactors(engine, b.dataDir, scope, q),
          findExecution(engine, b.dataDir, scope, st!.lastExecutionId),
          control.issues.comments(m.workspaceId, m.mode, id),
        ]);
      });
    }
  }
  return {
    parts: {
      stats: summarize(samples.stats),
      factors: summarize(samples.factors),
      representative: summarize(samples.representative),
      comments: summarize(samples.comments),
      route: summarize(samples.route),
    },
    factorsByIssue: byIssue.map((t) => summarize(t).p50),
  };
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
  /** The run number of each measured sample (a detail's sample is of the id that run looked up). */
  samples: { layer: number[]; raw: number[]; runs: number[] };
  /** EXPLAIN ANALYZE of the raw statements, with --explain. */
  plans: string[];
}

async function timed(fn: () => Promise<Answer>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

/**
 * Both sides get the same warm-up; the measured runs alternate between the sides, swapping which goes first, so
 * drift on a noisy machine hits both alike.
 */
async function measure(s: Scenario, o: Options): Promise<Measured> {
  const sides = await s.open();
  try {
    let run = 0;
    const first = await sides.measured(run);
    const firstRaw = await sides.raw(run);
    run++;
    if (!sameAnswer(first, firstRaw))
      throw new Error(
        `${s.key}: the measured side and the raw SQL disagree (${first.total} vs ${firstRaw.total} rows)`,
      );
    // Every query is built to match: none means the files are not what the generator writes (a stale cache
    // from an older generator, or indexed-context columns missing), and timing it would mean nothing.
    if (first.total === 0)
      throw new Error(`${s.key}: nothing matched; delete the data directory to generate the dataset again`);
    for (let w = 1; w < o.warmup; w++, run++) {
      await sides.measured(run);
      await sides.raw(run);
    }
    const layer: number[] = [];
    const raw: number[] = [];
    const runs: number[] = [];
    for (let i = 0; i < o.runs; i++, run++) {
      const r = run;
      runs.push(r);
      if (i % 2 === 0) {
        layer.push(await timed(() => sides.measured(r)));
        raw.push(await timed(() => sides.raw(r)));
      } else {
        raw.push(await timed(() => sides.raw(r)));
        layer.push(await timed(() => sides.measured(r)));
      }
    }
    const plans: string[] = [];
    if (o.explain) {
      for (const st of await sides.statements(0)) {
        const rows = await sides.rawEngine.all(`EXPLAIN ANALYZE ${st.sql}`, st.params);
        plans.push(rows.map((r) => String(r.explain_value)).join('\n'));
      }
    }
    const l = summarize(layer);
    const rw = summarize(raw);
    return {
      layer: l,
      raw: rw,
      ratio: l.p50 / rw.p50,
      total: first.total,
      samples: { layer, raw, runs },
      plans,
    };
  } finally {
    sides.close();
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
    const params = {
      executions: o.executions,
      hours: o.hours,
      seed: o.seed,
      ...(o.spanIds ? { ids: 'span' as const } : {}),
    };
    process.stdout.write(
      `dataset: ${fmt(o.executions)} executions over ${o.hours} h${o.spanIds ? ' with span ids' : ''}, seed ${o.seed}, in ${dataDir}\n`,
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
        `${fmt(g.logs)} logs, ${fmt(g.logParquetBytes / 2 ** 20, 1)} MiB\n`,
    );
    // Measured now, as compacted by this build (a reused dataset's marker has the sizes of its generation).
    const disk: Record<string, DiskParts & { bytesPerExecution: number }> = {};
    for (const dataset of ['executions', 'logs']) {
      const parts = await diskParts(dataDir, dataset);
      const sum = totalBytes(parts);
      disk[dataset] = { ...parts, bytesPerExecution: sum / o.executions };
      const per = (n: number) => fmt(n / o.executions, 1);
      process.stdout.write(
        `  ${dataset} on disk: ${per(sum)} B per execution = hour files ${per(parts.hourFiles)} + by-id copies ` +
          `${per(parts.byIdCopies)} + id filters ${per(parts.idFilters)} + rollups ${per(parts.rollups)} + per-minute rollups ${per(parts.minutes)} + ` +
          `manifests ${per(parts.other)}\n`,
      );
    }
    process.stdout.write('\n');

    const wanted = (key: string) =>
      o.only === null || o.only.some((k) => key === k || key.startsWith(`${k}:`));
    const all = await buildScenarios(dataDir, marker);
    const keys = [...all.map((s) => s.key), ...ISSUE_KEYS];
    const unknown = (o.only ?? []).filter((k) => !keys.some((key) => key === k || key.startsWith(`${k}:`)));
    if (unknown.length > 0) throw new Error(`--only: no query ${unknown.join(', ')}`);
    const scenarios = all.filter((s) => wanted(s.key));

    const results: Record<string, Measured & { label: string; files: number; targetP95Ms: number | null }> =
      {};
    const runAll = async (list: Scenario[]) => {
      for (const s of list) {
        process.stdout.write(`  ${s.label} …`);
        const m = await measure(s, o);
        results[s.key] = { label: s.label, files: s.files, targetP95Ms: s.targetP95Ms, ...m };
        process.stdout.write(` p50 ${fmt(m.layer.p50, 1)} ms\n`);
        for (const plan of m.plans) process.stdout.write(`\n${plan}\n\n`);
      }
    };
    // The execution queries first, before the service (its pipeline's threads, its broker) is started.
    await runAll(scenarios);

    let bench: BenchService | null = null;
    let sample: SampledIssue[] = [];
    let parts: DetailParts | null = null;
    if (ISSUE_KEYS.some(wanted)) {
      const occurrences = await readIssueOccurrences(dataDir);
      const sizes = occurrences.map((i) => i.count);
      process.stdout.write(
        `\nissues: ${fmt(marker.failures)} failures (${fmt((100 * marker.failures) / marker.params.executions, 2)} % ` +
          `of the executions) in ${fmt(occurrences.length)} issues; biggest ${sizes
            .slice(0, 5)
            .map((n) => fmt(n))
            .join(', ')}; median ${fmt(quantile([...sizes].reverse(), 0.5) ?? 0)}; ` +
          `${sizes.filter((n) => n === 1).length} with one\n`,
      );
      bench = await startBenchService(dataDir, marker, occurrences);
      try {
        process.stdout.write(
          `  service and nats-server started, workspace, owner and ${fmt(occurrences.length)} issue records made ` +
            `(records ${fmt(bench.setup.recordSeconds, 1)} s, all ${fmt(bench.setup.seconds, 1)} s); logged in over HTTP\n`,
        );
        const b = bench;
        sample = await Promise.all(
          sampleRanks(occurrences.length, ISSUE_SAMPLE).map((r) => sampleIssue(b, r)),
        );
        await verifyIssues(bench, sample);
        process.stdout.write(
          '  answers checked: every issue listed once with its generated occurrences, summing to the failures; ' +
            'sort orders; the sampled details (count, representative execution, common factors as the raw SQL gives)\n',
        );
        const issueScenarios = [
          issueListScenario(
            bench,
            'issues-list',
            `GET /api/issues: ${fmt(occurrences.length)} issues, 50 a page, sort -lastSeenAt`,
            'pageSize=50',
          ),
          issueListScenario(
            bench,
            'issues-list:occurrences',
            'GET /api/issues?sort=-occurrences, 50 a page',
            'pageSize=50&sort=-occurrences',
          ),
          issueDetailScenario(bench, sample),
        ].filter((s) => wanted(s.key));
        await runAll(issueScenarios);
        scenarios.push(...issueScenarios);
        if (wanted('issue-detail')) parts = await detailParts(bench, sample, o);
      } finally {
        await bench.stop();
      }
    }

    const misses: string[] = [];
    const rows = scenarios.map((s) => {
      const r = results[s.key]!;
      const verdicts: string[] = [];
      if (s.targetP95Ms !== null && r.layer.p95 > s.targetP95Ms) verdicts.push(`p95 > ${s.targetP95Ms} ms`);
      // Over HTTP the ratio is the whole service's cost over the statements' (routing, auth, records, JSON):
      // reported, not held to the query layer's bound.
      if (s.via === 'layer' && r.ratio > MAX_RATIO) verdicts.push(`ratio > ${MAX_RATIO}`);
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
      `\n${o.runs} runs after ${o.warmup} warm-up runs each; ratio = measured p50 / raw p50 (target ≤ ${MAX_RATIO} ` +
        'for the query layer).\nExecution queries: in process through query/executions.ts. Issue queries: over HTTP ' +
        'with a session, against the service started in this process; raw = the failures aggregate (list), one ' +
        "issue's statistics then its common factors statement (detail).\n",
    );
    const detail = results['issue-detail'];
    if (parts && detail) {
      const p = parts.parts;
      const line = (name: string, x: Summary) => [name, fmt(x.p50, 1), fmt(x.p95, 1)];
      process.stdout.write(
        `\nGET /api/issues/{id}, its parts alone (in process, ${parts.factorsByIssue.length} issues):\n${table(
          ['part', 'p50 ms', 'p95 ms'],
          [
            line('statistics (oneIssueStats, failures)', p.stats),
            line('common factors (issueFactors, executions)', p.factors),
            line('representative execution (findExecution)', p.representative),
            line('comments (NATS KV history)', p.comments),
            line('all, as the route: statistics, then the rest at once', p.route),
          ],
        )}\n`,
      );
      const httpByIssue = sample.map(
        (_, i) =>
          summarize(
            detail.samples.layer.filter((_, j) => sampledFor(sample, detail.samples.runs[j]!) === sample[i]),
          ).p50,
      );
      process.stdout.write(
        `\nGET /api/issues/{id} by issue:\n${table(
          [
            'issue (rank by size)',
            'occurrences',
            'baseline rows',
            'factors',
            'HTTP p50',
            'factors p50',
            'title',
          ],
          sample.map((s, i) => [
            `${s.occurrences.issueId} (#${s.rank + 1})`,
            fmt(s.occurrences.count),
            fmt(s.baseline),
            `${s.expectedFactors.length}`,
            fmt(httpByIssue[i]!, 1),
            fmt(parts!.factorsByIssue[i]!, 1),
            s.occurrences.title,
          ]),
        )}\n`,
      );
    }

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
      http: bench
        ? {
            how: 'in-process service (role start) with its own nats-server; GET with a session from POST /api/auth/login',
            setupSeconds: bench.setup.seconds,
            recordOccurrencesSeconds: bench.setup.recordSeconds,
          }
        : null,
      issues: bench
        ? {
            failures: marker.failures,
            issues: marker.issues,
            sample: sample.map((s) => ({
              issueId: s.occurrences.issueId,
              rank: s.rank,
              occurrences: s.occurrences.count,
              baselineRows: s.baseline,
              commonFactors: s.expectedFactors,
              title: s.occurrences.title,
            })),
            detailParts: parts,
          }
        : null,
      queries: results,
      disk,
      targets: {
        serviceContextP95Ms: 50,
        detailP95Ms: 20,
        issuesListP95Ms: 50,
        issueDetailP95Ms: 150,
        maxRatio: MAX_RATIO,
      },
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
