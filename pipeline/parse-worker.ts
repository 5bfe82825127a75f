import zlib from 'node:zlib';
import { Piscina } from 'piscina';
import type { IssueOccurrences } from '../schemas/issues.js';
import type { Mode, ProcessedPayload, SpanRecord } from '../schemas/records.js';
import { type ColumnChunk, chunkBuffers } from '../storage/columns.js';
import { nameThread } from '../storage/worker-file.js';
import { processIngestBody } from './ingest-body.js';
import { parseOtlpFormat } from './otlp/decode.js';
import { type CumulativeRecord, processOtlp } from './otlp/process.js';
import { cachedOutcomeRules } from './outcome-rules.js';
import { toChunks } from './to-columns.js';

nameThread('svc-parse');

/**
 * Piscina worker: one ingest message → column chunks. Decompression, JSON parsing, validation, scrubbing and
 * classification all happen here, off the main thread; the chunks' buffers are transferred back.
 */

export interface ParseTask {
  body: Uint8Array;
  encoding: 'gzip' | 'identity' | 'br';
  /** `ingest` (an /api/ingest body) or an OTLP format (`otlp-traces-protobuf`…, otlp/decode.ts). */
  format: string;
  /** Where an ingest body's item arrays may be cut (schemas/broker-messages.ts JsonCuts, encoded). */
  jsonCuts?: string;
  maxDecodedBytes: number;
  mode: Mode;
  /** Scopes the issue ids of failed executions (with the mode); absent: no fingerprint stage. */
  workspaceId?: string;
  requestId: string;
  receivedAt: number;
  seq: number;
  /** The workspace's outcomeRules as JSON text, when it has any (step 1 of the classification). */
  outcomeRules?: string;
  /** The workspace's indexed context keys: each gets typed columns of its own. */
  indexedKeys?: string[];
}

export interface ParseResult {
  chunks: ColumnChunk[];
  counts: { executions: number; logs: number; metrics: number; rejected: number };
  /** Per issue, this message's occurrences: a few small objects (about one in twenty executions fails). */
  issues: IssueOccurrences[];
  /** Points of cumulative OTLP series, for the main thread to turn into increments (otlp/cumulative.ts). */
  cumulative: CumulativeRecord[];
  /** The body was parsed in groups by its cuts (grouped-json.ts), not whole. */
  grouped: boolean;
}

/**
 * A body's bytes, decoded. The output is written in chunks of 8× the encoded size (brotli at quality 0 makes the
 * ingest benchmark's bodies 6.5× smaller): one chunk for most bodies, where zlib's default of 16 KiB made a 370 KB
 * body 23 chunks copied into one at the end (the default body's decoding 0.33 → 0.29 ms, 3,000 bodies, four runs).
 * A chunk is at least zlib's 16 KiB and otherwise at most the decoded limit, which Node checks after each chunk.
 */
function bytesOf(task: ParseTask): Buffer {
  if (task.encoding === 'identity')
    return Buffer.from(task.body.buffer, task.body.byteOffset, task.body.byteLength);
  const options = {
    maxOutputLength: task.maxDecodedBytes,
    chunkSize: Math.max(16 * 1024, Math.min(task.maxDecodedBytes, task.body.byteLength * 8)),
  };
  return task.encoding === 'gzip'
    ? zlib.gunzipSync(task.body, options)
    : zlib.brotliDecompressSync(task.body, options);
}

export default function parse(task: ParseTask): ParseResult {
  const meta = { requestId: task.requestId, receivedAt: task.receivedAt, seq: task.seq };
  const ctx = {
    mode: task.mode,
    requestId: task.requestId,
    receivedAt: task.receivedAt,
    workspaceId: task.workspaceId,
  };
  const options = { classifyRules: cachedOutcomeRules(task.outcomeRules) };
  const otlp = parseOtlpFormat(task.format);
  let out: ProcessedPayload;
  let spans: SpanRecord[] = [];
  let cumulative: CumulativeRecord[] = [];
  let grouped = false;
  try {
    if (otlp) {
      const processed = processOtlp(otlp.signal, otlp.encoding, bytesOf(task), ctx, options);
      out = processed.out;
      spans = processed.spans;
      cumulative = processed.cumulative;
    } else {
      const ingest = processIngestBody(bytesOf(task), task.jsonCuts, ctx, options, task.indexedKeys);
      out = ingest.out;
      grouped = ingest.grouped;
    }
  } catch (err) {
    // The API checked the body before accepting it, so this is a body it could read and we cannot: keep a
    // record of it rather than lose it silently.
    out = {
      executions: [],
      logs: [],
      metrics: [],
      issues: [],
      rejections: [
        {
          kind: otlp ? (otlp.signal === 'traces' ? 'spans' : otlp.signal) : 'executions',
          index: -1,
          code: 'VALIDATION_ERROR',
          details: [{ path: '', message: String(err) }],
        },
      ],
    };
  }
  const chunks = toChunks({ ...out, spans }, meta, task.indexedKeys).finish();
  const result: ParseResult = {
    chunks,
    counts: {
      executions: out.executions.length,
      logs: out.logs.length,
      metrics: out.metrics.length,
      rejected: out.rejections.length,
    },
    issues: out.issues,
    cumulative,
    grouped,
  };
  // The chunks' buffers move to the main thread instead of being copied.
  const movable = {
    [Piscina.transferableSymbol]: chunks.flatMap(chunkBuffers),
    [Piscina.valueSymbol]: result,
  };
  return Piscina.move(movable as never) as unknown as ParseResult;
}
