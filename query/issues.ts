import type { Mode } from '../schemas/records.js';
import { DAY_MS, HOUR_MS } from '../schemas/time.js';
import { contextColumn } from '../storage/context-columns.js';
import type { QueryEngine, Row, SqlParam } from '../storage/duckdb.js';
import { listPartitionFiles, listSidecarsAndFiles } from '../storage/layout.js';
import {
  bucketDurationMs,
  DURATION_BAND_SQL,
  DURATION_BUCKET_SQL,
  ID_PLACEHOLDER,
  ID_SEGMENT,
} from '../storage/rollup.js';
import { type ColumnRef, columnRef } from './context-filter.js';

/**
 * The read side of issues that comes from stored rows (CONTRACT §9): occurrence counts, first and last
 * occurrence and the latest execution, from the `failures` dataset (one narrow row per stored failed execution,
 * storage/datasets.ts); common factors, from the executions themselves. Counting stored rows instead of keeping
 * counters is what makes the counts exact after redeliveries and restarts.
 */

export interface Scope {
  workspaceId: string;
  mode: Mode;
}

export interface IssueRowStats {
  total: number;
  last24h: number;
  last7d: number;
  firstSeenMs: number;
  lastSeenMs: number;
  /** The occurrence that started last (the representative execution). */
  lastExecutionId: string;
}

const FROM_FILES = 'read_parquet($files, union_by_name = true, hive_partitioning = false)';

const STATS_COLUMNS = `issue_id,
  count(*)::DOUBLE AS total,
  count(*) FILTER (WHERE started_at >= epoch_ms($day::BIGINT))::DOUBLE AS last24h,
  count(*) FILTER (WHERE started_at >= epoch_ms($week::BIGINT))::DOUBLE AS last7d,
  epoch_ms(min(started_at))::DOUBLE AS first_ms,
  epoch_ms(max(started_at))::DOUBLE AS last_ms,
  arg_max(execution_id, started_at) AS last_execution`;

/** The statements, for the snapshot tests: every issue of the files, or one (`$issue`). */
export const ISSUE_STATS_SQL = {
  all: `SELECT ${STATS_COLUMNS}\nFROM ${FROM_FILES}\nGROUP BY issue_id`,
  one: `SELECT ${STATS_COLUMNS},
  list(DISTINCT service) AS services,
  list(DISTINCT endpoint) AS endpoints
FROM ${FROM_FILES}
WHERE issue_id = $issue
GROUP BY issue_id`,
};

const toStats = (r: Row): IssueRowStats => ({
  total: Number(r.total),
  last24h: Number(r.last24h),
  last7d: Number(r.last7d),
  firstSeenMs: Number(r.first_ms),
  lastSeenMs: Number(r.last_ms),
  lastExecutionId: r.last_execution as string,
});

/** Every failures file of the workspace and mode (issues have no time bound). */
const failuresFiles = (dataDir: string, scope: Scope) =>
  listPartitionFiles(dataDir, 'failures', scope.workspaceId, scope.mode, 0, Number.MAX_SAFE_INTEGER);

/** Per issue of the workspace and mode with stored occurrences, its figures. */
export async function issueStats(
  engine: QueryEngine,
  dataDir: string,
  scope: Scope,
  now: number,
): Promise<Map<string, IssueRowStats>> {
  const files = await failuresFiles(dataDir, scope);
  const out = new Map<string, IssueRowStats>();
  if (files.length === 0) return out;
  const rows = await engine.all(ISSUE_STATS_SQL.all, { files, day: now - DAY_MS, week: now - 7 * DAY_MS });
  for (const r of rows) out.set(r.issue_id as string, toStats(r));
  return out;
}

export interface OneIssueStats extends IssueRowStats {
  /** The services and endpoint templates its occurrences came from: the common factors' baseline. */
  services: string[];
  endpoints: string[];
}

/** One issue's figures; null when it has no stored occurrence. */
export async function oneIssueStats(
  engine: QueryEngine,
  dataDir: string,
  scope: Scope,
  issueId: string,
  now: number,
): Promise<OneIssueStats | null> {
  const files = await failuresFiles(dataDir, scope);
  if (files.length === 0) return null;
  const [r] = await engine.all(ISSUE_STATS_SQL.one, {
    files,
    issue: issueId,
    day: now - DAY_MS,
    week: now - 7 * DAY_MS,
  });
  if (!r) return null;
  return { ...toStats(r), services: r.services as string[], endpoints: r.endpoints as string[] };
}

