import fs from 'node:fs/promises';
import path from 'node:path';
import type { Mode, Outcome } from '../schemas/records.js';
import type { DatasetName } from '../storage/datasets.js';
import type { QueryEngine, Row, SqlParam } from '../storage/duckdb.js';
import { listPartitionFiles } from '../storage/layout.js';
import { COMPACTED_PREFIX, idIndexPath } from '../storage/manifest.js';
import { type Constraint, constraintSql } from './constraints.js';
import {
  type ColumnRef,
  type ContextFilter,
  columnRef,
  contextFilterSql,
  matchedValueSql,
} from './context-filter.js';
import { firstExecutionLogs, json, type LogItem } from './logs.js';

/**
 * SQL for the executions read path. Every request value travels as a typed parameter; the only interpolated
 * pieces are column names and sort orders taken from the fixed tables below.
 */

export type ExecutionSort = '-startedAt' | 'startedAt' | '-durationMs' | 'durationMs';

export interface ExecutionFilter {
  workspaceId: string;
  mode: Mode;
  from: number;
  to: number;
  /** ANDed; from the parameters and from `q` alike. */
  constraints: Constraint[];
  /** ANDed across entries, each entry's values ORed. */
  context?: ContextFilter[];
}

export interface Page {
  page: number;
  pageSize: number;
  sort: ExecutionSort;
  /** Also answer, per execution, the context value each filter matched. */
  includeMatchedContext?: boolean;
}

const ORDER_BY: Record<ExecutionSort, string> = {
  '-startedAt': 'started_at DESC, execution_id DESC',
  startedAt: 'started_at ASC, execution_id ASC',
  '-durationMs': 'duration_ms DESC, execution_id DESC',
  durationMs: 'duration_ms ASC, execution_id ASC',
};

/**
 * Per sort, the `$k` first values of its leading key in sort order (the key as an exact number: epoch
 * milliseconds for a timestamp, the precision stored, below 2^48 so exact in the DOUBLE the bound travels in;
 * microseconds would pass 2^53 after the year 2255), and the condition that keeps the rows at or before a
 * bound in that order.
 */
const SORT_KEY: Record<ExecutionSort, { first: string; within: string }> = {
  '-startedAt': {
    first: 'max(epoch_ms(started_at), $k)',
    within: 'started_at >= epoch_ms($bound::BIGINT)',
  },
  startedAt: {
    first: 'min(epoch_ms(started_at), $k)',
    within: 'started_at <= epoch_ms($bound::BIGINT)',
  },
  '-durationMs': { first: 'max(duration_ms, $k)', within: 'duration_ms >= $bound' },
  durationMs: { first: 'min(duration_ms, $k)', within: 'duration_ms <= $bound' },
};

const SUMMARY_COLUMNS = `execution_id, trace_id, service, environment, source, endpoint, method, status_code,
  duration_ms, outcome, epoch_ms(started_at)::DOUBLE AS started_at_ms, issue_id, exception_type`;

const FROM_FILES = 'read_parquet($files, union_by_name = true)';

export interface BuiltQuery {
  sql: string;
  params: Record<string, SqlParam>;
}

/** The WHERE clause of a list query; `files` is bound by the caller. */
export function buildExecutionWhere(f: ExecutionFilter, col: ColumnRef = columnRef()): BuiltQuery {
  const where = ['started_at >= epoch_ms($from::BIGINT)', 'started_at < epoch_ms($to::BIGINT)'];
  const params: Record<string, SqlParam> = { from: f.from, to: f.to };
  where.push(...constraintSql(f.constraints, params));
  if (f.context && f.context.length > 0) where.push(...contextFilterSql(f.context, params, col));
  return { sql: where.join('\n  AND '), params };
}

