import type { SpanRecord } from '../../schemas/records.js';
import { endpointTemplate } from '../fingerprint.js';
import { hexId, requestType, toBigInt } from './proto.js';
import {
  type Attributes,
  type AttrValue,
  isZeroId,
  jsonAttributes,
  jsonEnum,
  jsonId,
  jsonText,
  list,
  msOf,
  newAttributes,
  type PbKeyValue,
  pbAttributes,
  resourceIdentity,
  str,
} from './values.js';

/**
 * OTLP traces (CONTRACT §12): an ExportTraceServiceRequest, protobuf or JSON, read into plain spans, and the spans
 * mapped as the contract's table says. A SERVER or CONSUMER span is an execution (an ingest item as
 * /api/ingest takes it, so the rest of the pipeline is the same); every other span is a child span of its trace.
 */

export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Attributes;
  events: { name: string; attributes: Attributes }[];
  statusCode: number;
  statusMessage: string;
  resource: Attributes;
}

/** OTLP's SpanKind and Status.StatusCode numbers. */
const KIND = { unspecified: 0, internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;
const KIND_NAMES = ['unspecified', 'internal', 'server', 'client', 'producer', 'consumer'];
const STATUS_NAMES = ['unset', 'ok', 'error'];
const STATUS_ERROR = 2;

// ---- reading a request ----

/** The spans of a protobuf body; throws when it is not an ExportTraceServiceRequest. */
export function readTracesProtobuf(body: Uint8Array): OtlpSpan[] {
  const request = requestType('traces').decode(body) as unknown as {
    resourceSpans?: {
      resource?: { attributes?: PbKeyValue[] } | null;
      scopeSpans?: {
        spans?: {
          traceId?: Uint8Array;
          spanId?: Uint8Array;
          parentSpanId?: Uint8Array;
          name?: string;
          kind?: number;
          startTimeUnixNano?: unknown;
          endTimeUnixNano?: unknown;
          attributes?: PbKeyValue[];
          events?: { name?: string; attributes?: PbKeyValue[] }[];
          status?: { code?: number; message?: string } | null;
        }[];
      }[];
    }[];
  };
  const spans: OtlpSpan[] = [];
  for (const rs of request.resourceSpans ?? []) {
    const resource = pbAttributes(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        spans.push({
          traceId: hexId(s.traceId),
          spanId: hexId(s.spanId),
          parentSpanId: hexId(s.parentSpanId),
          name: s.name ?? '',
          kind: s.kind ?? 0,
          startNs: toBigInt(s.startTimeUnixNano),
          endNs: toBigInt(s.endTimeUnixNano),
          attributes: pbAttributes(s.attributes),
          events: (s.events ?? []).map((e) => ({
            name: e.name ?? '',
            attributes: pbAttributes(e.attributes),
          })),
          statusCode: s.status?.code ?? 0,
          statusMessage: s.status?.message ?? '',
          resource,
        });
      }
    }
  }
  return spans;
}

/** The spans of an OTLP/JSON body (already parsed); throws when it is not an object. */
export function readTracesJson(body: unknown): OtlpSpan[] {
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw new Error('expected an ExportTraceServiceRequest object');
  const spans: OtlpSpan[] = [];
  for (const rs of list((body as { resourceSpans?: unknown }).resourceSpans)) {
    const r = (rs ?? {}) as { resource?: { attributes?: unknown }; scopeSpans?: unknown };
    const resource = jsonAttributes(r.resource?.attributes);
    for (const ss of list(r.scopeSpans)) {
      for (const raw of list((ss as { spans?: unknown } | null)?.spans)) {
        const s = (raw ?? {}) as Record<string, unknown>;
        const status = (s.status ?? {}) as { code?: unknown; message?: unknown };
        spans.push({
          traceId: jsonId(s.traceId),
          spanId: jsonId(s.spanId),
          parentSpanId: jsonId(s.parentSpanId),
          name: typeof s.name === 'string' ? s.name : '',
          kind: jsonEnum(s.kind, KIND_NAMES, 'SPAN_KIND_'),
          startNs: toBigInt(s.startTimeUnixNano ?? 0),
          endNs: toBigInt(s.endTimeUnixNano ?? 0),
          attributes: jsonAttributes(s.attributes),
          events: list(s.events).map((e) => {
            const ev = (e ?? {}) as { name?: unknown; attributes?: unknown };
            return {
              name: typeof ev.name === 'string' ? ev.name : '',
              attributes: jsonAttributes(ev.attributes),
            };
          }),
          statusCode: jsonEnum(status.code, STATUS_NAMES, 'STATUS_CODE_'),
          statusMessage: typeof status.message === 'string' ? status.message : '',
          resource,
        });
      }
    }
  }
  return spans;
}