// ---- common factors ----

export type FactorValue = string | number | boolean;

export interface CommonFactor {
  field: string;
  value: FactorValue;
  issueShare: number;
  baselineShare: number;
}

/** What the common factors query found: the factors, and the figures the hypothesis rests on. */
export interface FactorEvidence {
  /** The issue's occurrences in the window, and the baseline's executions. */
  occurrences: number;
  baseline: number;
  factors: CommonFactor[];
  /** Median durations (ms) of the occurrences and of the baseline; null when there are none. */
  occurrenceMedianMs: number | null;
  baselineMedianMs: number | null;
  window: { from: number; to: number };
}

/** Thresholds of CONTRACT §9: a value most occurrences share, at least twice as common as in the baseline. */
export const MIN_ISSUE_SHARE = 0.5;
export const MIN_SHARE_RATIO = 2;
/** At most this many services and endpoints bound the baseline (an issue grouped across many by a custom fingerprint). */
const MAX_SCOPE_VALUES = 50;

/**
 * Factors, most telling first: context and environment say who or where; a status code or a slow duration band
 * mostly restates that the executions failed (successes are rarely 5xx), so they come last.
 */
const FIELD_RANK: Record<string, number> = { environment: 1, method: 2, durationBand: 3, statusCode: 4 };
const telling = (field: string) => (field.startsWith('context.') ? 0 : (FIELD_RANK[field] ?? 5));

const ID_SEGMENT_RE = new RegExp(`^${ID_SEGMENT}$`);
const escapeRegex = (s: string) => s.replace(/[\\^$.|?*+()[\]{}]/g, '\\$&');

/**
 * An endpoint template's segments as the baseline matches them: `:id` and a literal id segment (a framework route's
 * `/v1/2024/report`) are an id segment, any other `:name` (a route's parameter) is any one segment, the rest is
 * literal. A literal id segment counts as any id because the rollups (storage/rollup.ts) keep endpoints templated,
 * and the scan of files without one must count what they count.
 */
type Segment = { id: true } | { any: true } | { literal: string };
const segmentsOf = (template: string): Segment[] =>
  template
    .split('/')
    .map((p) =>
      p === ID_PLACEHOLDER || ID_SEGMENT_RE.test(p)
        ? { id: true }
        : p.startsWith(':')
          ? { any: true }
          : { literal: p },
    );

/**
 * The endpoints (as sent) that have an endpoint template: a literal prefix to narrow cheaply, then a full
 * pattern. A query string or fragment may follow. Executions store the endpoint as sent, and only failures their
 * template: the baseline of successes is found by pattern, not by a stored column.
 */
export function templatePattern(template: string): { prefix: string; regex: string; literal: boolean } {
  const segments = segmentsOf(template);
  const firstOpen = segments.findIndex((p) => !('literal' in p));
  const literal = (p: Segment) => ('literal' in p ? p.literal : '');
  const prefix = firstOpen === -1 ? template : `${segments.slice(0, firstOpen).map(literal).join('/')}/`;
  const regex = segments
    .map((p) => ('id' in p ? ID_SEGMENT : 'any' in p ? '[^/?#]+' : escapeRegex(p.literal)))
    .join('/');
  return { prefix, regex: `${regex}(?:[?#].*)?`, literal: firstOpen === -1 };
}

/**
 * The rollups' endpoints (templated, without query string) that a template's executions have: one exactly when the
 * template has no route parameter, else a prefix and a pattern.
 */
export function rollupEndpointPattern(
  template: string,
): { exact: string } | { prefix: string; regex: string } {
  const segments = segmentsOf(template);
  const keyOf = (p: Segment) => ('id' in p ? ID_PLACEHOLDER : 'literal' in p ? p.literal : null);
  if (segments.every((p) => !('any' in p))) return { exact: segments.map(keyOf).join('/') };
  const firstAny = segments.findIndex((p) => 'any' in p);
  return {
    prefix: `${segments.slice(0, firstAny).map(keyOf).join('/')}/`,
    regex: segments.map((p) => ('any' in p ? '[^/]+' : escapeRegex(keyOf(p)!))).join('/'),
  };
}

