import type { ItemKind } from '../../schemas/records.js';
import { logProblem, mapLogs, type OtlpLogRecord, readLogsJson, readLogsProtobuf } from './logs.js';
import {
  type MappedMetric,
  mapMetrics,
  type OtlpDataPoint,
  pointProblem,
  readMetricsJson,
  readMetricsProtobuf,
} from './metrics.js';
import type { Signal } from './proto.js';
import {
  type ChildSpan,
  mapSpans,
  type OtlpSpan,
  readTracesJson,
  readTracesProtobuf,
  spanProblem,
} from './traces.js';

/**
 * One OTLP body, whatever its signal and encoding: read (CONTRACT §12's "decode and check", done by the API before
 * it answers) and mapped (done by the pipeline). Both run in worker threads.
 */

export type OtlpEncoding = 'protobuf' | 'json';

/** The format header of an OTLP message on the ingest stream (schemas/broker-messages.ts). */
export type OtlpFormat = `otlp-${Signal}-${OtlpEncoding}`;

export const otlpFormat = (signal: Signal, encoding: OtlpEncoding): OtlpFormat =>
  `otlp-${signal}-${encoding}`;

export function parseOtlpFormat(format: string): { signal: Signal; encoding: OtlpEncoding } | null {
  const m = /^otlp-(traces|logs|metrics)-(protobuf|json)$/.exec(format);
  return m ? { signal: m[1] as Signal, encoding: m[2] as OtlpEncoding } : null;
}

/** A body that is not the signal's Export…ServiceRequest in its encoding: a 400, nothing kept. */
export class OtlpDecodeError extends Error {}

type Items =
  | { signal: 'traces'; items: OtlpSpan[] }
  | { signal: 'logs'; items: OtlpLogRecord[] }
  | {
      signal: 'metrics';
      items: OtlpDataPoint[];
    };

function read(signal: Signal, encoding: OtlpEncoding, body: Uint8Array): Items {
  try {
    if (encoding === 'json') {
      const parsed = JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8'));
      if (signal === 'traces') return { signal, items: readTracesJson(parsed) };
      if (signal === 'logs') return { signal, items: readLogsJson(parsed) };
      return { signal, items: readMetricsJson(parsed) };
    }
    if (signal === 'traces') return { signal, items: readTracesProtobuf(body) };
    if (signal === 'logs') return { signal, items: readLogsProtobuf(body) };
    return { signal, items: readMetricsProtobuf(body) };
  } catch (err) {
    const what = encoding === 'json' ? 'OTLP/JSON' : 'OTLP protobuf';
    throw new OtlpDecodeError(`the body is not a valid ${what} ${signal} request: ${(err as Error).message}`);
  }
}

export interface OtlpCheck {
  /** Spans, log records or data points in the body. */
  items: number;
  /** Of them, those that cannot be mapped: the answer's partialSuccess. */
  rejected: number;
  /** The first rejected item's reason, with its index. */
  message: string | null;
}

/** Reads a body and counts what cannot be mapped; throws OtlpDecodeError when it cannot be read. */
export function checkOtlp(signal: Signal, encoding: OtlpEncoding, body: Uint8Array): OtlpCheck {
  const decoded = read(signal, encoding, body);
  const problem = (i: number): string | null =>
    decoded.signal === 'traces'
      ? spanProblem(decoded.items[i]!)
      : decoded.signal === 'logs'
        ? logProblem(decoded.items[i]!)
        : pointProblem(decoded.items[i]!);
  let rejected = 0;
  let message: string | null = null;
  for (let i = 0; i < decoded.items.length; i++) {
    const p = problem(i);
    if (p === null) continue;
    rejected++;
    message ??= `item ${i}: ${p}`;
  }
  if (message !== null && rejected > 1)
    message += ` (and ${rejected - 1} more; see GET /api/ingest/rejections)`;
  return { items: decoded.items.length, rejected, message };
}

export interface MappedOtlp {
  /** Ingest-shaped items (as /api/ingest takes them), each with its index in the body. */
  executions: { index: number; item: Record<string, unknown> }[];
  logs: { index: number; item: Record<string, unknown> }[];
  metrics: MappedMetric[];
  spans: ChildSpan[];
  /** Items that cannot be mapped, of the body's kind. */
  rejected: { kind: ItemKind; index: number; message: string }[];
}

/** Reads and maps a body; throws OtlpDecodeError when it cannot be read. */
export function mapOtlp(signal: Signal, encoding: OtlpEncoding, body: Uint8Array): MappedOtlp {
  const decoded = read(signal, encoding, body);
  const out: MappedOtlp = { executions: [], logs: [], metrics: [], spans: [], rejected: [] };
  if (decoded.signal === 'traces') {
    const m = mapSpans(decoded.items);
    out.executions = m.executions;
    out.spans = m.spans;
    out.rejected = m.rejected.map((r) => ({ kind: 'spans', ...r }));
  } else if (decoded.signal === 'logs') {
    const m = mapLogs(decoded.items);
    out.logs = m.logs;
    out.rejected = m.rejected.map((r) => ({ kind: 'logs', ...r }));
  } else {
    const m = mapMetrics(decoded.items);
    out.metrics = m.metrics;
    out.rejected = m.rejected.map((r) => ({ kind: 'metrics', ...r }));
  }
  return out;
}