/**
 * A page in two statements. `head` scans the matching rows once for the total and `bound`: the leading sort
 * key of the page's last row (or of the last row of all, when fewer match). `page` then sorts only the rows at
 * or before `bound` in sort order (`$bound` bound by the caller): every row of the page is among them, as no
 * row past the bound can precede the page's last row. So the full sort key, with its execution_id tie-break,
 * is read for a page's worth of rows (plus ties) instead of for every match, and with the files sorted by
 * service and start, the bound on started_at prunes row groups too.
 *
 * `available`: the columns the files have (absent: all of them), so a key indexed later reads as NULL.
 */
export function buildListQuery(
  f: ExecutionFilter,
  p: Page,
  available?: ReadonlySet<string>,
): { head: BuiltQuery; page: BuiltQuery } {
  const col = columnRef(available);
  const where = buildExecutionWhere(f, col);
  const matched =
    p.includeMatchedContext && f.context?.length
      ? `, ${f.context.map((c, k) => `${matchedValueSql(c.path, col)} AS matched_${k}`).join(', ')}`
      : '';
  const key = SORT_KEY[p.sort];
  const offset = (p.page - 1) * p.pageSize;
  const head = `SELECT count(*)::DOUBLE AS total, ${key.first}[-1]::DOUBLE AS bound\nFROM ${FROM_FILES}\nWHERE ${where.sql}`;
  const page = `SELECT ${SUMMARY_COLUMNS}${matched}\nFROM ${FROM_FILES}\nWHERE ${where.sql}\n  AND ${key.within}\nORDER BY ${ORDER_BY[p.sort]}\nLIMIT $limit OFFSET $offset`;
  return {
    head: { sql: head, params: { ...where.params, k: offset + p.pageSize } },
    page: { sql: page, params: { ...where.params, limit: p.pageSize, offset } },
  };
}

const iso = (ms: unknown) => new Date(Number(ms)).toISOString();
const num = (v: unknown) => (v === null || v === undefined ? null : Number(v));

export interface ExecutionSummary {
  executionId: string;
  traceId: string | null;
  service: string;
  environment: string;
  mode: Mode;
  source: string;
  endpoint: string;
  method: string | null;
  statusCode: number | null;
  durationMs: number;
  outcome: Outcome;
  startedAt: string;
  issueId: string | null;
  exceptionType: string | null;
  matchedContext?: Record<string, unknown>;
}

function toSummary(r: Row, mode: Mode): ExecutionSummary {
  return {
    executionId: r.execution_id as string,
    traceId: (r.trace_id as string | null) ?? null,
    service: r.service as string,
    environment: r.environment as string,
    mode,
    source: r.source as string,
    endpoint: r.endpoint as string,
    method: (r.method as string | null) ?? null,
    statusCode: num(r.status_code),
    durationMs: Number(r.duration_ms),
    outcome: r.outcome as Outcome,
    startedAt: iso(r.started_at_ms),
    issueId: (r.issue_id as string | null) ?? null,
    exceptionType: (r.exception_type as string | null) ?? null,
  };
}

async function files(
  engineDataDir: string,
  dataset: DatasetName,
  f: { workspaceId: string; mode: Mode },
  from: number,
  to: number,
) {
  return listPartitionFiles(engineDataDir, dataset, f.workspaceId, f.mode, from, to);
}

export interface ExecutionPage {
  data: ExecutionSummary[];
  total: number;
}

export async function listExecutions(
  engine: QueryEngine,
  dataDir: string,
  f: ExecutionFilter,
  p: Page,
): Promise<ExecutionPage> {
  const paths = await files(dataDir, 'executions', f, f.from, f.to);
  if (paths.length === 0) return { data: [], total: 0 };
  // Only a context search needs to know which indexed columns the files have.
  const available = f.context?.length ? await engine.columnsOf(paths) : undefined;
  const q = buildListQuery(f, p, available);
  const [head] = await engine.all(q.head.sql, { ...q.head.params, files: paths });
  const total = Number(head?.total ?? 0);
  // Nothing on this page (or at all): the page statement would find no row.
  if (total <= (p.page - 1) * p.pageSize || head?.bound === null || head?.bound === undefined)
    return { data: [], total };
  const rows = await engine.all(q.page.sql, { ...q.page.params, files: paths, bound: Number(head.bound) });
  const data = rows.map((r) => {
    const summary: ExecutionSummary = toSummary(r, f.mode);
    if (p.includeMatchedContext && f.context?.length) {
      summary.matchedContext = Object.fromEntries(
        f.context.map((c, k) => [c.path, json(r[`matched_${k}`]) ?? null]),
      );
    }
    return summary;
  });
  return { data, total };
}

