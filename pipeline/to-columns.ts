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

export function executionCells(r: ExecutionRecord, m: MessageMeta): CellValue[] {
  return [
    r.executionId,
    r.traceId,
    r.spanId,
    r.parentSpanId,
    r.service,
    r.environment,
    r.source,
    r.endpoint,
    r.method,
    r.startedAt,
    r.durationMs,
    r.statusCode,
    r.outcome,
    r.outcomeReason,
    r.exceptionType,
    r.exceptionMessage,
    r.issueId,
    r.context,
    r.request,
    r.response,
    r.exception,
    r.outcomeEvidence,
    r.fingerprint,
    r.truncated,
    m.requestId,
    m.receivedAt,
    m.seq,
    r.failureType,
  ];
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

export function logCells(r: LogRecord, m: MessageMeta): CellValue[] {
  return [
    r.timestamp,
    r.level,
    LOG_LEVEL_NUM[r.level],
    r.message,
    r.service,
    r.environment,
    r.executionId,
    r.traceId,
    r.spanId,
    r.logger,
    r.attributes,
    r.exception,
    r.truncated,
    m.requestId,
    m.seq,
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
    const cells = executionCells(r, m);
    const context = indexedKeys.length > 0 ? (r.indexedContext ?? contextCells(r.contextTree, paths)) : [];
    cells.push(...context);
    set.add('executions', r.startedAt, cells);
    if (r.issueId !== null) set.add('failures', r.startedAt, [...failureCells(r, r.issueId, m), ...context]);
  }
  for (const r of out.logs) set.add('logs', r.timestamp, logCells(r, m));
  for (const r of out.metrics) set.add('metrics', r.timestamp, metricCells(r, m));
  for (const r of out.spans ?? []) set.add('spans', r.startedAt, spanCells(r, m));
  for (const r of out.rejections) set.add('rejections', m.receivedAt, rejectionCells(r, m));
  return set;
}
