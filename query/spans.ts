import type { Mode } from '../schemas/records.js';
import type { QueryEngine } from '../storage/duckdb.js';
import { listPartitionFiles } from '../storage/layout.js';
import { filesForId } from './id-index.js';
import { buildLogWhere, executionLogWindow, json, LOG_COLUMNS, type LogItem, toLogItem } from './logs.js';

/**
 * An execution's child spans (CONTRACT §12): the OTLP spans of its trace that descend from it through spans that
 * are not executions themselves, sent in any request, and the logs of those spans ("a log record whose spanId is
 * a child span's belongs to that span's execution, whichever arrives first"). Both are looked for in the window its
 * logs are (logs.ts executionLogWindow).
 */

export interface SpanItem {
  spanId: string;
  parentSpanId: string | null;
  name: string;
  kind: string;
  startedAt: string;
  durationMs: number;
  status: string;
  attributes: Record<string, unknown> | null;
}

export const DETAIL_SPAN_LIMIT = 1000;
/** The spans of one trace read at most: a trace this big is cut, its first spans in time kept. */
const TRACE_SPAN_LIMIT = 20_000;

const FROM = 'read_parquet($files, union_by_name = true, hive_partitioning = false)';

/** One copy of each span (the first stored: the same span resent in another body is one span). */
const TRACE_SPANS = `SELECT span_id, parent_span_id, name, kind, epoch_ms(started_at)::DOUBLE AS ts_ms,
    duration_ms, status, attributes
  FROM ${FROM}
  WHERE trace_id = $traceId
    AND started_at >= epoch_ms($from::BIGINT) AND started_at < epoch_ms($to::BIGINT)
  QUALIFY row_number() OVER (PARTITION BY span_id ORDER BY received_at, ingest_seq) = 1
  ORDER BY ts_ms, span_id
  LIMIT ${TRACE_SPAN_LIMIT}`;

/** An execution's window (its logs', logs.ts executionLogWindow) and the files of `dataset` over it. */
async function windowFiles(
  dataDir: string,
  dataset: 'spans' | 'logs',
  scope: { workspaceId: string; mode: Mode },
  execution: { startedAt: number; durationMs: number },
): Promise<{ window: { from: number; to: number }; files: string[] }> {
  const window = executionLogWindow(execution);
  const files = await listPartitionFiles(
    dataDir,
    dataset,
    scope.workspaceId,
    scope.mode,
    window.from,
    window.to,
  );
  return { window, files };
}

export async function executionSpans(
  engine: QueryEngine,
  dataDir: string,
  scope: { workspaceId: string; mode: Mode },
  execution: { traceId: string | null; spanId: string | null; startedAt: number; durationMs: number },
): Promise<SpanItem[]> {
  const { traceId, spanId } = execution;
  if (traceId === null || spanId === null) return [];
  const { window, files } = await windowFiles(dataDir, 'spans', scope, execution);
  if (files.length === 0) return [];
  const rows = await engine.all(TRACE_SPANS, { files, traceId, ...window });
  const children = new Map<string, typeof rows>();
  for (const r of rows) {
    const parent = (r.parent_span_id as string | null) ?? '';
    const list = children.get(parent);
    if (list) list.push(r);
    else children.set(parent, [r]);
  }
  // Descendants, breadth first from the execution's span; the spans of a cycle (a broken sender) are taken once.
  const picked: typeof rows = [];
  const seen = new Set<string>([spanId]);
  const queue = [spanId];
  while (queue.length > 0 && picked.length < DETAIL_SPAN_LIMIT) {
    for (const r of children.get(queue.shift()!) ?? []) {
      const id = r.span_id as string;
      if (seen.has(id)) continue;
      seen.add(id);
      picked.push(r);
      queue.push(id);
    }
  }
  return picked
    .slice(0, DETAIL_SPAN_LIMIT)
    .sort((a, b) => Number(a.ts_ms) - Number(b.ts_ms))
    .map((r) => ({
      spanId: r.span_id as string,
      parentSpanId: (r.parent_span_id as string | null) ?? null,
      name: r.name as string,
      kind: r.kind as string,
      startedAt: new Date(Number(r.ts_ms)).toISOString(),
      durationMs: Number(r.duration_ms),
      status: r.status as string,
      attributes: json(r.attributes) as SpanItem['attributes'],
    }));
}

/** The first `limit` logs, in time order, whose span is one of `spans` (an execution's child spans). */
export async function childSpanLogs(
  engine: QueryEngine,
  dataDir: string,
  scope: { workspaceId: string; mode: Mode },
  execution: { traceId: string | null; startedAt: number; durationMs: number },
  spans: readonly SpanItem[],
  limit: number,
): Promise<LogItem[]> {
  if (spans.length === 0 || execution.traceId === null) return [];
  const { window, files: all } = await windowFiles(dataDir, 'logs', scope, execution);
  if (all.length === 0) return [];
  const ids = spans.map((s) => s.spanId);
  const files = [...new Set((await Promise.all(ids.map((id) => filesForId(all, id)))).flat())];
  if (files.length === 0) return [];
  const where = buildLogWhere({ ...scope, ...window, traceId: execution.traceId });
  const rows = await engine.all(
    `SELECT ${LOG_COLUMNS}
     FROM ${FROM}
     WHERE ${where.sql} AND list_contains($ids, execution_id)
     ORDER BY timestamp, ingest_seq
     LIMIT $limit`,
    { ...where.params, files, ids, limit },
  );
  return rows.map(toLogItem);
}