export interface FactorQueryInput {
  issueId: string;
  services: string[];
  endpoints: string[];
  from: number;
  to: number;
  indexedKeys: readonly string[];
}

/** A value most of the issue's executions share, and how many of them have it. */
export interface Candidate {
  field: string;
  value: FactorValue;
  hits: number;
}

const BANDS: Record<string, [number, number]> = {
  '<100ms': [0, 100],
  '100ms-1s': [100, 1000],
  '1s-5s': [1000, 5000],
  '>=5s': [5000, Number.POSITIVE_INFINITY],
};

interface Built {
  sql: string;
  params: Record<string, SqlParam>;
}

/** The indexed keys that the files have a typed column of. */
const keysIn = (keys: readonly string[], available?: ReadonlySet<string>) =>
  keys.filter(
    (k) => !available || (['s', 'n', 'b'] as const).some((t) => available.has(contextColumn(k, t))),
  );

/** The window and the services (bound), shared by both passes. */
function scopeSql(q: FactorQueryInput, params: Record<string, SqlParam>): string {
  Object.assign(params, { from: q.from, to: q.to });
  const services = q.services.slice(0, MAX_SCOPE_VALUES).map((v, i) => {
    params[`svc${i}`] = v;
    return `$svc${i}`;
  });
  return `started_at >= epoch_ms($from::BIGINT) AND started_at < epoch_ms($to::BIGINT)
    AND service IN (${services.join(', ')})`;
}

/**
 * The first pass, over the issue's own executions in the window (few), read from their `failures` rows (bound
 * as `$files`): per field, the values at least half of them share (at most two a field), with their counts, and
 * a last row (field '') with the count and median duration of all of them.
 */
export function buildFactorHitsQuery(
  q: FactorQueryInput,
  available?: ReadonlySet<string>,
): Built & { keys: string[] } {
  const col = columnRef(available);
  const params: Record<string, SqlParam> = { issue: q.issueId };
  const keys = keysIn(q.indexedKeys, available);
  const ctxColumns = keys
    .map(
      (k, i) =>
        `, ${col(contextColumn(k, 's'))} AS s${i}, ${col(contextColumn(k, 'n'))} AS n${i}, ${col(contextColumn(k, 'b'))} AS b${i}`,
    )
    .join('');
  const majority = 'HAVING count(*) * 2 >= (SELECT count(*) FROM r)';
  const scalar = (field: string, expr: string, type: 's' | 'n') =>
    `SELECT '${field}' AS field, ${type === 's' ? `${expr}::VARCHAR` : 'NULL::VARCHAR'} AS s, ${type === 'n' ? `${expr}::DOUBLE` : 'NULL::DOUBLE'} AS n, NULL::BOOLEAN AS b, count(*)::DOUBLE AS hits, NULL::DOUBLE AS median_ms
  FROM r WHERE ${expr} IS NOT NULL GROUP BY ${expr} ${majority}`;
  const branches = [
    scalar('environment', 'environment', 's'),
    scalar('method', 'method', 's'),
    scalar('statusCode', 'status_code', 'n'),
    scalar('durationBand', 'band', 's'),
    ...keys.map(
      (_, i) => `SELECT 'k${i}', s${i}, n${i}, b${i}, count(*)::DOUBLE, NULL::DOUBLE
  FROM r WHERE s${i} IS NOT NULL OR n${i} IS NOT NULL OR b${i} IS NOT NULL
  GROUP BY s${i}, n${i}, b${i} ${majority}`,
    ),
    `SELECT '', NULL, NULL, NULL, count(*)::DOUBLE, quantile_cont(duration_ms, 0.5) FROM r`,
  ];
  const sql = `WITH r AS MATERIALIZED (
  SELECT environment, method, status_code, duration_ms,
    ${DURATION_BAND_SQL} AS band${ctxColumns}
  FROM ${FROM_FILES}
  WHERE ${scopeSql(q, params)}
    AND issue_id = $issue
)
${branches.join('\nUNION ALL\n')}`;
  return { sql, params, keys };
}

