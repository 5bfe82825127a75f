import type { Mode } from '../schemas/records.js';
import type { QueryEngine, Row, SqlParam } from '../storage/duckdb.js';
import { listPartitionFiles, listSidecarsAndFiles, partitionHourOf } from '../storage/layout.js';
import { MINUTE_KIND } from '../storage/minutes.js';
import { endpointTemplateSql, ID_SEGMENT } from '../storage/rollup.js';
import { bucketSql } from '../storage/sketch.js';

/**
 * The read side of the execution metrics (CONTRACT §8): counts, duration sums and latency sketches per time bucket
 * and group, from the per-minute rollups beside the merged executions files (storage/minutes.ts) and, for what they
 * do not cover (the newest files, not merged yet, and the parts of a minute cut by `from` or `to`), from the
 * executions themselves, folded the same way: so a figure is as fresh as the executions list and agrees with its
 * `total` for the same range and filters.
 *
 * Endpoints are grouped by their template (`/orders/:id`), as issues are: grouping by the endpoint as sent would
 * make one group per id.
 */

export type GroupField = 'service' | 'endpoint' | 'method' | 'environment' | 'outcome';
export const GROUP_FIELDS: readonly GroupField[] = [
  'service',
  'endpoint',
  'method',
  'environment',
  'outcome',
];

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
  /** Also the latency sketches (for percentiles). */
  sketches: boolean;
}

/** One time bucket of one group. */
export interface Cell {
  /** The bucket's start (ms); 0 when the whole range is one bucket. */
  t: number;
  /** The groupBy fields' values, in order. */
  group: (string | null)[];
  requests: number;
  failed: number;
  durationSum: number;
  /** Latency sketch bucket → executions (storage/sketch.ts); empty when not asked for. */
  sketch: Map<number, number>;
}

const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;
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

interface Part {
  sql: string;
  params: Record<string, SqlParam>;
}

/** The conditions of the filter (but the time range) on rollup rows (`rollup`) or on executions. */
function filterSql(f: MetricFilter, rollup: boolean, params: Record<string, SqlParam>): string[] {
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
    if (f.endpoint.kind === 'prefix') where.push('starts_with(endpoint, $endpoint)');
    else where.push(rollup ? 'endpoint = $endpoint AND NOT templated' : 'endpoint = $endpoint');
  }
  if (f.issueId !== undefined) {
    params.issueId = f.issueId;
    where.push('issue_id = $issueId');
  }
  return where;
}

const timeSql = (q: AggregateQuery, column: string) =>
  q.intervalMs === null
    ? '0::DOUBLE'
    : `((epoch_ms(${column}) // $interval::BIGINT) * $interval::BIGINT)::DOUBLE`;

const groupSql = (q: AggregateQuery, rollup: boolean) =>
  q.groupBy.map((g, i) => `${g === 'endpoint' && !rollup ? endpointTemplateSql('endpoint') : g} AS g${i}`);

const SERVICE_LEVEL: ReadonlySet<GroupField> = new Set(['service', 'environment', 'outcome']);

/**
 * The statement's sources, each a SELECT of `t, g0…, <measures>` grouped:
 * - the rollups of the files of the hours wholly in range, at hour resolution, when the buckets are whole hours
 *   (or the whole range): counts of kind 2, sketches of kind 4 when the query needs nothing finer than service,
 *   environment and outcome, else of kind 3;
 * - the rollups of the other covered files at minute resolution (kinds 0, 1), over their whole minutes in range;
 * - those files themselves over the minutes cut by `from` or `to`;
 * - the files without rollups (not merged yet), or every file when a filter cannot be answered from rollups.
 */
