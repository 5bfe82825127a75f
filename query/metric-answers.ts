import { validationError } from '../schemas/errors.js';
import { type ENDPOINT_SORTS, INTERVAL_NAMES, type TIMESERIES_METRICS } from '../schemas/metrics.js';
import type { HealthThresholds } from '../schemas/settings.js';
import type { QueryEngine } from '../storage/duckdb.js';
import { mergeInto, sketchOfMap, sketchQuantiles } from '../storage/sketch.js';
import { type PointQuantiles, pointQuantiles } from './metric-quantiles.js';
import { type AggregateQuery, aggregate, type Cell, type GroupField, type MetricFilter } from './metrics.js';

/**
 * The answers of `/api/metrics/overview`, `/timeseries` and `/endpoints` (CONTRACT §8), from the cells of
 * query/metrics.ts. Percentiles come from the latency sketches (`"percentiles": "sketch"`, within 1 %); a
 * timeseries' in buckets under an hour from query/metric-quantiles.ts: swept from the per-minute sketches, or
 * computed exactly (`"exact"`) when no rollup answers it.
 */

export const INTERVALS: Record<Interval, number> = {
  '1m': 60_000,
  '5m': 300_000,
  '15m': 900_000,
  '1h': 3_600_000,
  '1d': 86_400_000,
};
export type Interval = (typeof INTERVAL_NAMES)[number];
const DEFAULT_MAX_POINTS = 300;
const MAX_POINTS = 1500;
const TOP_GROUPS = 10;
export const OTHER_GROUP = '__other__';
const MINUTE_MS = 60_000;

export type TimeseriesMetric = (typeof TIMESERIES_METRICS)[number];

const iso = (ms: number) => new Date(ms).toISOString();

/** The buckets' starts: UTC multiples of the interval, the first holding `from`, the last starting before `to`. */
export function bucketStarts(from: number, to: number, intervalMs: number): number[] {
  const out: number[] = [];
  for (let t = Math.floor(from / intervalMs) * intervalMs; t < to; t += intervalMs) out.push(t);
  return out;
}

const pointCount = (from: number, to: number, intervalMs: number) =>
  Math.ceil((to - Math.floor(from / intervalMs) * intervalMs) / intervalMs);

/**
 * The interval asked for, checked (at most MAX_POINTS points, else a VALIDATION_ERROR naming a coarser one that
 * fits), or the default: the finest giving at most 300 points, else `1d`. A range that even `1d` cuts into more than
 * MAX_POINTS is refused on `from` (1,500 days; and a range may not start before 1970, so its previous period is a
 * date too).
 */
export function resolveInterval(from: number, to: number, asked: Interval | undefined): Interval {
  checkRange(from, to);
  if (asked === undefined)
    return INTERVAL_NAMES.find((i) => pointCount(from, to, INTERVALS[i]) <= DEFAULT_MAX_POINTS) ?? '1d';
  const points = pointCount(from, to, INTERVALS[asked]);
  if (points > MAX_POINTS) {
    const coarser = INTERVAL_NAMES.find((i) => pointCount(from, to, INTERVALS[i]) <= MAX_POINTS)!;
    throw validationError(
      `interval ${asked} gives ${points} points, more than ${MAX_POINTS}; use ${coarser} or coarser`,
      [{ path: 'interval', message: `${points} points, at most ${MAX_POINTS}; use ${coarser} or coarser` }],
    );
  }
  return asked;
}

/** The bounds every metrics range keeps (resolveInterval). */
export function checkRange(from: number, to: number): void {
  if (from < 0)
    throw validationError('metrics start in 1970 or later', [{ path: 'from', message: 'before 1970' }]);
  if (pointCount(from, to, INTERVALS['1d']) > MAX_POINTS) {
    throw validationError(`the range spans more than ${MAX_POINTS} days; narrow from/to`, [
      { path: 'from', message: `at most ${MAX_POINTS} days before to` },
    ]);
  }
}

interface Latency {
  avg: number | null;
  p50: number | null;
  p95: number | null;
  p99: number | null;
}

function latencyOf(c: Pick<Cell, 'requests' | 'durationSum' | 'sketch'>): Latency {
  const [p50, p95, p99] = sketchQuantiles(sketchOfMap(c.sketch), [0.5, 0.95, 0.99]);
  return {
    avg: c.requests > 0 ? c.durationSum / c.requests : null,
    p50: p50 ?? null,
    p95: p95 ?? null,
    p99: p99 ?? null,
  };
}

export type Health = 'healthy' | 'degraded' | 'critical';

/** Either figure at or over a level reaches it. */
export function healthOf(failureRate: number, p95: number | null, t: HealthThresholds): Health {
  const reaches = (level: HealthThresholds['degraded']) =>
    failureRate >= level.failureRate || (p95 !== null && p95 >= level.p95Ms);
  return reaches(t.critical) ? 'critical' : reaches(t.degraded) ? 'degraded' : 'healthy';
}

const shifted = (f: MetricFilter): MetricFilter => ({ ...f, from: 2 * f.from - f.to, to: f.from });

