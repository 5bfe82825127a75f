import path from 'node:path';
import type { GROUP_FIELDS } from '../schemas/metrics.js';
import type { Mode } from '../schemas/records.js';
import { HOUR_MS, MINUTE_MS } from '../schemas/time.js';
import type { BuiltQuery, QueryEngine, Row, SqlParam } from '../storage/duckdb.js';
import { listSidecarsAndFiles, partitionHourOf } from '../storage/layout.js';
import { isFinalMerge } from '../storage/manifest.js';
import { MINUTE_KIND } from '../storage/minutes.js';
import { endpointTemplateSql, ID_SEGMENT } from '../storage/rollup.js';
import { addRollups, Cells, type RollupRead } from './metric-cells.js';
import { minutesCacheOf, RAW_KIND } from './minutes-cache.js';

/**
 * The read side of the execution metrics (CONTRACT §8): counts and duration sums per time bucket and group (the
 * latency quantiles: query/metric-quantiles.ts, from the same sources), from the per-minute rollups beside the merged executions files (storage/minutes.ts) and, for what they
 * do not cover (the newest files, not merged yet, and the parts of a minute cut by `from` or `to`), from the
 * executions themselves, folded the same way: so a figure is as fresh as the executions list and agrees with its
 * `total` for the same range and filters.
 *
 * Endpoints are grouped by their template (`/orders/:id`), as issues are: grouping by the endpoint as sent would
 * make one group per id.
 */

export type GroupField = (typeof GROUP_FIELDS)[number];

export interface MetricFilter {
  workspaceId: string;
  mode: Mode;
  from: number;
  to: number;
  service?: string;
  environment?: string;
  method?: string;
  /** As in the executions list: exact, or a prefix (`/orders/*`). */
  endpoint?: { kind: 'eq' | 'prefix'; value: string };
  issueId?: string;
}

export interface AggregateQuery {
  filter: MetricFilter;
  /** The time buckets' length (ms), aligned to UTC multiples of it; null: the whole range is one bucket. */
  intervalMs: number | null;
  groupBy: readonly GroupField[];
}

/** One time bucket of one group: its counts (the latency quantiles come from query/metric-quantiles.ts). */
export interface Cell {
  /** The bucket's start (ms); 0 when the whole range is one bucket. */
  t: number;
  /** The groupBy fields' values, in order. */
  group: (string | null)[];
  requests: number;
  failed: number;
  durationSum: number;
}

const ID_SEGMENT_RE = new RegExp(`^${ID_SEGMENT}$`);

/**
 * Whether an endpoint filter selects, among the rollups' endpoint templates, exactly the executions it selects
 * among endpoints as sent. Exact: when the value is its own template (no id segment, no query string), the
 * executions sent with it are those of its template that were not templated. Prefix: when no segment it covers,
 * nor the partial one it ends in, could be or start an id, and it holds no `:` (which `:id` could stand for) and no
 * query string: then an endpoint starts with it exactly when its template does.
 */
export function rollupsCanFilter(endpoint: NonNullable<MetricFilter['endpoint']>): boolean {
  const v = endpoint.value;
  if (v.includes('?') || v.includes('#')) return false;
  const segments = v.split('/');
  if (endpoint.kind === 'eq') return !segments.some((s) => ID_SEGMENT_RE.test(s));
  if (v.includes(':')) return false;
  const partial = segments.pop()!;
  if (segments.some((s) => ID_SEGMENT_RE.test(s))) return false;
  return partial === '' || /[^0-9a-fA-F-]/.test(partial);
}

/** The conditions of the filter (but the time range) on executions. */
export function filterSql(f: MetricFilter, params: Record<string, SqlParam>): string[] {
  const where: string[] = [];
  if (f.service !== undefined) {
    params.service = f.service;
    where.push('service = $service');
  }
  if (f.environment !== undefined) {
    params.environment = f.environment;
    where.push('environment = $environment');
  }
  if (f.method !== undefined) {
    params.method = f.method;
    where.push('method = $method');
  }
  if (f.endpoint) {
    params.endpoint = f.endpoint.value;
    where.push(f.endpoint.kind === 'prefix' ? 'starts_with(endpoint, $endpoint)' : 'endpoint = $endpoint');
  }
  if (f.issueId !== undefined) {
    params.issueId = f.issueId;
    where.push('issue_id = $issueId');
  }
  return where;
}

export const timeSql = (q: AggregateQuery, column: string) =>
  q.intervalMs === null
    ? '0::DOUBLE'
    : `((epoch_ms(${column}) // $interval::BIGINT) * $interval::BIGINT)::DOUBLE`;

const groupSql = (q: AggregateQuery) =>
  q.groupBy.map((g, i) => `${g === 'endpoint' ? endpointTemplateSql('endpoint') : g} AS g${i}`);