async function sources(
  dataDir: string,
  q: AggregateQuery,
  measure: 'counts' | 'sketch',
  measures: { rollup: string; raw: string },
): Promise<Part[]> {
  const f = q.filter;
  const listed = await listSidecarsAndFiles('minutes', dataDir, f.workspaceId, f.mode, f.from, f.to);
  const useRollups =
    listed.sidecars.length > 0 && f.issueId === undefined && (!f.endpoint || rollupsCanFilter(f.endpoint));
  const base: Record<string, SqlParam> = q.intervalMs === null ? {} : { interval: q.intervalMs };
  const parts: Part[] = [];
  const group = (rollup: boolean) => [
    `${timeSql(q, rollup ? 'minute' : 'started_at')} AS t`,
    ...groupSql(q, rollup),
  ];
  const rawPart = (files: string[], time: string, extra: Record<string, SqlParam>) => {
    if (files.length === 0) return;
    const params: Record<string, SqlParam> = { ...base, ...extra, files };
    const where = [time, ...filterSql(f, false, params)];
    parts.push({
      sql: `SELECT ${group(false).join(', ')}, ${measures.raw}
  FROM read_parquet($files, union_by_name = true, hive_partitioning = false)
  WHERE ${where.join(' AND ')}
  GROUP BY ALL`,
      params,
    });
  };
  const rollupPart = (sidecars: string[], kind: number, time: string[], extra: Record<string, SqlParam>) => {
    if (sidecars.length === 0) return;
    const params: Record<string, SqlParam> = { ...base, ...extra, sidecars };
    const where = [`kind = ${kind}`, ...time, ...filterSql(f, true, params)];
    parts.push({
      sql: `SELECT ${group(true).join(', ')}, ${measures.rollup}
  FROM read_parquet($sidecars, hive_partitioning = false)
  WHERE ${where.join(' AND ')}
  GROUP BY ALL`,
      params,
    });
  };
  const whole = 'started_at >= epoch_ms($from::BIGINT) AND started_at < epoch_ms($to::BIGINT)';
  if (!useRollups) {
    rawPart([...listed.files, ...listed.covered], whole, { from: f.from, to: f.to });
    return parts;
  }
  rawPart(listed.files, whole, { from: f.from, to: f.to });
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
  rollupPart(
    byHour,
    measure === 'counts'
      ? MINUTE_KIND.hourCounts
      : serviceLevel
        ? MINUTE_KIND.serviceHourSketch
        : MINUTE_KIND.hourSketch,
    [],
    {},
  );
  if (byMinute.length === 0) return parts;
  const firstWhole = Math.ceil(f.from / MINUTE_MS) * MINUTE_MS;
  const lastWhole = Math.floor(f.to / MINUTE_MS) * MINUTE_MS;
  if (firstWhole >= lastWhole) {
    rawPart(
      byMinute.map((m) => m.file),
      whole,
      { from: f.from, to: f.to },
    );
    return parts;
  }
  rollupPart(
    byMinute.map((m) => m.sidecar),
    measure === 'counts' ? MINUTE_KIND.counts : MINUTE_KIND.sketch,
    ['minute >= epoch_ms($mFrom::BIGINT)', 'minute < epoch_ms($mTo::BIGINT)'],
    { mFrom: firstWhole, mTo: lastWhole },
  );
  // The cut minutes at either end, from the covered files of their hours.
  const hourOf = (ms: number) => Math.floor(ms / HOUR_MS) * HOUR_MS;
  if (f.from < firstWhole)
    rawPart(
      byMinute.filter((m) => m.hour === hourOf(f.from)).map((m) => m.file),
      'started_at >= epoch_ms($from::BIGINT) AND started_at < epoch_ms($firstWhole::BIGINT)',
      { from: f.from, firstWhole },
    );
  if (lastWhole < f.to)
    rawPart(
      byMinute.filter((m) => m.hour === hourOf(lastWhole)).map((m) => m.file),
      'started_at >= epoch_ms($lastWhole::BIGINT) AND started_at < epoch_ms($to::BIGINT)',
      { lastWhole, to: f.to },
    );
  return parts;
}

/** The parts as one statement: each part's parameters renamed apart (`$p<k>_<name>`). */
function union(parts: Part[], outer: (inner: string) => string): Part {
  const params: Record<string, SqlParam> = {};
  const sqls = parts.map((p, k) => {
    for (const [name, v] of Object.entries(p.params)) params[`p${k}_${name}`] = v;
    return p.sql.replace(/\$([A-Za-z]\w*)/g, (_, name: string) => `$p${k}_${name}`);
  });
  return { sql: outer(sqls.join('\nUNION ALL\n')), params };
}

const groupCols = (q: AggregateQuery) => ['t', ...q.groupBy.map((_, i) => `g${i}`)].join(', ');
const cellKey = (t: number, group: readonly (string | null)[]) =>
  `${t}${group.map((g) => (g === null ? '\u0000' : `\u0001${g}`)).join('')}`;

