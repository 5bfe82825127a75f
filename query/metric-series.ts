import { validationError } from '../schemas/errors.js';
import type { SERIES_AGGS } from '../schemas/metrics.js';
import type { Mode } from '../schemas/records.js';
import type { QueryEngine, SqlParam } from '../storage/duckdb.js';
import { listPartitionFiles } from '../storage/layout.js';
import { bucketStarts, INTERVALS, type Interval, OTHER_GROUP } from './metric-answers.js';
import { filterSql } from './metrics.js';

/**
 * Custom metric series (CONTRACT §8): the metric points of CONTRACT §5, stored as they came (the `metrics`
 * dataset), aggregated per time bucket in SQL. Counter points are increments (`sum` adds them, `rate` is that
 * sum per second); histogram points merge their `count`, `sum`, `min` and `max`, `avg` being merged sum ÷ merged
 * count. A histogram point carries no buckets, so its `p95` is the 95th percentile of its points' means.
 */

export type SeriesAgg = (typeof SERIES_AGGS)[number];
export type MetricType = 'counter' | 'gauge' | 'histogram';

/** The aggregations each type takes: `p95` gauges and histograms, `rate` counters. */
const AGGS_OF: Record<MetricType, readonly SeriesAgg[]> = {
  counter: ['sum', 'avg', 'min', 'max', 'count', 'rate'],
  gauge: ['sum', 'avg', 'min', 'max', 'count', 'p95'],
  histogram: ['sum', 'avg', 'min', 'max', 'count', 'p95'],
};

/** Per type and aggregation, the bucket's value in SQL; `$seconds` is the bucket's length. */
function aggSql(type: MetricType, agg: SeriesAgg): string {
  if (type === 'histogram') {
    switch (agg) {
      case 'sum':
        return 'sum(hist_sum)';
      case 'count':
        return 'sum(hist_count)';
      case 'min':
        return 'min(hist_min)';
      case 'max':
        return 'max(hist_max)';
      case 'avg':
        return 'sum(hist_sum) / nullif(sum(hist_count), 0)';
      default:
        return 'quantile_cont(hist_sum / nullif(hist_count, 0), 0.95)';
    }
  }
  switch (agg) {
    case 'count':
      return 'count(*)';
    case 'p95':
      return 'quantile_cont(value, 0.95)';
    case 'rate':
      return 'sum(value) / $seconds';
    default:
      return `${agg}(value)`;
  }
}

/** A tag key as a JSON path of the `tags` column (keys are checked against TAG_KEY first). */
export const TAG_KEY = /^[A-Za-z0-9_.:/-]{1,128}$/;
const tagSql = (key: string) => `json_extract_string(tags, '$."${key}"')`;

export interface SeriesInput {
  workspaceId: string;
  mode: Mode;
  from: number;
  to: number;
  name: string;
  agg?: SeriesAgg;
  interval: Interval;
  service?: string;
  environment?: string;
  tags: Record<string, string>;
  groupByTag?: string;
}

const TOP_GROUPS = 10;
const iso = (ms: number) => new Date(ms).toISOString();