const SERVICE_LEVEL: ReadonlySet<GroupField> = new Set(['service', 'environment', 'outcome']);

/** Executions to read: `files` where `time` (a condition on started_at, with its `params`). */
interface RawRead {
  files: string[];
  time: string;
  params: Record<string, SqlParam>;
}

/** What a query reads: executions, and the rollups that hold its counts and its sketches. */
export interface Sources {
  /** Whether rollups are read (else every file is read as executions: no rollup, or a filter they cannot answer). */
  rollups: boolean;
  raw: RawRead[];
  counts: RollupRead[];
  sketch: RollupRead[];
  /** Executions files' rows kept in memory (RAW_KIND): counts and sketches at once. */
  edges: RollupRead[];
}

/** The executions files of a range, with the rollups of those that have one. */
export type Listed = Awaited<ReturnType<typeof listSidecarsAndFiles>>;

/** One listing for a query's counts and quantiles, so both come from the same files. */
export const listFor = (dataDir: string, f: MetricFilter): Promise<Listed> =>
  listSidecarsAndFiles('minutes', dataDir, f.workspaceId, f.mode, f.from, f.to);

/**
 * Where a query's figures come from (from one listing, so counts and sketches come from the same files):
 * - the rollups of the files of the hours wholly in range, at hour resolution, when the buckets are whole hours
 *   (or the whole range): counts of kind 2, sketches of kind 4 when the query needs nothing finer than service,
 *   environment and outcome, else of kind 3;
 * - the rollups of the other covered files at minute resolution (counts of kind 6 at the level of service,
 *   environment and outcome, else of kind 0; sketches of kind 5 at the level of service and environment, else of
 *   kind 1), over their whole minutes in range;
 * - those files themselves over the minutes cut by `from` or `to` (`raw`);
 * - the files without rollups (not merged yet), or every file when a filter cannot be answered from rollups (`raw`).
 */
export function planSources(listed: Listed, q: AggregateQuery): Sources {
  const f = q.filter;
  const useRollups =
    listed.sidecars.length > 0 && f.issueId === undefined && (!f.endpoint || rollupsCanFilter(f.endpoint));
  const out: Sources = { rollups: useRollups, raw: [], counts: [], sketch: [], edges: [] };
  const rawRead = (files: string[], time: string, params: Record<string, SqlParam>) => {
    if (files.length > 0) out.raw.push({ files, time, params });
  };
  const whole = 'started_at >= epoch_ms($from::BIGINT) AND started_at < epoch_ms($to::BIGINT)';
  if (!useRollups) {
    rawRead([...listed.files, ...listed.covered], whole, { from: f.from, to: f.to });
    return out;
  }
  rawRead(listed.files, whole, { from: f.from, to: f.to });
  // Hours wholly in range, read at hour resolution when the buckets are whole hours.
  const hourly = q.intervalMs === null || q.intervalMs % HOUR_MS === 0;
  const firstHour = Math.ceil(f.from / HOUR_MS) * HOUR_MS;
  const lastHour = Math.floor(f.to / HOUR_MS) * HOUR_MS;
  const byHour: string[] = [];
  const byMinute: { sidecar: string; file: string; hour: number }[] = [];
  listed.sidecars.forEach((sidecar, i) => {
    const hour = partitionHourOf(sidecar) ?? Number.NaN;
    if (hourly && hour >= firstHour && hour + HOUR_MS <= lastHour) byHour.push(sidecar);
    else byMinute.push({ sidecar, file: listed.covered[i]!, hour });
  });
  const serviceLevel = !f.endpoint && !f.method && q.groupBy.every((g) => SERVICE_LEVEL.has(g));
  const environmentLevel = serviceLevel && !q.groupBy.includes('outcome');
  if (byHour.length > 0) {
    out.counts.push({ sidecars: byHour, kind: MINUTE_KIND.hourCounts });
    out.sketch.push({
      sidecars: byHour,
      kind: serviceLevel ? MINUTE_KIND.serviceHourSketch : MINUTE_KIND.hourSketch,
    });
  }
  if (byMinute.length === 0) return out;
  const firstWhole = Math.ceil(f.from / MINUTE_MS) * MINUTE_MS;
  const lastWhole = Math.floor(f.to / MINUTE_MS) * MINUTE_MS;
  if (firstWhole >= lastWhole) {
    rawRead(
      byMinute.map((m) => m.file),
      whole,
      { from: f.from, to: f.to },
    );
    return out;
  }
  const sidecars = byMinute.map((m) => m.sidecar);
  const minutes = { from: firstWhole, to: lastWhole };
  out.counts.push({ sidecars, kind: serviceLevel ? MINUTE_KIND.serviceCounts : MINUTE_KIND.counts, minutes });
  out.sketch.push({
    sidecars,
    kind: environmentLevel ? MINUTE_KIND.serviceSketch : MINUTE_KIND.sketch,
    minutes,
  });
  // The cut minutes at either end, from the covered files of their hours: the merge that ended its hour from its
  // rows kept in memory (it stays as long as the hour), any other with a statement.
  const hourOf = (ms: number) => Math.floor(ms / HOUR_MS) * HOUR_MS;
  const edge = (hour: number, from: number, to: number, time: string, params: Record<string, SqlParam>) => {
    const files = byMinute.filter((m) => m.hour === hour).map((m) => m.file);
    const sealed = files.filter((file) => isFinalMerge(path.basename(file)));
    if (sealed.length > 0) out.edges.push({ sidecars: sealed, kind: RAW_KIND, minutes: { from, to } });
    rawRead(
      files.filter((file) => !sealed.includes(file)),
      time,
      params,
    );
  };
  if (f.from < firstWhole)
    edge(
      hourOf(f.from),
      f.from,
      firstWhole,
      'started_at >= epoch_ms($from::BIGINT) AND started_at < epoch_ms($firstWhole::BIGINT)',
      { from: f.from, firstWhole },
    );
  if (lastWhole < f.to)
    edge(
      hourOf(lastWhole),
      lastWhole,
      f.to,
      'started_at >= epoch_ms($lastWhole::BIGINT) AND started_at < epoch_ms($to::BIGINT)',
      { lastWhole, to: f.to },
    );
  return out;
}

