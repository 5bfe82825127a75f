import type { FailureType, IssueOccurrences } from './issues.js';

/**
 * Normalized records: what the pipeline makes of each valid ingested item, before it becomes columns.
 * Times are epoch milliseconds (UTC). Nested structures are kept as JSON text: they are shown, not filtered
 * (indexed context gets its own columns in a later stage).
 */

export type Mode = 'test' | 'live';
export const MODES = ['test', 'live'] as const;

export type Outcome = 'success' | 'failed' | 'unknown';
export const OUTCOMES = ['success', 'failed', 'unknown'] as const;

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The stored `level_num` of a level: trace=1 … fatal=6, the order of LOG_LEVELS (the minimum-level filter). */
export const LOG_LEVEL_NUM = Object.fromEntries(LOG_LEVELS.map((l, i) => [l, i + 1])) as Record<
  LogLevel,
  number
>;

export const EXECUTION_SOURCES = ['http', 'worker', 'job', 'message', 'scheduled', 'custom'] as const;
export type ExecutionSource = (typeof EXECUTION_SOURCES)[number];

export const METRIC_TYPES = ['counter', 'gauge', 'histogram'] as const;
export type MetricType = (typeof METRIC_TYPES)[number];

export interface ExecutionRecord {
  executionId: string;
  traceId: string | null;
  spanId: string | null;
  parentSpanId: string | null;
  service: string;
  environment: string;
  source: ExecutionSource;
  endpoint: string;
  /** Upper-cased. */
  method: string | null;
  startedAt: number;
  durationMs: number;
  statusCode: number | null;
  outcome: Outcome;
  /** CONTRACT §5: `sdk`, `exception`, `status_5xx`, `evidence:<kind>`, `field:<path>`, `status`, `no_evidence`, `rule:<i>`. */
  outcomeReason: string;
  exceptionType: string | null;
  exceptionMessage: string | null;
  /** JSON text of the scrubbed values, or null when absent. */
  context: string | null;
  /** The same scrubbed context as an object, for the indexed-context columns; not stored as such. */
  contextTree?: unknown;
  /** Those columns' cells already made (by the direct lane, pipeline/direct-executions.ts), in their order. */
  indexedContext?: (string | number | boolean | null)[];
  request: string | null;
  response: string | null;
  exception: string | null;
  outcomeEvidence: string | null;
  /** JSON text of the fingerprint parts (CONTRACT §9) of a failed execution; null otherwise. */
  fingerprint: string | null;
  /** The issue a failed execution is grouped into; null otherwise, or when no workspace was given. */
  issueId: string | null;
  failureType: FailureType | null;
  /** A failed execution's endpoint template (request.route, else the endpoint with ids as `:id`); null otherwise. */
  endpointTemplate: string | null;
  truncated: boolean;
}

export interface LogRecord {
  timestamp: number;
  level: LogLevel;
  message: string;
  service: string;
  environment: string;
  executionId: string | null;
  traceId: string | null;
  spanId: string | null;
  logger: string | null;
  attributes: string | null;
  exception: string | null;
  truncated: boolean;
}

export interface MetricRecord {
  timestamp: number;
  name: string;
  type: MetricType;
  /** counter and gauge; null for a histogram. */
  value: number | null;
  histCount: number | null;
  histSum: number | null;
  histMin: number | null;
  histMax: number | null;
  unit: string | null;
  service: string;
  environment: string;
  /** JSON text of the string pairs, or null. */
  tags: string | null;
}

/** What a rejected item was: the ingest envelope's three kinds, and OTLP spans (CONTRACT §12). */
export const ITEM_KINDS = ['executions', 'logs', 'metrics', 'spans'] as const;
export type ItemKind = (typeof ITEM_KINDS)[number];

/**
 * An OTLP span that is not an execution (kind INTERNAL, CLIENT, PRODUCER), kept for its execution's detail
 * (CONTRACT §12).
 */
export interface SpanRecord {
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  name: string;
  /** internal, client, producer (or unspecified). */
  kind: string;
  startedAt: number;
  durationMs: number;
  /** unset, ok, error. */
  status: string;
  /** JSON text of the attributes, or null. */
  attributes: string | null;
  service: string;
  environment: string;
  truncated: boolean;
}

export interface ErrorDetail {
  path: string;
  message: string;
}

/** An item the pipeline refused: kept and listed, never dropped silently (CONTRACT §5). */
export interface ItemRejection {
  kind: ItemKind;
  index: number;
  code: 'VALIDATION_ERROR' | 'FORBIDDEN';
  details: ErrorDetail[];
}

export interface ProcessedPayload {
  executions: ExecutionRecord[];
  logs: LogRecord[];
  metrics: MetricRecord[];
  rejections: ItemRejection[];
  /** Per issue, the failed executions grouped into it (empty without a workspace). */
  issues: IssueOccurrences[];
}
