import { validationError } from '../schemas/errors.js';
import { type ENDPOINT_SORTS, INTERVAL_NAMES, type TIMESERIES_METRICS } from '../schemas/metrics.js';
import type { HealthThresholds } from '../schemas/settings.js';
import { DAY_MS, HOUR_MS, MINUTE_MS } from '../schemas/time.js';
import type { QueryEngine } from '../storage/duckdb.js';
import { groupKeyOf } from './metric-cells.js';
import { type Grouping, type Quantiles, quantiles } from './metric-quantiles.js';
import {
  type AggregateQuery,
  aggregate,
  type Cell,
  type GroupField,
  type Listed,
  listFor,
  type MetricFilter,
} from './metrics.js';

/**
 * The answers of `/api/metrics/overview`, `/timeseries` and `/endpoints` (CONTRACT §8): counts from the cells of
 * query/metrics.ts, percentiles from query/metric-quantiles.ts, both from one listing of the range's files. The
 * percentiles come from the rollups' latency sketches (`"percentiles": "sketch"`, within 0.54 %), or are computed
 * exactly (`"exact"`) when no rollup answers.
 */

export const INTERVALS: Record<Interval, number> = {
  '1m': 60_000,
  '5m': 300_000,
  '15m': 900_000,
  '1h': HOUR_MS,
  '1d': DAY_MS,
};
export type Interval = (typeof INTERVAL_NAMES)[number];
const DEFAULT_MAX_POINTS = 300;
const MAX_POINTS = 1500;
const TOP_GROUPS = 10;
export const OTHER_GROUP = '__other__';

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

/** The latency of a cell: its average, and its quantiles at `at` in `of` (query/metric-quantiles.ts). */
function latencyOf(c: Cell, of: Quantiles, at = 0): Latency {
  const values = of.byGroup.get(groupKeyOf(c.group))?.values;
  const q = (k: number) => {
    const v = values?.[at + k];
    return v === undefined || Number.isNaN(v) ? null : v;
  };
  return { avg: c.requests > 0 ? c.durationSum / c.requests : null, p50: q(0), p95: q(1), p99: q(2) };
}

export type Health = 'healthy' | 'degraded' | 'critical';

/** Either figure at or over a level reaches it. */
export function healthOf(failureRate: number, p95: number | null, t: HealthThresholds): Health {
  const reaches = (level: HealthThresholds['degraded']) =>
    failureRate >= level.failureRate || (p95 !== null && p95 >= level.p95Ms);
  return reaches(t.critical) ? 'critical' : reaches(t.degraded) ? 'degraded' : 'healthy';
}

const shifted = (f: MetricFilter): MetricFilter => ({ ...f, from: 2 * f.from - f.to, to: f.from });

/** Adds cell `c`'s counts into `into`. */
function addCell(into: Cell, c: Cell): void {
  into.requests += c.requests;
  into.failed += c.failed;
  into.durationSum += c.durationSum;
}

const emptyCell = (t: number, group: (string | null)[]): Cell => ({
  t,
  group,
  requests: 0,
  failed: 0,
  durationSum: 0,
});

/** A query's counts and quantiles, from one listing. */
async function countsAndQuantiles(
  engine: QueryEngine,
  dataDir: string,
  q: AggregateQuery,
  grouping: Grouping,
) {
  const listed = await listFor(dataDir, q.filter);
  const [cells, latency] = await Promise.all([
    aggregate(engine, listed, q),
    quantiles(engine, listed, q, grouping),
  ]);
  return { cells, latency };
}

// ---- overview ----

export async function overview(
  engine: QueryEngine,
  dataDir: string,
  filter: MetricFilter,
  thresholds: HealthThresholds,
) {
  const minutes = (filter.to - filter.from) / MINUTE_MS;
  const q = (f: MetricFilter): AggregateQuery => ({ filter: f, intervalMs: null, groupBy: ['service'] });
  const [now, before] = await Promise.all(
    [filter, shifted(filter)].map((f) => countsAndQuantiles(engine, dataDir, q(f), { kind: 'fields' })),
  );
  const figures = (c: Cell, latency: Quantiles) => ({
    requests: c.requests,
    throughputPerMin: c.requests / minutes,
    failed: c.failed,
    failureRate: c.requests > 0 ? c.failed / c.requests : 0,
    latency: latencyOf(c, latency),
  });
  const previous = new Map(before!.cells.map((c) => [c.group[0], c]));
  const services = now!.cells
    .sort((a, b) => b.requests - a.requests || String(a.group[0]).localeCompare(String(b.group[0])))
    .map((c) => {
      const f = figures(c, now!.latency);
      return {
        service: c.group[0] as string,
        ...f,
        health: healthOf(f.failureRate, f.latency.p95, thresholds),
        previous: figures(previous.get(c.group[0]) ?? emptyCell(0, c.group), before!.latency),
      };
    });
  return {
    from: iso(filter.from),
    to: iso(filter.to),
    percentiles: percentilesOf(now!.latency, before!.latency),
    services,
  };
}