/** A raw read as a SELECT of `t, g0…, <measures>` over its files, grouped. */
export function rawPart(q: AggregateQuery, read: RawRead, measures: string): BuiltQuery {
  const params: Record<string, SqlParam> = { ...read.params, files: read.files };
  if (q.intervalMs !== null) params.interval = q.intervalMs;
  const where = [read.time, ...filterSql(q.filter, params)];
  return {
    sql: `SELECT ${[`${timeSql(q, 'started_at')} AS t`, ...groupSql(q)].join(', ')}, ${measures}
  FROM read_parquet($files, union_by_name = true, hive_partitioning = false)
  WHERE ${where.join(' AND ')}
  GROUP BY ALL`,
    params,
  };
}

/** The parts as one statement: each part's parameters renamed apart (`$p<k>_<name>`). */
export function union(parts: BuiltQuery[], outer: (inner: string) => string): BuiltQuery {
  const params: Record<string, SqlParam> = {};
  const sqls = parts.map((p, k) => {
    for (const [name, v] of Object.entries(p.params)) params[`p${k}_${name}`] = v;
    return p.sql.replace(/\$([A-Za-z]\w*)/g, (_, name: string) => `$p${k}_${name}`);
  });
  return { sql: outer(sqls.join('\nUNION ALL\n')), params };
}

const groupCols = (q: AggregateQuery) => ['t', ...q.groupBy.map((_, i) => `g${i}`)].join(', ');

/** The cells of a query: counts and duration sums per time bucket and group, from the files of `listed`. */
export async function aggregate(engine: QueryEngine, listed: Listed, q: AggregateQuery): Promise<Cell[]> {
  const cells = new Cells(q.filter.from, q.intervalMs);
  const cache = minutesCacheOf(engine);
  const groupOf = (r: Row) => q.groupBy.map((_, i) => (r[`g${i}`] ?? null) as string | null);
  const plan = planSources(listed, q);
  // The executions no rollup covers, in one statement.
  const measures =
    "count(*)::DOUBLE AS requests, count(*) FILTER (WHERE outcome = 'failed')::DOUBLE AS failed, sum(duration_ms) AS dsum";
  const rawSql =
    plan.raw.length > 0
      ? union(
          plan.raw.map((r) => rawPart(q, r, measures)),
          (inner) => `SELECT ${groupCols(q)}, sum(requests)::DOUBLE AS requests,
  sum(failed)::DOUBLE AS failed, coalesce(sum(dsum), 0)::DOUBLE AS dsum
FROM (${inner}) GROUP BY ALL`,
        )
      : null;
  const [rawRows] = await Promise.all([
    rawSql ? engine.all(rawSql.sql, rawSql.params) : Promise.resolve([] as Row[]),
    ...[...plan.counts, ...plan.edges].map((r) => addRollups(cache, q, r, cells)),
  ]);
  for (const r of rawRows) {
    cells.add(
      cells.at(cells.groupId(groupOf(r)), Number(r.t)),
      Number(r.requests),
      Number(r.failed),
      Number(r.dsum),
    );
  }
  return cells.done();
}
