import path from 'node:path';
import type {
  ExceptionItem,
  OutcomeEvidenceItem,
  RequestItem,
  ResponseItem,
} from '../schemas/ingest-items.js';
import type { IssueStatus } from '../schemas/issues.js';
import type { ExecutionSource, Mode, Outcome } from '../schemas/records.js';
import { HOUR_MS } from '../schemas/time.js';
import type { DatasetName } from '../storage/datasets.js';
import type { BuiltQuery, QueryEngine, Row, SqlParam } from '../storage/duckdb.js';
import { listPartitionFiles, partitionHourOf } from '../storage/layout.js';
import { byIdDataName } from '../storage/manifest.js';
import { type Constraint, constraintSql } from './constraints.js';
import {
  type ColumnRef,
  type ContextFilter,
  type ContextValue,
  columnRef,
  contextFilterSql,
  matchedValueSql,
} from './context-filter.js';
import { filesForId } from './id-index.js';
import {
  buildLogListQuery,
  executionLogWindow,
  firstExecutionLogs,
  json,
  type LogItem,
  logFiles,
  toLogItem,
} from './logs.js';
import { childSpanLogs, executionSpans, type SpanItem } from './spans.js';

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

/** The files bound as `$<param>`. */
const fromFiles = (param: string) =>
  `read_parquet($${param}, union_by_name = true, hive_partitioning = false)`;
const FROM_FILES = fromFiles('files');

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
  source: ExecutionSource;
  endpoint: string;
  method: string | null;
  statusCode: number | null;
  durationMs: number;
  outcome: Outcome;
  startedAt: string;
  issueId: string | null;
  exceptionType: string | null;
  /** Per context filter, the value that matched (null: none). */
  matchedContext?: Record<string, ContextValue | null>;
}

function toSummary(r: Row, mode: Mode): ExecutionSummary {
  return {
    executionId: r.execution_id as string,
    traceId: (r.trace_id as string | null) ?? null,
    service: r.service as string,
    environment: r.environment as string,
    mode,
    source: r.source as ExecutionSource,
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
        f.context.map((c, k) => [c.path, (json(r[`matched_${k}`]) as ContextValue | null) ?? null]),
      );
    }
    return summary;
  });
  return { data, total };
}

export interface ExecutionDetail extends ExecutionSummary {
  spanId: string | null;
  parentSpanId: string | null;
  /** The nested parts as ingested, normalized and scrubbed (CONTRACT §5). */
  context: Record<string, unknown> | null;
  request: RequestItem | null;
  response: ResponseItem | null;
  exception: ExceptionItem | null;
  outcomeReason: string;
  outcomeEvidence: OutcomeEvidenceItem[] | null;
  truncated: boolean;
  issue: { id: string; title: string; status: IssueStatus } | null;
  logs: LogItem[];
  logsTruncated: boolean;
  spans: SpanItem[];
}

export const DETAIL_LOG_LIMIT = 1000;

const DETAIL_COLUMNS =
  ', span_id, parent_span_id, context, request, response, exception, outcome_reason, outcome_evidence, truncated';

/** The files that may hold an execution: by-id parts and the current hour's files; none when no file has it. */
async function executionFiles(
  dataDir: string,
  scope: { workspaceId: string; mode: Mode },
  executionId: string,
): Promise<string[]> {
  const all = await files(dataDir, 'executions', scope, 0, Number.MAX_SAFE_INTEGER);
  return filesForId(all, executionId);
}

/**
 * The stored row of one execution in `toRead` (the first stored copy, as compaction keeps), with `columns`
 * besides the summary's; null when none has it.
 */
/** The stored copies of `$executionId` in the files bound as `$rowFiles`, with `columns` besides the summary's. */
const rowStatement = (columns: string) => `SELECT ${SUMMARY_COLUMNS}${columns}, received_at, ingest_seq
     FROM ${fromFiles('rowFiles')} WHERE execution_id = $executionId`;

async function readExecutionRow(
  engine: QueryEngine,
  toRead: string[],
  executionId: string,
  columns = '',
): Promise<Row | null> {
  if (toRead.length === 0) return null;
  // No LIMIT 1: with one, DuckDB materializes late (finds the row, then reads its row group a second time for
  // the other columns); the stored copies of one id are few and sorted here anyway.
  const rows = await engine.all(`${rowStatement(columns)} ORDER BY received_at ASC, ingest_seq ASC`, {
    rowFiles: toRead,
    executionId,
  });
  return rows[0] ?? null;
}

/** An execution's summary, or null: the cheap existence check. */
export async function findExecution(
  engine: QueryEngine,
  dataDir: string,
  scope: { workspaceId: string; mode: Mode },
  executionId: string,
): Promise<ExecutionSummary | null> {
  const toRead = await executionFiles(dataDir, scope, executionId);
  const r = await readExecutionRow(engine, toRead, executionId);
  return r ? toSummary(r, scope.mode) : null;
}