/** Adds cell `c`'s figures into `into`. */
function addCell(into: Cell, c: Cell): void {
  into.requests += c.requests;
  into.failed += c.failed;
  into.durationSum += c.durationSum;
  if (c.sketch.size > 0) mergeInto(into.sketch, c.sketch);
}

const emptyCell = (t: number, group: (string | null)[]): Cell => ({
  t,
  group,
  requests: 0,
  failed: 0,
  durationSum: 0,
  sketch: new Map(),
});

// ---- overview ----

export async function overview(
  engine: QueryEngine,
  dataDir: string,
  filter: MetricFilter,
  thresholds: HealthThresholds,
) {
  const minutes = (filter.to - filter.from) / MINUTE_MS;
  const q = (f: MetricFilter): AggregateQuery => ({
    filter: f,
    intervalMs: null,
    groupBy: ['service'],
    sketches: true,
  });
  const [now, before] = await Promise.all([
    aggregate(engine, dataDir, q(filter)),
    aggregate(engine, dataDir, q(shifted(filter))),
  ]);
  const figures = (c: Cell) => ({
    requests: c.requests,
    throughputPerMin: c.requests / minutes,
    failed: c.failed,
    failureRate: c.requests > 0 ? c.failed / c.requests : 0,
    latency: latencyOf(c),
  });
  const previous = new Map(before.map((c) => [c.group[0], c]));
  const services = now
    .sort((a, b) => b.requests - a.requests || String(a.group[0]).localeCompare(String(b.group[0])))
    .map((c) => {
      const f = figures(c);
      return {
        service: c.group[0] as string,
        ...f,
        health: healthOf(f.failureRate, f.latency.p95, thresholds),
        previous: figures(previous.get(c.group[0]) ?? emptyCell(0, c.group)),
      };
    });
  return { from: iso(filter.from), to: iso(filter.to), percentiles: 'sketch' as const, services };
}

// ---- timeseries ----

function metricValue(metric: TimeseriesMetric, c: Cell, intervalMs: number): number | null {
  switch (metric) {
    case 'requests':
      return c.requests;
    case 'failures':
      return c.failed;
    case 'throughput':
      return c.requests / (intervalMs / MINUTE_MS);
    case 'failure_rate':
      return c.requests > 0 ? c.failed / c.requests : null;
    case 'latency_avg':
      return c.requests > 0 ? c.durationSum / c.requests : null;
    case 'latency_p50':
      return latencyOf(c).p50;
    case 'latency_p95':
      return latencyOf(c).p95;
    case 'latency_p99':
      return latencyOf(c).p99;
  }
}

interface Series {
  group: Record<string, string | null>;
  points: { t: string; value: number | null }[];
}

/** The groups a series is drawn for: the top 10 by requests over the range (all when not grouped: one, null). */
function topGroups(cells: Cell[], groupBy: GroupField | undefined): (string | null)[] {
  if (groupBy === undefined) return [null];
  const totals = new Map<string | null, number>();
  for (const c of cells) totals.set(c.group[0] ?? null, (totals.get(c.group[0] ?? null) ?? 0) + c.requests);
  return [...totals]
    .sort((a, b) => b[1] - a[1] || String(a[0]).localeCompare(String(b[0])))
    .slice(0, TOP_GROUPS)
    .map(([g]) => g);
}

const QUANTILE_INDEX: Partial<Record<TimeseriesMetric, number>> = {
  latency_p50: 0,
  latency_p95: 1,
  latency_p99: 2,
};

/**
 * Per group of `groups`, and one `__other__` for the rest when there are any, a point for every bucket. Latency
 * quantiles come from `perPoint` when given (query/metric-quantiles.ts), else from the cells' sketches.
 */
function seriesOf(
  cells: Cell[],
  metric: TimeseriesMetric,
  groupBy: GroupField | undefined,
  starts: number[],
  intervalMs: number,
  groups: readonly (string | null)[],
  perPoint: PointQuantiles | null,
): Series[] {
  const kept = new Set(groups);
  const groupOf = (c: Cell) =>
    groupBy === undefined ? null : kept.has(c.group[0] ?? null) ? (c.group[0] ?? null) : OTHER_GROUP;
  const keys = cells.some((c) => groupOf(c) === OTHER_GROUP) ? [...groups, OTHER_GROUP] : [...groups];
  // Per group, per bucket index: the cell, merged when several fold into one (__other__).
  const index = new Map(starts.map((t, i) => [t, i]));
  const byGroup = new Map(keys.map((g) => [g, new Array<Cell | undefined>(starts.length)]));
  for (const c of cells) {
    const g = groupOf(c);
    const at = byGroup.get(g)!;
    const i = index.get(c.t);
    if (i === undefined) continue;
    const there = at[i];
    if (!there) at[i] = c;
    else {
      // Merged into a cell of its own (the cells are the caller's).
      const merged = there.group[0] === g && g === OTHER_GROUP ? there : emptyCell(c.t, [g]);
      if (merged !== there) addCell(merged, there);
      addCell(merged, c);
      at[i] = merged;
    }
  }
  const isoOf = starts.map(iso);
  const quantile = QUANTILE_INDEX[metric];
  const empty = metricValue(metric, emptyCell(0, []), intervalMs);
  return keys.map((g) => {
    const at = byGroup.get(g)!;
    const quantiles = perPoint && quantile !== undefined ? perPoint.get(g) : undefined;
    return {
      group: groupBy === undefined ? {} : { [groupBy]: g },
      points: starts.map((_, i) => {
        let value: number | null;
        if (quantiles) {
          const v = quantiles[i * 3 + quantile!]!;
          value = Number.isNaN(v) ? null : v;
        } else {
          const cell = at[i];
          value = cell ? metricValue(metric, cell, intervalMs) : empty;
        }
        return { t: isoOf[i]!, value };
      }),
    };
  });
}

