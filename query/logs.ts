import type { LogSort } from '../schemas/api-logs.js';
import type { ExceptionItem } from '../schemas/ingest-items.js';
import { LOG_LEVEL_NUM, type LogLevel, type Mode } from '../schemas/records.js';
import { HOUR_MS } from '../schemas/time.js';
import type { BuiltQuery, QueryEngine, Row, SqlParam } from '../storage/duckdb.js';
import { listPartitionFiles } from '../storage/layout.js';
import { filesForId } from './id-index.js';

/**
 * SQL for `GET /api/logs` and `GET /api/executions/{id}/logs` (CONTRACT §6.4, §7). Every request value travels
 * as a typed parameter; the only interpolated pieces are the fixed sort orders below.
 */

/** A stored log record as answered (CONTRACT §7); the nested parts are the ingested ones, scrubbed. */
export interface LogItem {
  timestamp: string;
  level: LogLevel;
  message: string;
  service: string;
  environment: string;
  executionId: string | null;
  traceId: string | null;
  spanId: string | null;
  logger: string | null;
  attributes: Record<string, unknown> | null;
  exception: ExceptionItem | null;
  truncated: boolean;
}

export interface LogFilter {
  workspaceId: string;
  mode: Mode;
  from: number;
  to: number;
  serviceName?: string | undefined;
  environment?: string | undefined;
  /** The minimum level. */
  level?: LogLevel | undefined;
  executionId?: string | undefined;
  traceId?: string | undefined;
  /** Case-insensitive substring of the message, taken literally (no wildcards). */
  search?: string | undefined;
}

export interface LogPage {
  page: number;
  pageSize: number;
  sort: LogSort;
}

// Logs of one request can share timestamp and ingest_seq; the file and the row within it make the order
// total, so LIMIT/OFFSET pages never repeat or skip a row.
const ORDER_BY: Record<LogSort, string> = {
  '-timestamp': 'timestamp DESC, ingest_seq DESC, filename DESC, file_row_number DESC',
  timestamp: 'timestamp ASC, ingest_seq ASC, filename ASC, file_row_number ASC',
};

export const LOG_COLUMNS = `epoch_ms(timestamp)::DOUBLE AS ts_ms, level, message, service, environment, execution_id,
  trace_id, span_id, logger, attributes, exception, truncated`;

const FROM_FILES =
  'read_parquet($files, union_by_name = true, hive_partitioning = false, filename = true, file_row_number = true)';

export function buildLogWhere(f: LogFilter): BuiltQuery {
  const where = ['timestamp >= epoch_ms($from::BIGINT)', 'timestamp < epoch_ms($to::BIGINT)'];
  const params: Record<string, SqlParam> = { from: f.from, to: f.to };
  const eq = (column: string, name: string, value: string | undefined) => {
    if (value === undefined) return;
    where.push(`${column} = $${name}`);
    params[name] = value;
  };
  eq('service', 'service', f.serviceName);
  eq('environment', 'environment', f.environment);
  eq('execution_id', 'executionId', f.executionId);
  eq('trace_id', 'traceId', f.traceId);
  if (f.level !== undefined) {
    where.push('level_num >= $levelNum');
    params.levelNum = LOG_LEVEL_NUM[f.level];
  }
  if (f.search !== undefined) {
    // contains() matches a plain substring, so `%`, `_` and `\` in the needle are literal.
    where.push('contains(lower(message), lower($search))');
    params.search = f.search;
  }
  return { sql: where.join('\n  AND '), params };
}

/**
 * The list and count statements, over the files bound as `$files`. `sortKeys`: the list also answers each row's
 * place in the order after ts_ms (log_seq, log_file, log_row), to order it by within a bigger statement.
 */
export function buildLogListQuery(
  f: LogFilter,
  p: LogPage,
  sortKeys = false,
): { list: BuiltQuery; count: BuiltQuery } {
  const where = buildLogWhere(f);
  const keys = sortKeys ? ', ingest_seq AS log_seq, filename AS log_file, file_row_number AS log_row' : '';
  const list = `SELECT ${LOG_COLUMNS}${keys}\nFROM ${FROM_FILES}\nWHERE ${where.sql}\nORDER BY ${ORDER_BY[p.sort]}\nLIMIT $limit OFFSET $offset`;
  const count = `SELECT count(*)::DOUBLE AS total\nFROM read_parquet($files, union_by_name = true, hive_partitioning = false)\nWHERE ${where.sql}`;
  return {
    list: { sql: list, params: { ...where.params, limit: p.pageSize, offset: (p.page - 1) * p.pageSize } },
    count: { sql: count, params: where.params },
  };
}