// ---- mapping ----

/**
 * A span kept under its execution (GET /api/executions/{id} `spans`): the stored record's fields, its attributes
 * still a value (scrubbed and serialized with the record), and its place among the body's spans.
 */
export type ChildSpan = Omit<SpanRecord, 'attributes' | 'truncated'> & {
  index: number;
  attributes: Attributes;
};

export interface MappedTraces {
  /** Execution items as /api/ingest takes them (service and environment on each); `index`: the span's. */
  executions: { index: number; item: Record<string, unknown> }[];
  spans: ChildSpan[];
  /** Spans that cannot be mapped; `index` counts every span of the body, in order. */
  rejected: { index: number; message: string }[];
}

const durationMs = (s: OtlpSpan) => Number(s.endNs - s.startNs) / 1e6;
const int = (v: AttrValue | undefined): number | null =>
  typeof v === 'number' && Number.isInteger(v)
    ? v
    : typeof v === 'string' && /^\d+$/.test(v)
      ? Number(v)
      : null;

/** Attributes that become fields of the execution, not context. */
const MAPPED = new Set([
  'http.request.method',
  'http.method',
  'http.route',
  'url.path',
  'http.target',
  'http.response.status_code',
  'http.status_code',
  'messaging.destination.name',
]);

/** Context paths are at most this deep and this many (the ingest item's limits: INGEST_ITEM_LIMITS). */
const CONTEXT_MAX_DEPTH = 8;
const CONTEXT_MAX_LEAVES = 256;

/**
 * Attributes as a context tree by their dotted names (`http.user_agent` → { http: { user_agent } }): scalar
 * leaves (arrays and maps as JSON text), the first name to claim a path kept.
 */
function addToContext(
  tree: Record<string, unknown>,
  prefix: string[],
  attrs: Attributes,
  leaves: { n: number },
) {
  for (const [key, value] of Object.entries(attrs)) {
    if (leaves.n >= CONTEXT_MAX_LEAVES) return;
    let parts = [...prefix, ...key.split('.').filter((p) => p !== '')];
    if (parts.length === 0) continue;
    if (parts.length > CONTEXT_MAX_DEPTH)
      parts = [...parts.slice(0, CONTEXT_MAX_DEPTH - 1), parts.slice(CONTEXT_MAX_DEPTH - 1).join('_')];
    // Nodes without a prototype, and own keys only: a part such as `__proto__` is a plain key.
    let node = tree;
    let ok = true;
    for (const p of parts.slice(0, -1)) {
      if (!Object.hasOwn(node, p)) node[p] = newAttributes();
      const next = node[p];
      if (next === null || typeof next !== 'object') {
        ok = false;
        break;
      }
      node = next as Record<string, unknown>;
    }
    const leaf = parts.at(-1)!;
    if (!ok || Object.hasOwn(node, leaf)) continue;
    node[leaf] = value === null || typeof value !== 'object' ? value : jsonText(value);
    leaves.n++;
  }
}

/** An `exception` span event as an execution's exception. */
function exceptionOf(e: { attributes: Attributes }): Record<string, unknown> {
  return {
    type: str(e.attributes['exception.type']) ?? 'Error',
    message: str(e.attributes['exception.message']) ?? '',
    stack: str(e.attributes['exception.stacktrace']),
  };
}

/** The path of a URL or request target, without its query. */
function pathOf(target: string): string {
  const noQuery = target.split('?')[0]!;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(noQuery)) {
    try {
      return new URL(noQuery).pathname;
    } catch {
      return noQuery;
    }
  }
  return noQuery;
}