/** Where one endpoint template's executions are: equality when it is all literal, else its pattern. */
function endpointSql(template: string, i: number, params: Record<string, SqlParam>): string {
  const { prefix, regex, literal } = templatePattern(template);
  params[`epp${i}`] = prefix;
  if (literal) {
    // No parameter: the endpoint itself, or with a query string or fragment (no pattern to run on every row).
    return `(endpoint = $epp${i} OR starts_with(endpoint, $epp${i} || '?') OR starts_with(endpoint, $epp${i} || '#'))`;
  }
  params[`epr${i}`] = regex;
  return `(starts_with(endpoint, $epp${i}) AND regexp_full_match(endpoint, $epr${i}))`;
}

/** The condition a candidate value sets on a row; `$c<i>` is bound to its value. */
function candidateSql(c: Candidate, i: number, params: Record<string, SqlParam>, col: ColumnRef): string {
  const name = `c${i}`;
  if (c.field === 'durationBand') {
    const [lo, hi] = BANDS[c.value as string]!;
    params[`${name}lo`] = lo;
    if (hi === Number.POSITIVE_INFINITY) return `duration_ms >= $${name}lo::DOUBLE`;
    params[`${name}hi`] = hi;
    return `duration_ms >= $${name}lo::DOUBLE AND duration_ms < $${name}hi::DOUBLE`;
  }
  params[name] = c.value;
  if (c.field === 'environment' || c.field === 'method') return `${c.field} = $${name}`;
  if (c.field === 'statusCode') return `status_code = $${name}::INTEGER`;
  const key = c.field.slice('context.'.length);
  if (typeof c.value === 'number') return `${col(contextColumn(key, 'n'))} = $${name}::DOUBLE`;
  if (typeof c.value === 'boolean') return `${col(contextColumn(key, 'b'))} = $${name}::BOOLEAN`;
  return `${col(contextColumn(key, 's'))} = $${name}`;
}

/**
 * The second pass over the files without a rollup (the current hour's pipeline files, any not rolled up yet): one
 * scan of the baseline (the same services' and endpoint templates' successful executions in the window), per
 * duration bucket (storage/rollup.ts) its count and per candidate how many have it. Only the candidates' columns
 * are read: a high-cardinality key such as customer.id costs nothing unless most of the issue's executions share
 * one value of it.
 */
export function buildFactorBaselineQuery(
  q: FactorQueryInput,
  candidates: readonly Candidate[],
  available?: ReadonlySet<string>,
): Built {
  const col = columnRef(available);
  const params: Record<string, SqlParam> = {};
  const scope = scopeSql(q, params);
  const endpoints = q.endpoints.slice(0, MAX_SCOPE_VALUES).map((ep, i) => endpointSql(ep, i, params));
  const counts = candidates
    .map((c, i) => `,\n  count(*) FILTER (WHERE ${candidateSql(c, i, params, col)})::DOUBLE AS c${i}`)
    .join('');
  const sql = `SELECT ${DURATION_BUCKET_SQL} AS bucket, count(*)::DOUBLE AS base${counts}
FROM ${FROM_FILES}
WHERE ${scope}
  AND outcome = 'success'
  AND (${endpoints.join('\n    OR ')})
GROUP BY ALL`;
  return { sql, params };
}

/** Where a rollup's rows are for the issue's services and endpoint templates. */
function rollupScopeSql(q: FactorQueryInput, params: Record<string, SqlParam>): string {
  const services = q.services.slice(0, MAX_SCOPE_VALUES).map((v, i) => {
    params[`svc${i}`] = v;
    return `$svc${i}`;
  });
  const endpoints = q.endpoints.slice(0, MAX_SCOPE_VALUES).map((template, i) => {
    const p = rollupEndpointPattern(template);
    if ('exact' in p) {
      params[`epk${i}`] = p.exact;
      return `endpoint = $epk${i}`;
    }
    params[`epp${i}`] = p.prefix;
    params[`epr${i}`] = p.regex;
    return `(starts_with(endpoint, $epp${i}) AND regexp_full_match(endpoint, $epr${i}))`;
  });
  return `service IN (${services.join(', ')}) AND (${endpoints.join(' OR ')})`;
}

/** The condition a candidate value sets on a rollup row; `$c<i>` is bound to its value. */
function rollupCandidateSql(c: Candidate, i: number, params: Record<string, SqlParam>): string {
  const name = `c${i}`;
  params[name] = c.value;
  params[`f${i}`] = c.field;
  const field = `field = $f${i}`;
  if (typeof c.value === 'number') return `${field} AND n = $${name}::DOUBLE`;
  if (typeof c.value === 'boolean') return `${field} AND b = $${name}::BOOLEAN`;
  return `${field} AND s = $${name}`;
}

