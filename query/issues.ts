import type { Mode } from '../schemas/records.js';
import { contextColumn } from '../storage/context-columns.js';
import type { QueryEngine, Row, SqlParam } from '../storage/duckdb.js';
import { listPartitionFiles } from '../storage/layout.js';
import { columnRef } from './context-filter.js';

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

const BAND_SQL = `CASE WHEN duration_ms < 100 THEN '<100ms' WHEN duration_ms < 1000 THEN '100ms-1s'
    WHEN duration_ms < 5000 THEN '1s-5s' ELSE '>=5s' END`;

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

/**
 * One statement: the issue's executions and the baseline (the same services' and endpoint templates' successful
 * executions in the window) are read once into `r`; then, per field, the values a majority of the occurrences
 * share, each with its count in both. Context values that no occurrence has are never grouped (a
 * high-cardinality key such as customer.id would otherwise make a group per customer).
 * `available`: the columns the files have; a missing one reads as NULL.
 */
export function buildFactorQuery(
  q: FactorQueryInput,
  available?: ReadonlySet<string>,
): { sql: string; params: Record<string, SqlParam>; keys: string[] } {
  const col = columnRef(available);
  const params: Record<string, SqlParam> = { issue: q.issueId, from: q.from, to: q.to };
  const bind = (prefix: string, values: string[]) =>
    values.slice(0, MAX_SCOPE_VALUES).map((v, i) => {
      params[`${prefix}${i}`] = v;
      return `$${prefix}${i}`;
    });
  const services = bind('svc', q.services);
  const endpoints = q.endpoints.slice(0, MAX_SCOPE_VALUES).map((ep, i) => {
    const { prefix, regex } = templatePattern(ep);
    params[`epp${i}`] = prefix;
    params[`epr${i}`] = regex;
    return `(starts_with(endpoint, $epp${i}) AND regexp_full_match(endpoint, $epr${i}))`;
  });
  const keys = q.indexedKeys.filter(
    (k) => !available || ['s', 'n', 'b'].some((t) => available.has(contextColumn(k, t as 's'))),
  );
  const ctxColumns = keys
    .map(
      (k, i) =>
        `, ${col(contextColumn(k, 's'))} AS s${i}, ${col(contextColumn(k, 'n'))} AS n${i}, ${col(contextColumn(k, 'b'))} AS b${i}`,
    )
    .join('');
  const share =
    'count(*) FILTER (WHERE hit)::DOUBLE AS hits, count(*) FILTER (WHERE NOT hit)::DOUBLE AS base';
  const majority = 'HAVING count(*) FILTER (WHERE hit) * 2 >= (SELECT hits FROM h)';
  const scalar = (field: string, expr: string, type: 's' | 'n') =>
    `SELECT '${field}' AS field, ${type === 's' ? `${expr}::VARCHAR` : 'NULL::VARCHAR'} AS s, ${type === 'n' ? `${expr}::DOUBLE` : 'NULL::DOUBLE'} AS n, NULL::BOOLEAN AS b, ${share}, NULL::DOUBLE AS hit_ms, NULL::DOUBLE AS base_ms
  FROM r WHERE ${expr} IS NOT NULL GROUP BY ${expr} ${majority}`;
  const branches = [
    scalar('environment', 'environment', 's'),
    scalar('method', 'method', 's'),
    scalar('statusCode', 'status_code', 'n'),
    scalar('durationBand', 'band', 's'),
    ...keys.map(
      (
        _,
        i,
      ) => `SELECT 'k${i}' AS field, s${i} AS s, n${i} AS n, b${i} AS b, ${share}, NULL::DOUBLE, NULL::DOUBLE
  FROM r
  WHERE (s${i} IS NOT NULL OR n${i} IS NOT NULL OR b${i} IS NOT NULL)
    AND (hit OR s${i} IN (SELECT s${i} FROM r WHERE hit) OR n${i} IN (SELECT n${i} FROM r WHERE hit)
      OR b${i} IN (SELECT b${i} FROM r WHERE hit))
  GROUP BY s${i}, n${i}, b${i} ${majority}`,
    ),
    `SELECT '' AS field, NULL, NULL, NULL, ${share},
    quantile_cont(duration_ms, 0.5) FILTER (WHERE hit), quantile_cont(duration_ms, 0.5) FILTER (WHERE NOT hit)
  FROM r`,
  ];
  const sql = `WITH r AS MATERIALIZED (
  SELECT coalesce(issue_id = $issue, false) AS hit, environment, method, status_code, duration_ms,
    ${BAND_SQL} AS band${ctxColumns}
  FROM ${FROM_FILES}
  WHERE started_at >= epoch_ms($from::BIGINT) AND started_at < epoch_ms($to::BIGINT)
    AND service IN (${services.join(', ')})
    AND (issue_id = $issue OR (outcome = 'success' AND (${endpoints.join('\n      OR ')})))
),
h AS (SELECT count(*) FILTER (WHERE hit) AS hits FROM r)
${branches.join('\nUNION ALL\n')}`;
  return { sql, params, keys };
}

/** The common factors of an issue (CONTRACT §9) and the evidence around them. */
export async function issueFactors(
  engine: QueryEngine,
  dataDir: string,
  scope: Scope,
  q: FactorQueryInput,
): Promise<FactorEvidence> {
  const none: FactorEvidence = {
    occurrences: 0,
    baseline: 0,
    factors: [],
    occurrenceMedianMs: null,
    baselineMedianMs: null,
    window: { from: q.from, to: q.to },
  };
  if (q.services.length === 0 || q.endpoints.length === 0) return none;
  const files = await listPartitionFiles(dataDir, 'executions', scope.workspaceId, scope.mode, q.from, q.to);
  if (files.length === 0) return none;
  const built = buildFactorQuery(q, await engine.columnsOf(files));
  const rows = await engine.all(built.sql, { ...built.params, files });
  const totals = rows.find((r) => r.field === '');
  const occurrences = Number(totals?.hits ?? 0);
  const baseline = Number(totals?.base ?? 0);
  const factors: CommonFactor[] = [];
  for (const r of rows) {
    if (r.field === '' || occurrences === 0) continue;
    const field = r.field as string;
    const k = field.startsWith('k') ? Number(field.slice(1)) : -1;
    const value = (r.s ?? r.n ?? r.b) as FactorValue | null;
    if (value === null) continue;
    const issueShare = Number(r.hits) / occurrences;
    const baselineShare = baseline > 0 ? Number(r.base) / baseline : 0;
    if (issueShare < MIN_ISSUE_SHARE || issueShare < MIN_SHARE_RATIO * baselineShare) continue;
    factors.push({
      field: k >= 0 ? `context.${built.keys[k]}` : field,
      value,
      issueShare,
      baselineShare,
    });
  }
  factors.sort(
    (a, b) =>
      telling(a.field) - telling(b.field) || b.issueShare - a.issueShare || a.baselineShare - b.baselineShare,
  );
  const median = (v: unknown) => (v === null || v === undefined ? null : Number(v));
  return {
    occurrences,
    baseline,
    factors,
    occurrenceMedianMs: median(totals?.hit_ms),
    baselineMedianMs: median(totals?.base_ms),
    window: { from: q.from, to: q.to },
  };
}