export async function series(engine: QueryEngine, dataDir: string, i: SeriesInput) {
  const files = await listPartitionFiles(dataDir, 'metrics', i.workspaceId, i.mode, i.from, i.to);
  const intervalMs = INTERVALS[i.interval];
  const params: Record<string, SqlParam> = { files, name: i.name, from: i.from, to: i.to };
  const where = ['name = $name', 'timestamp >= epoch_ms($from::BIGINT)', 'timestamp < epoch_ms($to::BIGINT)'];
  where.push(...filterSql(i, params));
  Object.entries(i.tags).forEach(([key, value], k) => {
    params[`tag${k}`] = value;
    where.push(`${tagSql(key)} = $tag${k}`);
  });
  const FROM = 'read_parquet($files, union_by_name = true, hive_partitioning = false)';
  const [typed] =
    files.length > 0
      ? await engine.all(
          `SELECT arg_max(type, timestamp) AS type FROM ${FROM} WHERE ${where.join(' AND ')}`,
          params,
        )
      : [];
  const type = (typed?.type ?? null) as MetricType | null;
  const agg = i.agg ?? (type === 'counter' || type === null ? 'sum' : 'avg');
  if (type !== null && !AGGS_OF[type].includes(agg)) {
    throw validationError(`agg ${agg} does not apply to a ${type}`, [
      { path: 'agg', message: `a ${type} takes ${AGGS_OF[type].join(', ')}` },
    ]);
  }
  const starts = bucketStarts(i.from, i.to, intervalMs);
  const empty = agg === 'count' || agg === 'sum' ? 0 : null;
  const groupKey = i.groupByTag;
  const byGroup = new Map<string | null, Map<number, number | null>>();
  if (type !== null) {
    let group = 'NULL::VARCHAR';
    if (groupKey !== undefined) {
      // The top groups by points; the rest are one, __other__.
      const top = await engine.all(
        `SELECT ${tagSql(groupKey)} AS g, count(*)::DOUBLE AS n FROM ${FROM} WHERE ${where.join(' AND ')}
         GROUP BY g ORDER BY n DESC, g NULLS LAST LIMIT ${TOP_GROUPS + 1}`,
        params,
      );
      const kept = top.slice(0, TOP_GROUPS).map((r) => r.g as string | null);
      for (const g of kept) byGroup.set(g, new Map());
      if (top.length > TOP_GROUPS) byGroup.set(OTHER_GROUP, new Map());
      params.kept = kept.filter((g): g is string => g !== null);
      const nullKept = kept.includes(null);
      group = `CASE WHEN ${tagSql(groupKey)} IS NULL THEN ${nullKept ? 'NULL' : `'${OTHER_GROUP}'`}
        WHEN list_contains($kept, ${tagSql(groupKey)}) THEN ${tagSql(groupKey)} ELSE '${OTHER_GROUP}' END`;
    } else byGroup.set(null, new Map());
    const rows = await engine.all(
      `SELECT ((epoch_ms(timestamp) // $interval::BIGINT) * $interval::BIGINT)::DOUBLE AS t, ${group} AS g,
         (${aggSql(type, agg)})::DOUBLE AS v
       FROM ${FROM} WHERE ${where.join(' AND ')} GROUP BY ALL`,
      { ...params, interval: intervalMs, seconds: intervalMs / 1000 },
    );
    for (const r of rows)
      byGroup.get((r.g ?? null) as string | null)?.set(Number(r.t), r.v === null ? null : Number(r.v));
  } else byGroup.set(null, new Map());
  return {
    name: i.name,
    type,
    agg,
    interval: i.interval,
    from: iso(i.from),
    to: iso(i.to),
    series: [...byGroup].map(([g, points]) => ({
      group: groupKey === undefined ? {} : { [groupKey]: g },
      points: starts.map((t) => ({ t: iso(t), value: points.has(t) ? points.get(t)! : empty })),
    })),
  };
}

/** Every metric name with points in the range, with its type and unit (of its latest point). */
export async function metricNames(
  engine: QueryEngine,
  dataDir: string,
  scope: { workspaceId: string; mode: Mode; from: number; to: number },
) {
  const files = await listPartitionFiles(
    dataDir,
    'metrics',
    scope.workspaceId,
    scope.mode,
    scope.from,
    scope.to,
  );
  if (files.length === 0) return { data: [] };
  const rows = await engine.all(
    `SELECT name, arg_max(type, timestamp) AS type, arg_max(unit, timestamp) AS unit,
       epoch_ms(max(timestamp))::DOUBLE AS last_ms
     FROM read_parquet($files, union_by_name = true, hive_partitioning = false)
     WHERE timestamp >= epoch_ms($from::BIGINT) AND timestamp < epoch_ms($to::BIGINT)
     GROUP BY name ORDER BY name`,
    { files, from: scope.from, to: scope.to },
  );
  return {
    data: rows.map((r) => ({
      name: r.name as string,
      type: r.type as MetricType,
      unit: (r.unit ?? null) as string | null,
      lastSeenAt: iso(Number(r.last_ms)),
    })),
  };
}