/** The cells of a query: counts and duration sums, and the sketches when asked for. */
export async function aggregate(engine: QueryEngine, dataDir: string, q: AggregateQuery): Promise<Cell[]> {
  const cells = new Map<string, Cell>();
  const groupOf = (r: Row) => q.groupBy.map((_, i) => (r[`g${i}`] ?? null) as string | null);
  const countParts = await sources(dataDir, q, 'counts', {
    rollup: `sum(count) AS requests, sum(count) FILTER (WHERE outcome = 'failed') AS failed, sum(dsum) AS dsum`,
    raw: `count(*) AS requests, count(*) FILTER (WHERE outcome = 'failed') AS failed, sum(duration_ms) AS dsum`,
  });
  if (countParts.length === 0) return [];
  const counts = union(
    countParts,
    (
      inner,
    ) => `SELECT ${groupCols(q)}, sum(requests)::DOUBLE AS requests, coalesce(sum(failed), 0)::DOUBLE AS failed,
  coalesce(sum(dsum), 0)::DOUBLE AS dsum
FROM (${inner}) GROUP BY ALL`,
  );
  const sketchParts = q.sketches
    ? await sources(dataDir, q, 'sketch', {
        rollup: 'bucket, sum(count) AS c',
        raw: `${bucketSql('duration_ms')} AS bucket, count(*) AS c`,
      })
    : [];
  const sketches =
    sketchParts.length > 0
      ? union(
          sketchParts,
          (
            inner,
          ) => `SELECT ${groupCols(q)}, list(bucket ORDER BY bucket) AS buckets, list(c ORDER BY bucket) AS counts
FROM (SELECT ${groupCols(q)}, bucket, sum(c)::DOUBLE AS c FROM (${inner}) GROUP BY ALL)
GROUP BY ALL`,
        )
      : null;
  const [countRows, sketchRows] = await Promise.all([
    engine.all(counts.sql, counts.params),
    sketches ? engine.all(sketches.sql, sketches.params) : Promise.resolve([] as Row[]),
  ]);
  for (const r of countRows) {
    const group = groupOf(r);
    const t = Number(r.t);
    cells.set(cellKey(t, group), {
      t,
      group,
      requests: Number(r.requests),
      failed: Number(r.failed),
      durationSum: Number(r.dsum),
      sketch: new Map(),
    });
  }
  for (const r of sketchRows) {
    const cell = cells.get(cellKey(Number(r.t), groupOf(r)));
    if (!cell) continue;
    const buckets = r.buckets as number[];
    const counts = r.counts as number[];
    for (let i = 0; i < buckets.length; i++) cell.sketch.set(buckets[i]!, counts[i]!);
  }
  return [...cells.values()];
}

/**
 * Latency quantiles (p50, p95, p99) per time bucket and group computed exactly (`quantile_cont`) over the executions
 * in range: for minute buckets, where the rollups' sketches hold about as many rows as the executions and cost more
 * to merge (24 h of 10M executions, per minute and service: 3.5 s from the sketches, 0.5 s exactly). With one
 * groupBy field, the groups of `kept` are kept and the rest are one, `__other__`.
 */
export async function exactQuantiles(
  engine: QueryEngine,
  dataDir: string,
  q: AggregateQuery,
  kept: readonly (string | null)[] | null,
  other: string,
): Promise<Map<string, [number, number, number]>> {
  const f = q.filter;
  const files = await listPartitionFiles(dataDir, 'executions', f.workspaceId, f.mode, f.from, f.to);
  const out = new Map<string, [number, number, number]>();
  if (files.length === 0) return out;
  const params: Record<string, SqlParam> = { files, from: f.from, to: f.to };
  if (q.intervalMs !== null) params.interval = q.intervalMs;
  const where = [
    'started_at >= epoch_ms($from::BIGINT)',
    'started_at < epoch_ms($to::BIGINT)',
    ...filterSql(f, false, params),
  ];
  let group = 'NULL::VARCHAR';
  const field = q.groupBy[0];
  if (field !== undefined) {
    const g = field === 'endpoint' ? endpointTemplateSql('endpoint') : field;
    if (kept === null) group = `${g}`;
    else {
      params.kept = kept.filter((k): k is string => k !== null);
      params.other = other;
      group = `CASE WHEN ${g} IS NULL THEN ${kept.includes(null) ? 'NULL' : '$other'}
        WHEN list_contains($kept, ${g}) THEN ${g} ELSE $other END`;
    }
  }
  const rows = await engine.all(
    `SELECT ${timeSql(q, 'started_at')} AS t, ${group} AS g, quantile_cont(duration_ms, [0.5, 0.95, 0.99]) AS q
     FROM read_parquet($files, union_by_name = true, hive_partitioning = false)
     WHERE ${where.join(' AND ')}
     GROUP BY ALL`,
    params,
  );
  for (const r of rows)
    out.set(quantileKey(Number(r.t), (r.g ?? null) as string | null), r.q as [number, number, number]);
  return out;
}

export const quantileKey = (t: number, g: string | null) => `${t} ${g === null ? '\u0000' : `=${g}`}`;