export interface ExecutionDetail extends ExecutionSummary {
  spanId: string | null;
  parentSpanId: string | null;
  context: unknown;
  request: unknown;
  response: unknown;
  exception: unknown;
  outcomeReason: string;
  outcomeEvidence: unknown;
  truncated: boolean;
  issue: { id: string; title: string; status: string } | null;
  logs: LogItem[];
  logsTruncated: boolean;
}

export const DETAIL_LOG_LIMIT = 1000;

/**
 * The stored row of one execution (the first stored copy, as compaction keeps), with `columns` besides the
 * summary's; null when the workspace and mode have no such execution.
 */
async function findExecutionRow(
  engine: QueryEngine,
  dataDir: string,
  scope: { workspaceId: string; mode: Mode },
  executionId: string,
  columns = '',
): Promise<Row | null> {
  const all = await files(dataDir, 'executions', scope, 0, Number.MAX_SAFE_INTEGER);
  const where = await locate(engine, all, executionId);
  if (where.files.length === 0) return null;
  const hint = where.hint ? ' AND service = $service AND started_at = epoch_ms($startedAt::BIGINT)' : '';
  // No LIMIT 1: with one, DuckDB materializes late (finds the row, then reads its row group a second time for
  // the other columns), which costs a third more; the stored copies of one id are few and sorted here anyway.
  const rows = await engine.all(
    `SELECT ${SUMMARY_COLUMNS}${columns}
     FROM ${FROM_FILES}
     WHERE execution_id = $id${hint}
     ORDER BY received_at ASC, ingest_seq ASC`,
    {
      files: where.files,
      id: executionId,
      ...(where.hint ? { service: where.hint.service, startedAt: where.hint.startedAtMs } : {}),
    },
  );
  return rows[0] ?? null;
}

/**
 * A compacted file's id index and the range of ids it holds (from its footer statistics; null bounds when the
 * writer left them out); null when the file has none (compacted before indexes were written). Files are
 * immutable once visible, so this is read once per file.
 */
interface IdIndex {
  path: string;
  min: string | null;
  max: string | null;
}
const idIndexes = new Map<string, IdIndex | null>();

async function idIndexesOf(engine: QueryEngine, compacted: string[]): Promise<(IdIndex | null)[]> {
  const unknown = compacted.filter((p) => !idIndexes.has(p));
  if (unknown.length > 0) {
    const present = (
      await Promise.all(
        unknown.map((p) =>
          fs.access(idIndexPath(p)).then(
            () => p,
            () => null,
          ),
        ),
      )
    ).filter((p) => p !== null);
    const ranges =
      present.length === 0
        ? []
        : await engine.all(
            `SELECT file_name, min(stats_min_value) AS min, max(stats_max_value) AS max,
               count(*) FILTER (WHERE stats_min_value IS NULL OR stats_max_value IS NULL) AS open
             FROM parquet_metadata($files) WHERE path_in_schema = 'execution_id' GROUP BY file_name`,
            { files: present.map(idIndexPath) },
          );
    const byIndex = new Map(ranges.map((r) => [r.file_name as string, r]));
    if (idIndexes.size > 100_000) idIndexes.clear();
    for (const p of unknown) {
      const r = byIndex.get(idIndexPath(p));
      // One row group without statistics leaves the file's range open.
      const bounded = r && Number(r.open) === 0;
      idIndexes.set(
        p,
        present.includes(p)
          ? {
              path: idIndexPath(p),
              min: bounded ? (r.min as string) : null,
              max: bounded ? (r.max as string) : null,
            }
          : null,
      );
    }
  }
  return compacted.map((p) => idIndexes.get(p) ?? null);
}