/**
 * The second pass over the rollups (bound as `$rollups`), in the shape of buildFactorBaselineQuery's rows folded
 * by baselineOf: `k` -1 for the count, -2 for a duration bucket (`bucket`), else the index of a candidate. One scan
 * of the scope's kind 0 rows (a few hundred an hour) answers the count, the histogram and every candidate but the
 * values of dense context keys, each of which is one lookup of kind 1 rows.
 */
export function buildRollupBaselineQuery(q: FactorQueryInput, candidates: readonly Candidate[]): Built {
  const params: Record<string, SqlParam> = {};
  const scope = rollupScopeSql(q, params);
  const conditions = candidates.map((c, i) => rollupCandidateSql(c, i, params));
  const ROLLUPS = 'read_parquet($rollups, hive_partitioning = false)';
  const whens = conditions.map((cond, i) => ` WHEN ${cond} THEN ${i}`).join('');
  const lookups = candidates.flatMap((c, i) =>
    c.field.startsWith('context.')
      ? [
          `SELECT ${i} AS k, NULL::DOUBLE AS bucket, sum(count)::DOUBLE AS count
FROM ${ROLLUPS} WHERE kind = 1 AND ${scope} AND ${conditions[i]}`,
        ]
      : [],
  );
  const sql = [
    `SELECT k, bucket, sum(count)::DOUBLE AS count FROM (
  SELECT CASE WHEN field = '' THEN -1 WHEN field = 'd' THEN -2${whens} END AS k,
    CASE WHEN field = 'd' THEN n END AS bucket, count
  FROM ${ROLLUPS} WHERE kind = 0 AND ${scope}
) WHERE k IS NOT NULL GROUP BY ALL`,
    ...lookups,
  ].join('\nUNION ALL\n');
  return { sql, params };
}

/** The baseline's figures: its count, per candidate how many of it have the value, and its duration histogram. */
export interface Baseline {
  base: number;
  counts: number[];
  /** Duration bucket → executions. */
  histogram: Map<number, number>;
}

export const emptyBaseline = (candidates: number): Baseline => ({
  base: 0,
  counts: new Array<number>(candidates).fill(0),
  histogram: new Map(),
});

/** Adds buildFactorBaselineQuery's rows to `into`. */
export function addScannedBaseline(into: Baseline, rows: Row[]): Baseline {
  for (const r of rows) {
    const base = Number(r.base);
    into.base += base;
    const bucket = Number(r.bucket);
    into.histogram.set(bucket, (into.histogram.get(bucket) ?? 0) + base);
    for (let i = 0; i < into.counts.length; i++) into.counts[i]! += Number(r[`c${i}`] ?? 0);
  }
  return into;
}

/** Adds buildRollupBaselineQuery's rows to `into`. */
export function addRolledUpBaseline(into: Baseline, rows: Row[]): Baseline {
  for (const r of rows) {
    const k = Number(r.k);
    const count = Number(r.count ?? 0);
    if (k === -1) into.base += count;
    else if (k === -2) {
      const bucket = Number(r.bucket);
      into.histogram.set(bucket, (into.histogram.get(bucket) ?? 0) + count);
    } else if (k >= 0 && k < into.counts.length) into.counts[k]! += count;
  }
  return into;
}

/** The median duration of a histogram (within 1 %: its bucket's middle); null when it is empty. */
export function histogramMedianMs(histogram: ReadonlyMap<number, number>): number | null {
  const total = [...histogram.values()].reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  let seen = 0;
  for (const [bucket, n] of [...histogram].sort((a, b) => a[0] - b[0])) {
    seen += n;
    if (seen * 2 >= total) return bucketDurationMs(bucket);
  }
  return null;
}