export async function getExecution(
  engine: QueryEngine,
  dataDir: string,
  scope: { workspaceId: string; mode: Mode },
  executionId: string,
): Promise<ExecutionDetail | null> {
  const toRead = await executionFiles(dataDir, scope, executionId);
  if (toRead.length === 0) return null;
  // One more log than shown, to know whether there are more (then GET /api/executions/{id}/logs pages them all).
  const logPage = { page: 1, pageSize: DETAIL_LOG_LIMIT + 1, sort: 'timestamp' } as const;
  // Executions are partitioned by the hour they started in. When the files that may hold this one are of one
  // hour, its logs' window (logs.ts executionLogWindow) starts an hour before that hour and, unless it ran for
  // over an hour, ends before two hours after: the row and the logs of that much are read in one statement
  // (two concurrent ones contended for the cores: p95 34 ms against 17 at 10M executions), then the logs are
  // cut to the exact window.
  // The by-id parts that may hold it say the hour best (the current hour's files are of other hours); the guess
  // is checked against the row below, so a wrong one costs a second statement, not a wrong answer.
  const parts = toRead.filter((f) => byIdDataName(path.basename(f)) !== null);
  const hours = new Set((parts.length > 0 ? parts : toRead).map(partitionHourOf));
  const hour = hours.size === 1 ? [...hours][0]! : null;
  const guess = hour === null ? null : { from: hour - HOUR_MS, to: hour + 2 * HOUR_MS };
  const guessFilter = guess ? { ...scope, ...guess, executionId } : null;
  const guessFiles = guessFilter ? await logFiles(dataDir, guessFilter) : [];
  let r: Row | null;
  let guessedLogs: Row[] = [];
  if (guessFilter && guessFiles.length > 0) {
    const logs = buildLogListQuery(guessFilter, logPage, true).list;
    const rows = await engine.all(
      `SELECT 'e' AS kind, * FROM (${rowStatement(DETAIL_COLUMNS)})
       UNION ALL BY NAME
       SELECT 'l' AS kind, * FROM (${logs.sql})
       ORDER BY kind, received_at, ingest_seq, ts_ms, log_seq, log_file, log_row`,
      { ...logs.params, rowFiles: toRead, files: guessFiles },
    );
    // The first stored copy, as compaction keeps.
    r = rows.find((row) => row.kind === 'e') ?? null;
    guessedLogs = rows.filter((row) => row.kind === 'l');
  } else {
    r = await readExecutionRow(engine, toRead, executionId, DETAIL_COLUMNS);
  }
  if (!r) return null;
  const summary = toSummary(r, scope.mode);
  const window = executionLogWindow({ startedAt: Number(r.started_at_ms), durationMs: summary.durationMs });
  // In time order, so the guess's logs before window.to are the window's first ones (all of them when the guess
  // had fewer than its limit).
  const logs =
    guess && window.from === guess.from && window.to <= guess.to
      ? guessedLogs.filter((row) => Number(row.ts_ms) < window.to).map(toLogItem)
      : await firstExecutionLogs(engine, dataDir, scope, executionId, window, DETAIL_LOG_LIMIT + 1);
  const traced = {
    traceId: summary.traceId,
    spanId: (r.span_id as string | null) ?? null,
    startedAt: Number(r.started_at_ms),
    durationMs: summary.durationMs,
  };
  const spans = await executionSpans(engine, dataDir, scope, traced);
  if (spans.length > 0) {
    // Its child spans' logs are its logs too (CONTRACT §12), in time order with its own.
    logs.push(...(await childSpanLogs(engine, dataDir, scope, traced, spans, DETAIL_LOG_LIMIT + 1)));
    logs.sort((a, b) => (a.timestamp < b.timestamp ? -1 : a.timestamp > b.timestamp ? 1 : 0));
  }
  return {
    ...summary,
    spanId: (r.span_id as string | null) ?? null,
    parentSpanId: (r.parent_span_id as string | null) ?? null,
    context: json(r.context) as ExecutionDetail['context'],
    request: json(r.request) as ExecutionDetail['request'],
    response: json(r.response) as ExecutionDetail['response'],
    exception: json(r.exception) as ExecutionDetail['exception'],
    outcomeReason: r.outcome_reason as string,
    outcomeEvidence: json(r.outcome_evidence) as ExecutionDetail['outcomeEvidence'],
    truncated: Boolean(r.truncated),
    issue: null,
    logs: logs.slice(0, DETAIL_LOG_LIMIT),
    logsTruncated: logs.length > DETAIL_LOG_LIMIT,
    spans,
  };
}