/** Where an execution may be: files to read, and when the id index placed it, its service and start. */
interface Located {
  files: string[];
  /** One indexed hit: the row-group statistics of these two columns single out its row group. */
  hint?: { service: string; startedAtMs: number };
}

/**
 * The files that may hold `executionId`: a compacted file only when its sorted id index has the id (one small
 * row group per index, found by its statistics), every other (recent, small) file as it is. An index whose id
 * range excludes the id is not even opened: with time-ordered ids (ULIDs) one hour's index is read, not all.
 * Ids are ASCII (schemas/ingest-items.ts), so JavaScript's string order is DuckDB's.
 */
async function locate(engine: QueryEngine, paths: string[], executionId: string): Promise<Located> {
  const compacted = paths.filter((p) => path.basename(p).startsWith(COMPACTED_PREFIX));
  const rest = paths.filter((p) => !path.basename(p).startsWith(COMPACTED_PREFIX));
  const indexes = await idIndexesOf(engine, compacted);
  const toSearch: string[] = [];
  indexes.forEach((ix, i) => {
    if (!ix) rest.push(compacted[i]!);
    else if ((ix.min === null || ix.min <= executionId) && (ix.max === null || executionId <= ix.max))
      toSearch.push(ix.path);
  });
  if (toSearch.length === 0) return { files: rest };
  const hits = await engine.all(
    `SELECT filename, service, epoch_ms(started_at)::DOUBLE AS started_at_ms
     FROM read_parquet($files, filename = true) WHERE execution_id = $id`,
    { files: toSearch, id: executionId },
  );
  const files = [...new Set(hits.map((h) => (h.filename as string).slice(0, -'.ids'.length))), ...rest];
  const only = hits.length === 1 && rest.length === 0 ? hits[0]! : null;
  return only
    ? { files, hint: { service: only.service as string, startedAtMs: Number(only.started_at_ms) } }
    : { files };
}

/** An execution's summary, or null: the cheap existence check. */
export async function findExecution(
  engine: QueryEngine,
  dataDir: string,
  scope: { workspaceId: string; mode: Mode },
  executionId: string,
): Promise<ExecutionSummary | null> {
  const r = await findExecutionRow(engine, dataDir, scope, executionId);
  return r ? toSummary(r, scope.mode) : null;
}

export async function getExecution(
  engine: QueryEngine,
  dataDir: string,
  scope: { workspaceId: string; mode: Mode },
  executionId: string,
): Promise<ExecutionDetail | null> {
  const r = await findExecutionRow(
    engine,
    dataDir,
    scope,
    executionId,
    ', span_id, parent_span_id, context, request, response, exception, outcome_reason, outcome_evidence, truncated',
  );
  if (!r) return null;
  const summary = toSummary(r, scope.mode);
  const startedAt = Number(r.started_at_ms);
  // One more than shown, to know whether there are more (then GET /api/executions/{id}/logs pages them all).
  const logs = await firstExecutionLogs(
    engine,
    dataDir,
    scope,
    { executionId, startedAt, durationMs: summary.durationMs },
    DETAIL_LOG_LIMIT + 1,
  );
  return {
    ...summary,
    spanId: (r.span_id as string | null) ?? null,
    parentSpanId: (r.parent_span_id as string | null) ?? null,
    context: json(r.context),
    request: json(r.request),
    response: json(r.response),
    exception: json(r.exception),
    outcomeReason: r.outcome_reason as string,
    outcomeEvidence: json(r.outcome_evidence),
    truncated: Boolean(r.truncated),
    issue: null,
    logs: logs.slice(0, DETAIL_LOG_LIMIT),
    logsTruncated: logs.length > DETAIL_LOG_LIMIT,
  };
}
