import type { Mode } from '../schemas/records.js';
import { contextColumn } from '../storage/context-columns.js';
import type { QueryEngine, Row, SqlParam } from '../storage/duckdb.js';
import { listPartitionFiles } from '../storage/layout.js';
import { type ColumnRef, columnRef } from './context-filter.js';

/**
 * The read side of issues that comes from stored rows (CONTRACT §9): occurrence counts, first and last
 * occurrence and the latest execution, from the `failures` dataset (one narrow row per stored failed execution,
 * storage/datasets.ts); common factors, from the executions themselves. Counting stored rows instead of keeping
 * counters is what makes the counts exact after redeliveries and restarts.
 */

const DAY_MS = 86_400_000;

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

/** An id segment as pipeline/fingerprint.ts's endpointTemplate sees one: digits, hex of 8 or more, a UUID. */
const ID_SEGMENT =
  '(?:[0-9]+|[0-9a-fA-F]{8,}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})';
const escapeRegex = (s: string) => s.replace(/[\\^$.|?*+()[\]{}]/g, '\\$&');

/**
 * The endpoints (as sent) that have an endpoint template: a literal prefix to narrow cheaply, then a full
 * pattern. `:id` stands for an id segment (the templating rule); any other `:name` is a framework route's
 * parameter, any one segment. A query string or fragment may follow. Executions store the endpoint as sent, and
 * only failures their template: the baseline of successes is found by pattern, not by a stored column.
 */
export function templatePattern(template: string): { prefix: string; regex: string } {
  const segments = template.split('/');
  const firstParam = segments.findIndex((p) => p.startsWith(':'));
  const prefix = firstParam === -1 ? template : `${segments.slice(0, firstParam).join('/')}/`;
  const regex = segments
    .map((p) => (p === ':id' ? ID_SEGMENT : p.startsWith(':') ? '[^/?#]+' : escapeRegex(p)))
    .join('/');
  return { prefix, regex: `${regex}(?:[?#].*)?` };
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
    CASE WHEN duration_ms < 100 THEN '<100ms' WHEN duration_ms < 1000 THEN '100ms-1s'
      WHEN duration_ms < 5000 THEN '1s-5s' ELSE '>=5s' END AS band${ctxColumns}
  FROM ${FROM_FILES}
  WHERE ${scopeSql(q, params)}
    AND issue_id = $issue
)
${branches.join('\nUNION ALL\n')}`;
  return { sql, params, keys };
}

/** Where one endpoint template's executions are: equality when it has no parameter, else its pattern. */
function endpointSql(template: string, i: number, params: Record<string, SqlParam>): string {
  const { prefix, regex } = templatePattern(template);
  params[`epp${i}`] = prefix;
  if (!template.includes(':')) {
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
 * The second pass, one scan of the baseline (the same services' and endpoint templates' successful executions in
 * the window, often hundreds of thousands): its count, its median duration, and per candidate how many have
 * it. Only the candidates' columns are read, nothing is grouped or kept: a high-cardinality key such as
 * customer.id costs nothing unless most of the issue's executions share one value of it.
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
  const sql = `SELECT count(*)::DOUBLE AS base, quantile_cont(duration_ms, 0.5) AS median_ms${counts}
FROM ${FROM_FILES}
WHERE ${scope}
  AND outcome = 'success'
  AND (${endpoints.join('\n    OR ')})`;
  return { sql, params };
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
 * The common factors of an issue (CONTRACT §9) and the evidence around them: the issue's executions first, which
 * name the few values worth counting, then one pass over the baseline counting those. (One statement over both
 * sides grouped every field of hundreds of thousands of baseline rows: about 1 s at 1.4M of them.)
 */
export async function issueFactors(
  engine: QueryEngine,
  dataDir: string,
  scope: Scope,
  q: FactorQueryInput,
): Promise<FactorEvidence> {
  const evidence: FactorEvidence = {
    occurrences: 0,
    baseline: 0,
    factors: [],
    occurrenceMedianMs: null,
    baselineMedianMs: null,
    window: { from: q.from, to: q.to },
  };
  if (q.services.length === 0 || q.endpoints.length === 0) return evidence;
  const list = (dataset: 'executions' | 'failures') =>
    listPartitionFiles(dataDir, dataset, scope.workspaceId, scope.mode, q.from, q.to);
  const [failures, files] = await Promise.all([list('failures'), list('executions')]);
  if (failures.length === 0 || files.length === 0) return evidence;
  // The issue's own executions from its failures rows (sorted by issue once their hour is compacted).
  const hitsQuery = buildFactorHitsQuery(q, await engine.columnsOf(failures));
  const first = candidatesOf(
    await engine.all(hitsQuery.sql, { ...hitsQuery.params, files: failures }),
    hitsQuery.keys,
  );
  const available = await engine.columnsOf(files);
  evidence.occurrences = first.hits;
  evidence.occurrenceMedianMs = first.medianMs;
  if (first.hits === 0) return evidence;
  const baselineQuery = buildFactorBaselineQuery(q, first.candidates, available);
  const [base] = await engine.all(baselineQuery.sql, { ...baselineQuery.params, files });
  evidence.baseline = Number(base?.base ?? 0);
  evidence.baselineMedianMs =
    base?.median_ms === null || base?.median_ms === undefined ? null : Number(base.median_ms);
  evidence.factors = factorsOf(first.candidates, first.hits, evidence.baseline, (i) =>
    Number(base?.[`c${i}`] ?? 0),
  );
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