export interface TimeseriesInput {
  filter: MetricFilter;
  metric: TimeseriesMetric;
  interval: Interval;
  groupBy?: GroupField;
  compare: boolean;
}

export async function timeseries(engine: QueryEngine, dataDir: string, i: TimeseriesInput) {
  const intervalMs = INTERVALS[i.interval];
  const quantiles = QUANTILE_INDEX[i.metric] !== undefined;
  // Percentiles per bucket under an hour are worked out per point (query/metric-quantiles.ts); the cells then only
  // choose the groups, so they are the range's totals.
  const perPoint = quantiles && intervalMs < INTERVALS['1h'];
  const q = (f: MetricFilter): AggregateQuery => ({
    filter: f,
    intervalMs,
    groupBy: i.groupBy ? [i.groupBy] : [],
    sketches: quantiles && !perPoint,
  });
  const cellsOf = (f: MetricFilter) =>
    aggregate(engine, dataDir, perPoint ? { ...q(f), intervalMs: null } : q(f));
  let exact = perPoint;
  const period = async (f: MetricFilter, cells: Promise<Cell[]>, keep: readonly (string | null)[] | null) => {
    const groups = keep ?? topGroups(await cells, i.groupBy);
    let points: PointQuantiles | null = null;
    if (perPoint) {
      const p = await pointQuantiles(engine, dataDir, q(f), i.groupBy ? groups : null, OTHER_GROUP);
      exact &&= p.exact;
      points = p.values;
    }
    const starts = bucketStarts(f.from, f.to, intervalMs);
    return { groups, series: seriesOf(await cells, i.metric, i.groupBy, starts, intervalMs, groups, points) };
  };
  const previousFilter = shifted(i.filter);
  // Both periods' cells at once; the previous one's series wait for the current one's groups.
  const previousCells = i.compare ? cellsOf(previousFilter) : null;
  // Awaited below; until then a failure of it must not go unhandled if the current period fails first.
  previousCells?.catch(() => {});
  const current = await period(i.filter, cellsOf(i.filter), null);
  // The previous period keeps the current one's groups, so the two compare line by line.
  const previous = previousCells ? await period(previousFilter, previousCells, current.groups) : null;
  return {
    metric: i.metric,
    interval: i.interval,
    // Exact only when every point of both periods is.
    percentiles: exact ? ('exact' as const) : ('sketch' as const),
    from: iso(i.filter.from),
    to: iso(i.filter.to),
    series: current.series,
    ...(previous && {
      previous: { from: iso(previousFilter.from), to: iso(previousFilter.to), series: previous.series },
    }),
  };
}

// ---- endpoints ----

export type EndpointSort = (typeof ENDPOINT_SORTS)[number];

export async function endpoints(
  engine: QueryEngine,
  dataDir: string,
  filter: MetricFilter,
  sort: EndpointSort,
  limit: number,
) {
  const cells = await aggregate(engine, dataDir, {
    filter,
    intervalMs: null,
    groupBy: ['service', 'method', 'endpoint'],
    sketches: true,
  });
  const rows = cells.map((c) => {
    const l = latencyOf(c);
    return {
      service: c.group[0] as string,
      method: c.group[1] ?? null,
      endpoint: c.group[2] as string,
      requests: c.requests,
      failureRate: c.requests > 0 ? c.failed / c.requests : 0,
      p50: l.p50,
      p95: l.p95,
      p99: l.p99,
    };
  });
  const key: Record<EndpointSort, (r: (typeof rows)[number]) => number> = {
    requests: (r) => r.requests,
    failure_rate: (r) => r.failureRate,
    p95: (r) => r.p95 ?? Number.NEGATIVE_INFINITY,
    p99: (r) => r.p99 ?? Number.NEGATIVE_INFINITY,
  };
  const data = rows
    .sort(
      (a, b) =>
        key[sort](b) - key[sort](a) ||
        b.requests - a.requests ||
        `${a.service} ${a.method} ${a.endpoint}`.localeCompare(`${b.service} ${b.method} ${b.endpoint}`),
    )
    .slice(0, limit);
  return { from: iso(filter.from), to: iso(filter.to), percentiles: 'sketch' as const, data };
}