function toExecution(s: OtlpSpan): Record<string, unknown> {
  const a = s.attributes;
  const method = str(a['http.request.method']) ?? str(a['http.method']);
  const target = str(a['url.path']) ?? str(a['http.target']);
  const destination = str(a['messaging.destination.name']);
  const endpoint =
    str(a['http.route']) ??
    (target ? endpointTemplate(pathOf(target)) : null) ??
    destination ??
    (s.name || 'unnamed');
  const exceptionEvent = s.events.find((e) => e.name === 'exception');
  const context: Record<string, unknown> = newAttributes();
  const leaves = { n: 0 };
  const rest = newAttributes();
  for (const [k, v] of Object.entries(a)) if (!MAPPED.has(k)) rest[k] = v;
  addToContext(context, [], rest, leaves);
  addToContext(context, ['resource'], s.resource, leaves);
  return {
    executionId: s.spanId,
    traceId: s.traceId,
    spanId: s.spanId,
    parentSpanId: s.parentSpanId || null,
    ...resourceIdentity(s.resource),
    source: method ? 'http' : s.kind === KIND.consumer ? 'message' : 'custom',
    endpoint: endpoint.slice(0, 512),
    method,
    startedAt: msOf(s.startNs),
    durationMs: durationMs(s),
    statusCode: int(a['http.response.status_code']) ?? int(a['http.status_code']),
    exception: exceptionEvent ? exceptionOf(exceptionEvent) : null,
    outcomeEvidence:
      s.statusCode === STATUS_ERROR
        ? [{ kind: 'otel_status', verdict: 'failed', detail: s.statusMessage || null }]
        : null,
    context: Object.keys(context).length > 0 ? context : null,
  };
}

const TRACE_ID = /^[0-9a-f]{32}$/;
const SPAN_ID = /^[0-9a-f]{16}$/;
/** The longest span taken, as for an execution's duration (INGEST_ITEM_LIMITS.maxDurationMs): 24 h. */
const MAX_DURATION_NS = 86_400_000n * 1_000_000n;

/** Why a span cannot be mapped (CONTRACT §12), or null. */
export function spanProblem(s: OtlpSpan): string | null {
  if (isZeroId(s.traceId)) return 'the span has no trace id';
  if (isZeroId(s.spanId)) return 'the span has no span id';
  if (!TRACE_ID.test(s.traceId)) return 'the trace id is not 16 bytes';
  if (!SPAN_ID.test(s.spanId)) return 'the span id is not 8 bytes';
  if (s.parentSpanId !== '' && !SPAN_ID.test(s.parentSpanId)) return 'the parent span id is not 8 bytes';
  if (s.startNs <= 0n || s.endNs < s.startNs) return 'the span ends before it starts, or has no start';
  if (s.endNs - s.startNs > MAX_DURATION_NS) return 'the span lasts longer than 24 hours';
  return null;
}

/** Maps a body's spans: executions, child spans, and the spans that cannot be mapped. */
/**
 * An execution whose own span records no exception takes the first one recorded by a span below it in the same
 * body (through spans that are not executions): instrumentations record a handler's error on the handler's span
 * (Express's "request handler"), not on the SERVER span, and an execution's failure should carry its type.
 */
function inheritExceptions(
  spans: readonly OtlpSpan[],
  executions: Map<string, Record<string, unknown>>,
): void {
  const byId = new Map<string, OtlpSpan>();
  for (const s of spans) byId.set(s.spanId, s);
  for (const s of spans) {
    if (executions.has(s.spanId)) continue;
    const event = s.events.find((e) => e.name === 'exception');
    if (!event) continue;
    let parent = s.parentSpanId;
    for (let hops = 0; parent !== '' && hops < 64; hops++) {
      const execution = executions.get(parent);
      if (execution) {
        execution.exception ??= exceptionOf(event);
        break;
      }
      parent = byId.get(parent)?.parentSpanId ?? '';
    }
  }
}

export function mapSpans(spans: readonly OtlpSpan[]): MappedTraces {
  const out: MappedTraces = { executions: [], spans: [], rejected: [] };
  const mapped: OtlpSpan[] = [];
  spans.forEach((s, index) => {
    const problem = spanProblem(s);
    if (problem !== null) {
      out.rejected.push({ index, message: problem });
      return;
    }
    mapped.push(s);
    if (s.kind === KIND.server || s.kind === KIND.consumer)
      out.executions.push({ index, item: toExecution(s) });
    else {
      out.spans.push({
        index,
        traceId: s.traceId,
        spanId: s.spanId,
        parentSpanId: s.parentSpanId || null,
        name: s.name,
        kind: KIND_NAMES[s.kind] ?? 'unspecified',
        startedAt: msOf(s.startNs),
        durationMs: durationMs(s),
        status: STATUS_NAMES[s.statusCode] ?? 'unset',
        attributes: s.attributes,
        ...resourceIdentity(s.resource),
      });
    }
  });
  if (out.executions.length > 0 && out.spans.length > 0) {
    const executions = new Map(out.executions.map((e) => [String(e.item.spanId), e.item]));
    inheritExceptions(mapped, executions);
  }
  return out;
}
