import type { ItemRejection, MetricRecord, ProcessedPayload, SpanRecord } from '../../schemas/records.js';
import { type ProcessContext, type ProcessOptions, processPayload } from '../process-payload.js';
import { type ScrubState, scrubString, scrubTree } from '../scrub.js';
import { mapOtlp, type OtlpEncoding } from './decode.js';
import type { CumulativeMark } from './metrics.js';
import type { Signal } from './proto.js';
import type { ChildSpan } from './traces.js';

/**
 * An OTLP body through the same stages as an /api/ingest body (CONTRACT §12): read and mapped to ingest items,
 * which processPayload validates, scrubs, classifies and fingerprints as it does any other. Rejections name the
 * body's own items: kind `spans` for an execution made of a span, and the index the item had in the body.
 */

/** A point of a cumulative series, validated and scrubbed, still holding its running total. */
export interface CumulativeRecord extends CumulativeMark {
  record: MetricRecord;
}

export interface ProcessedOtlp {
  out: ProcessedPayload;
  spans: SpanRecord[];
  /** For the pipeline's main thread, which keeps each series' previous point (cumulative.ts). */
  cumulative: CumulativeRecord[];
}

/** A child span's attributes are kept up to this much JSON text (as an execution's context): the rest is cut. */
const MAX_ATTRIBUTES_CHARS = 65_536;

/** Scrubbed attributes as JSON text, cut to MAX_ATTRIBUTES_CHARS (whole attributes, in order). */
function attributesText(attributes: ChildSpan['attributes'], state: ScrubState): string | null {
  if (Object.keys(attributes).length === 0) return null;
  const clean = scrubTree(attributes, true, state);
  const text = JSON.stringify(clean);
  if (text.length <= MAX_ATTRIBUTES_CHARS) return text;
  state.truncated = true;
  const kept: Record<string, unknown> = {};
  let size = 2;
  for (const [k, v] of Object.entries(clean)) {
    const entry = JSON.stringify({ [k]: v }).length - 1;
    if (size + entry > MAX_ATTRIBUTES_CHARS) break;
    Object.defineProperty(kept, k, { value: v, enumerable: true, writable: true, configurable: true });
    size += entry;
  }
  return JSON.stringify(kept);
}

function toSpanRecord(s: ChildSpan): SpanRecord {
  const state: ScrubState = { truncated: false };
  const attributes = attributesText(s.attributes, state);
  return {
    traceId: s.traceId,
    spanId: s.spanId,
    parentSpanId: s.parentSpanId,
    name: scrubString(s.name, state),
    kind: s.kind,
    // Stored as whole milliseconds, as every timestamp is (the duration keeps its fraction).
    startedAt: Math.floor(s.startedAt),
    durationMs: s.durationMs,
    status: s.status,
    attributes,
    service: scrubString(s.service, state),
    environment: scrubString(s.environment, state),
    truncated: state.truncated,
  };
}

/** processPayload's rejections renamed to the body's items: `indexes[i]` is the i-th item's place in the body. */
function renamed(
  rejections: readonly ItemRejection[],
  indexes: Partial<Record<ItemRejection['kind'], readonly number[]>>,
  kind: ItemRejection['kind'],
): ItemRejection[] {
  return rejections.map((r) => ({ ...r, kind, index: indexes[r.kind]?.[r.index] ?? r.index }));
}

export function processOtlp(
  signal: Signal,
  encoding: OtlpEncoding,
  body: Uint8Array,
  ctx: ProcessContext,
  options: ProcessOptions = {},
): ProcessedOtlp {
  const mapped = mapOtlp(signal, encoding, body);
  const cumulativeItems = mapped.metrics.filter((m) => m.cumulative !== null);
  const plainMetrics = mapped.metrics.filter((m) => m.cumulative === null);
  const out = processPayload(
    {
      executions: mapped.executions.map((e) => e.item),
      logs: mapped.logs.map((l) => l.item),
      metrics: plainMetrics.map((m) => m.item),
    },
    ctx,
    options,
  );
  const kind = signal === 'traces' ? 'spans' : signal;
  out.rejections = [
    ...mapped.rejected.map(
      (r): ItemRejection => ({
        kind: r.kind,
        index: r.index,
        code: 'VALIDATION_ERROR',
        details: [{ path: '', message: r.message }],
      }),
    ),
    ...renamed(
      out.rejections,
      {
        executions: mapped.executions.map((e) => e.index),
        logs: mapped.logs.map((l) => l.index),
        metrics: plainMetrics.map((m) => m.index),
      },
      kind,
    ),
  ];
  const cumulative: CumulativeRecord[] = [];
  if (cumulativeItems.length > 0) {
    const c = processPayload({ metrics: cumulativeItems.map((m) => m.item) }, ctx, options);
    const refused = new Set(c.rejections.map((r) => r.index));
    out.rejections.push(
      ...renamed(c.rejections, { metrics: cumulativeItems.map((m) => m.index) }, 'metrics'),
    );
    let next = 0;
    cumulativeItems.forEach((m, i) => {
      if (refused.has(i)) return;
      cumulative.push({ ...m.cumulative!, record: c.metrics[next++]! });
    });
  }
  // A span that cannot be kept is rejected by its index; the others stay.
  const spans: SpanRecord[] = [];
  for (const s of mapped.spans) {
    try {
      spans.push(toSpanRecord(s));
    } catch (err) {
      out.rejections.push({
        kind: 'spans',
        index: s.index,
        code: 'VALIDATION_ERROR',
        details: [{ path: '', message: `the span cannot be kept: ${(err as Error).message}` }],
      });
    }
  }
  out.rejections.sort((a, b) => a.index - b.index);
  return { out, spans, cumulative };
}