/** `exact` when every quantile of an answer was computed exactly. */
const percentilesOf = (...all: Quantiles[]) =>
  all.every((q) => q.exact) ? ('exact' as const) : ('sketch' as const);

// ---- timeseries ----

/** A count metric's value in a cell (the latency quantiles come from query/metric-quantiles.ts). */
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
    default:
      return c.requests > 0 ? c.durationSum / c.requests : null;
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
 * Per group of `groups`, and one `__other__` for the rest when there are any, a point for every bucket: of a count
 * metric from the cells (per bucket), of a latency quantile from `latency` (the cells are then the range's totals,
 * which only tell whether there is an `__other__`).
 */
function seriesOf(
  cells: Cell[],
  metric: TimeseriesMetric,
  groupBy: GroupField | undefined,
  starts: number[],
  intervalMs: number,
  groups: readonly (string | null)[],
  latency: Quantiles | null,
): Series[] {
  const kept = new Set(groups);
  const groupOf = (c: Cell) =>
    groupBy === undefined ? null : kept.has(c.group[0] ?? null) ? (c.group[0] ?? null) : OTHER_GROUP;
  const keys = cells.some((c) => groupOf(c) === OTHER_GROUP) ? [...groups, OTHER_GROUP] : [...groups];
  const isoOf = starts.map(iso);
  const quantile = QUANTILE_INDEX[metric];
  if (latency && quantile !== undefined)
    return keys.map((g) => {
      const values = latency.byGroup.get(groupKeyOf(groupBy === undefined ? [] : [g]))?.values;
      return {
        group: groupBy === undefined ? {} : { [groupBy]: g },
        points: starts.map((_, i) => {
          const v = values?.[i * 3 + quantile];
          return { t: isoOf[i]!, value: v === undefined || Number.isNaN(v) ? null : v };
        }),
      };
    });
  // Per group, per bucket index: the cell, merged when several fold into one (__other__).
  const byGroup = new Map(keys.map((g) => [g, new Array<Cell | undefined>(starts.length).fill(undefined)]));
  for (const c of cells) {
    const g = groupOf(c);
    const at = byGroup.get(g)!;
    const i = (c.t - starts[0]!) / intervalMs;
    if (!(i >= 0 && i < starts.length)) continue;
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
  const empty = metricValue(metric, emptyCell(0, []), intervalMs);
  return keys.map((g) => {
    const at = byGroup.get(g)!;
    return {
      group: groupBy === undefined ? {} : { [groupBy]: g },
      points: starts.map((_, i) => {
        const cell = at[i];
        return { t: isoOf[i]!, value: cell ? metricValue(metric, cell, intervalMs) : empty };
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
  const latencyMetric = QUANTILE_INDEX[i.metric] !== undefined;
  const q = (f: MetricFilter): AggregateQuery => ({
    filter: f,
    intervalMs,
    groupBy: i.groupBy ? [i.groupBy] : [],
  });
  // The counts per bucket; for a latency quantile only the range's totals, which choose the groups.
  const counted = async (f: MetricFilter) => {
    const listed = await listFor(dataDir, f);
    return {
      listed,
      cells: await aggregate(engine, listed, latencyMetric ? { ...q(f), intervalMs: null } : q(f)),
    };
  };
  const period = async (
    f: MetricFilter,
    counts: { listed: Listed; cells: Cell[] },
    keep: readonly (string | null)[] | null,
  ) => {
    const groups = keep ?? topGroups(counts.cells, i.groupBy);
    const latency = latencyMetric
      ? await quantiles(engine, counts.listed, q(f), { kind: 'kept', kept: groups, other: OTHER_GROUP })
      : null;
    const starts = bucketStarts(f.from, f.to, intervalMs);
    return {
      groups,
      latency,
      series: seriesOf(counts.cells, i.metric, i.groupBy, starts, intervalMs, groups, latency),
    };
  };
  const previousFilter = shifted(i.filter);
  // Both periods' counts at once; the previous one's series wait for the current one's groups.
  const previousCounts = i.compare ? counted(previousFilter) : null;
  // Awaited below; until then a failure of it must not go unhandled if the current period fails first.
  previousCounts?.catch(() => {});
  const current = await period(i.filter, await counted(i.filter), null);
  // The previous period keeps the current one's groups, so the two compare line by line.
  const previous = previousCounts ? await period(previousFilter, await previousCounts, current.groups) : null;
  const latencies = [current.latency, previous?.latency].filter((l): l is Quantiles => !!l);
  return {
    metric: i.metric,
    interval: i.interval,
    percentiles: latencies.length > 0 ? percentilesOf(...latencies) : ('sketch' as const),
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
  const { cells, latency } = await countsAndQuantiles(
    engine,
    dataDir,
    { filter, intervalMs: null, groupBy: ['service', 'method', 'endpoint'] },
    { kind: 'fields' },
  );
  const rows = cells.map((c) => {
    const l = latencyOf(c, latency);
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
  return { from: iso(filter.from), to: iso(filter.to), percentiles: percentilesOf(latency), data };
}
