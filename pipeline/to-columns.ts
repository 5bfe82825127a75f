import {
  type ExecutionRecord,
  type ItemRejection,
  LOG_LEVEL_NUM,
  type LogRecord,
  type MetricRecord,
  type SpanRecord,
} from '../schemas/records.js';
import { type CellValue, ChunkSet } from '../storage/columns.js';
import { contextCells, contextColumnDefs, splitPaths } from '../storage/context-columns.js';

/**
 * Normalized records → cells in each dataset's column order (storage/datasets.ts). Keep the two in step: a
 * column added there gets its cell here, at the same position. Timestamps are UTC epoch milliseconds, stored
 * as Parquet timestamps without a zone.
 */

export interface MessageMeta {
  requestId: string;
  receivedAt: number;
  seq: number;
}

/**
 * An execution's row pushed to its partition's columns (ChunkSet.row), one cell each, then its indexed-context
 * cells: pushed cell by cell, not returned as an array of cells. A row's array and its copy into the columns (and
 * a partition looked up by a key string per row, ChunkSet.row) had cost ~1.4 µs per execution of the default body
 * with its logs, against ~0.65 without, in the parse stage on one thread.
 */
function pushExecution(
  cols: CellValue[][],
  r: ExecutionRecord,
  m: MessageMeta,
  context: readonly CellValue[],
): void {
  let c = 0;
  cols[c++]!.push(r.executionId);
  cols[c++]!.push(r.traceId);
  cols[c++]!.push(r.spanId);
  cols[c++]!.push(r.parentSpanId);
  cols[c++]!.push(r.service);
  cols[c++]!.push(r.environment);
  cols[c++]!.push(r.source);
  cols[c++]!.push(r.endpoint);
  cols[c++]!.push(r.method);
  cols[c++]!.push(r.startedAt);
  cols[c++]!.push(r.durationMs);
  cols[c++]!.push(r.statusCode);
  cols[c++]!.push(r.outcome);
  cols[c++]!.push(r.outcomeReason);
  cols[c++]!.push(r.exceptionType);
  cols[c++]!.push(r.exceptionMessage);
  cols[c++]!.push(r.issueId);
  cols[c++]!.push(r.context);
  cols[c++]!.push(r.request);
  cols[c++]!.push(r.response);
  cols[c++]!.push(r.exception);
  cols[c++]!.push(r.outcomeEvidence);
  cols[c++]!.push(r.fingerprint);
  cols[c++]!.push(r.truncated);
  cols[c++]!.push(m.requestId);
  cols[c++]!.push(m.receivedAt);
  cols[c++]!.push(m.seq);
  cols[c++]!.push(r.failureType);
  // The workspace's indexed-context columns, a cell each (null for any the context cells leave out).
  for (let k = 0; c < cols.length; k++) cols[c++]!.push(context[k] ?? null);
}

function pushLog(cols: CellValue[][], r: LogRecord, m: MessageMeta): void {
  let c = 0;
  cols[c++]!.push(r.timestamp);
  cols[c++]!.push(r.level);
  cols[c++]!.push(LOG_LEVEL_NUM[r.level]);
  cols[c++]!.push(r.message);
  cols[c++]!.push(r.service);
  cols[c++]!.push(r.environment);
  cols[c++]!.push(r.executionId);
  cols[c++]!.push(r.traceId);
  cols[c++]!.push(r.spanId);
  cols[c++]!.push(r.logger);
  cols[c++]!.push(r.attributes);
  cols[c++]!.push(r.exception);
  cols[c++]!.push(r.truncated);
  cols[c++]!.push(m.requestId);
  cols[c++]!.push(m.seq);
}

/** The failures row of an execution grouped into an issue. */
export function failureCells(r: ExecutionRecord, issueId: string, m: MessageMeta): CellValue[] {
  return [
    r.startedAt,
    issueId,
    r.executionId,
    r.service,
    r.endpointTemplate ?? r.endpoint,
    r.environment,
    m.receivedAt,
    m.seq,
    r.method,
    r.statusCode,
    r.durationMs,
  ];
}

export function metricCells(r: MetricRecord, m: MessageMeta): CellValue[] {
  return [
    r.timestamp,
    r.name,
    r.type,
    r.value,
    r.histCount,
    r.histSum,
    r.histMin,
    r.histMax,
    r.unit,
    r.service,
    r.environment,
    r.tags,
    m.requestId,
    m.seq,
  ];
}

export function spanCells(r: SpanRecord, m: MessageMeta): CellValue[] {
  return [
    r.startedAt,
    r.traceId,
    r.spanId,
    r.parentSpanId,
    r.name,
    r.kind,
    r.durationMs,
    r.status,
    r.attributes,
    r.service,
    r.environment,
    r.truncated,
    m.requestId,
    m.receivedAt,
    m.seq,
  ];
}

export function rejectionCells(r: ItemRejection, m: MessageMeta): CellValue[] {
  return [m.receivedAt, m.requestId, r.kind, r.index, r.code, JSON.stringify(r.details), m.seq];
}

/** `indexedKeys`: the workspace's indexed context keys, each stored in typed columns of its own. */
export function toChunks(
  out: {
    executions: ExecutionRecord[];
    logs: LogRecord[];
    metrics: MetricRecord[];
    rejections: ItemRejection[];
    spans?: SpanRecord[];
  },
  m: MessageMeta,
  indexedKeys: readonly string[] = [],
): ChunkSet {
  const contextDefs = contextColumnDefs(indexedKeys);
  const set = new ChunkSet({ executions: contextDefs, failures: contextDefs });
  const paths = splitPaths(indexedKeys);
  for (const r of out.executions) {
    const context = indexedKeys.length > 0 ? (r.indexedContext ?? contextCells(r.contextTree, paths)) : [];
    pushExecution(set.row('executions', r.startedAt), r, m, context);
    if (r.issueId !== null) set.add('failures', r.startedAt, [...failureCells(r, r.issueId, m), ...context]);
  }
  for (const r of out.logs) pushLog(set.row('logs', r.timestamp), r, m);
  for (const r of out.metrics) set.add('metrics', r.timestamp, metricCells(r, m));
  for (const r of out.spans ?? []) set.add('spans', r.startedAt, spanCells(r, m));
  for (const r of out.rejections) set.add('rejections', m.receivedAt, rejectionCells(r, m));
  return set;
}