/** The candidates of the first pass's rows, and its totals. */
export function candidatesOf(
  rows: Row[],
  keys: readonly string[],
): { candidates: Candidate[]; hits: number; medianMs: number | null } {
  const totals = rows.find((r) => r.field === '');
  const candidates: Candidate[] = [];
  for (const r of rows) {
    if (r.field === '') continue;
    const field = r.field as string;
    const value = (r.s ?? r.n ?? r.b) as FactorValue | null;
    if (value === null) continue;
    candidates.push({
      field: field.startsWith('k') ? `context.${keys[Number(field.slice(1))]}` : field,
      value,
      hits: Number(r.hits),
    });
  }
  const median = totals?.median_ms;
  return {
    candidates,
    hits: Number(totals?.hits ?? 0),
    medianMs: median === null || median === undefined ? null : Number(median),
  };
}

/**
 * The common factors' window widened to whole hours: the rollups count an hour's executions, not a time range's.
 */
export function wholeHours(from: number, to: number): { from: number; to: number } {
  return { from: Math.floor(from / HOUR_MS) * HOUR_MS, to: Math.ceil(to / HOUR_MS) * HOUR_MS };
}

/**
 * The common factors of an issue (CONTRACT §9) and the evidence around them, over the whole hours of the window:
 * the issue's executions first, which name the few values worth counting, then the baseline counting those, from
 * the rollups of the files that have one and a scan of the others. (One statement over both sides grouped every
 * field of hundreds of thousands of baseline rows: about 1 s at 1.4M of them; the scan without rollups, 270 ms.)
 */
export async function issueFactors(
  engine: QueryEngine,
  dataDir: string,
  scope: Scope,
  input: FactorQueryInput,
): Promise<FactorEvidence> {
  const q = { ...input, ...wholeHours(input.from, input.to) };
  const evidence: FactorEvidence = {
    occurrences: 0,
    baseline: 0,
    factors: [],
    occurrenceMedianMs: null,
    baselineMedianMs: null,
    window: { from: q.from, to: q.to },
  };
  if (q.services.length === 0 || q.endpoints.length === 0) return evidence;
  const [failures, executions] = await Promise.all([
    listPartitionFiles(dataDir, 'failures', scope.workspaceId, scope.mode, q.from, q.to),
    listSidecarsAndFiles('rollups', dataDir, scope.workspaceId, scope.mode, q.from, q.to),
  ]);
  if (failures.length === 0) return evidence;
  // The issue's own executions from their failures rows (sorted by issue once their hour is compacted).
  const hitsQuery = buildFactorHitsQuery(q, await engine.columnsOf(failures));
  const first = candidatesOf(
    await engine.all(hitsQuery.sql, { ...hitsQuery.params, files: failures }),
    hitsQuery.keys,
  );
  evidence.occurrences = first.hits;
  evidence.occurrenceMedianMs = first.medianMs;
  if (first.hits === 0) return evidence;
  const baseline = emptyBaseline(first.candidates.length);
  await Promise.all([
    (async () => {
      if (executions.sidecars.length === 0) return;
      const built = buildRollupBaselineQuery(q, first.candidates);
      addRolledUpBaseline(
        baseline,
        await engine.all(built.sql, { ...built.params, rollups: executions.sidecars }),
      );
    })(),
    (async () => {
      if (executions.files.length === 0) return;
      const built = buildFactorBaselineQuery(q, first.candidates, await engine.columnsOf(executions.files));
      addScannedBaseline(baseline, await engine.all(built.sql, { ...built.params, files: executions.files }));
    })(),
  ]);
  evidence.baseline = baseline.base;
  evidence.baselineMedianMs = histogramMedianMs(baseline.histogram);
  evidence.factors = factorsOf(first.candidates, first.hits, baseline.base, (i) => baseline.counts[i] ?? 0);
  return evidence;
}

/** The candidates that pass CONTRACT §9's thresholds, most telling first. */
export function factorsOf(
  candidates: readonly Candidate[],
  hits: number,
  baseline: number,
  baseCount: (i: number) => number,
): CommonFactor[] {
  const factors: CommonFactor[] = [];
  candidates.forEach((c, i) => {
    const issueShare = c.hits / hits;
    const baselineShare = baseline > 0 ? baseCount(i) / baseline : 0;
    if (issueShare < MIN_ISSUE_SHARE || issueShare < MIN_SHARE_RATIO * baselineShare) return;
    factors.push({ field: c.field, value: c.value, issueShare, baselineShare });
  });
  return factors.sort(
    (a, b) =>
      telling(a.field) - telling(b.field) || b.issueShare - a.issueShare || a.baselineShare - b.baselineShare,
  );
}