/**
 * The files a filter's logs are read from: with an execution id, the by-id parts that may hold its logs
 * instead of the compacted files they copy (query/id-index.ts).
 */
export async function logFiles(dataDir: string, f: LogFilter): Promise<string[]> {
  const files = await listPartitionFiles(dataDir, 'logs', f.workspaceId, f.mode, f.from, f.to);
  return f.executionId === undefined || files.length === 0 ? files : filesForId(files, f.executionId);
}

/** A JSON text column back to its value (null stays null). */
export const json = (v: unknown) => (typeof v === 'string' ? (JSON.parse(v) as unknown) : null);

export function toLogItem(l: Row): LogItem {
  return {
    timestamp: new Date(Number(l.ts_ms)).toISOString(),
    level: l.level as LogLevel,
    message: l.message as string,
    service: l.service as string,
    environment: l.environment as string,
    executionId: (l.execution_id as string | null) ?? null,
    traceId: (l.trace_id as string | null) ?? null,
    spanId: (l.span_id as string | null) ?? null,
    logger: (l.logger as string | null) ?? null,
    attributes: json(l.attributes) as LogItem['attributes'],
    exception: json(l.exception) as LogItem['exception'],
    truncated: Boolean(l.truncated),
  };
}

export async function listLogs(
  engine: QueryEngine,
  dataDir: string,
  f: LogFilter,
  p: LogPage,
): Promise<{ data: LogItem[]; total: number }> {
  const files = await logFiles(dataDir, f);
  if (files.length === 0) return { data: [], total: 0 };
  const q = buildLogListQuery(f, p);
  const [rows, count] = await Promise.all([
    engine.all(q.list.sql, { ...q.list.params, files }),
    engine.all(q.count.sql, { ...q.count.params, files }),
  ]);
  return { data: rows.map(toLogItem), total: Number(count[0]?.total ?? 0) };
}

/** How far around an execution its logs are looked for (they share its trace of time, give or take). */
const EXECUTION_LOG_WINDOW_MS = HOUR_MS;

/**
 * The time window an execution's logs are looked for in: ±1 h around it, widened to whole hours (the files
 * are hour partitions, so the widening costs nothing and leaves no partition half in).
 */
export function executionLogWindow(execution: { startedAt: number; durationMs: number }): {
  from: number;
  to: number;
} {
  return {
    from: Math.floor((execution.startedAt - EXECUTION_LOG_WINDOW_MS) / HOUR_MS) * HOUR_MS,
    to: Math.ceil((execution.startedAt + execution.durationMs + EXECUTION_LOG_WINDOW_MS) / HOUR_MS) * HOUR_MS,
  };
}

/** Where an execution's logs are looked for. */
function executionLogFilter(
  scope: { workspaceId: string; mode: Mode },
  execution: { executionId: string; startedAt: number; durationMs: number },
): LogFilter {
  return { ...scope, ...executionLogWindow(execution), executionId: execution.executionId };
}

/** All logs of one execution, in time order (CONTRACT §6.4). */
export async function listExecutionLogPage(
  engine: QueryEngine,
  dataDir: string,
  scope: { workspaceId: string; mode: Mode },
  execution: { executionId: string; startedAt: number; durationMs: number },
  page: { page: number; pageSize: number },
): Promise<{ data: LogItem[]; total: number }> {
  return listLogs(engine, dataDir, executionLogFilter(scope, execution), { ...page, sort: 'timestamp' });
}

/**
 * The first `limit` logs of one execution within `window`, in time order, for the detail view: without the
 * count of them all, a second scan of every log in the window as long as the first.
 */
export async function firstExecutionLogs(
  engine: QueryEngine,
  dataDir: string,
  scope: { workspaceId: string; mode: Mode },
  executionId: string,
  window: { from: number; to: number },
  limit: number,
): Promise<LogItem[]> {
  const f: LogFilter = { ...scope, ...window, executionId };
  const files = await logFiles(dataDir, f);
  if (files.length === 0) return [];
  const q = buildLogListQuery(f, { page: 1, pageSize: limit, sort: 'timestamp' });
  return (await engine.all(q.list.sql, { ...q.list.params, files })).map(toLogItem);
}
