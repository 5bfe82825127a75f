import { hexId, requestType, toBigInt } from './proto.js';
import {
  type Attributes,
  type AttrValue,
  isZeroId,
  jsonAttributes,
  jsonId,
  jsonText,
  jsonValue,
  list,
  msOf,
  newAttributes,
  type PbAnyValue,
  type PbKeyValue,
  pbAttributes,
  pbValue,
  resourceIdentity,
  str,
} from './values.js';

/**
 * OTLP logs (CONTRACT §12): an ExportLogsServiceRequest, protobuf or JSON, read into plain records, and the records
 * mapped to log items as /api/ingest takes them.
 */

export interface OtlpLogRecord {
  timeNs: bigint;
  observedNs: bigint;
  severityNumber: number;
  severityText: string;
  /** The body as a value; undefined when the record has none. */
  body: AttrValue | undefined;
  attributes: Attributes;
  traceId: string;
  spanId: string;
  /** The instrumentation scope's name (the logger). */
  scope: string;
  resource: Attributes;
}

interface PbLogsRequest {
  resourceLogs?: {
    resource?: { attributes?: PbKeyValue[] } | null;
    scopeLogs?: {
      scope?: { name?: string } | null;
      logRecords?: {
        timeUnixNano?: unknown;
        observedTimeUnixNano?: unknown;
        severityNumber?: number;
        severityText?: string;
        body?: PbAnyValue | null;
        attributes?: PbKeyValue[];
        traceId?: Uint8Array;
        spanId?: Uint8Array;
      }[];
    }[];
  }[];
}

/** The records of a protobuf body; throws when it is not an ExportLogsServiceRequest. */
export function readLogsProtobuf(body: Uint8Array): OtlpLogRecord[] {
  const request = requestType('logs').decode(body) as unknown as PbLogsRequest;
  const records: OtlpLogRecord[] = [];
  for (const rl of request.resourceLogs ?? []) {
    const resource = pbAttributes(rl.resource?.attributes);
    for (const sl of rl.scopeLogs ?? []) {
      const scope = sl.scope?.name ?? '';
      for (const r of sl.logRecords ?? []) {
        records.push({
          timeNs: toBigInt(r.timeUnixNano),
          observedNs: toBigInt(r.observedTimeUnixNano),
          severityNumber: r.severityNumber ?? 0,
          severityText: r.severityText ?? '',
          body: r.body ? pbValue(r.body) : undefined,
          attributes: pbAttributes(r.attributes),
          traceId: hexId(r.traceId),
          spanId: hexId(r.spanId),
          scope,
          resource,
        });
      }
    }
  }
  return records;
}

/** The records of an OTLP/JSON body (already parsed); throws when it is not an object. */
export function readLogsJson(body: unknown): OtlpLogRecord[] {
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw new Error('expected an ExportLogsServiceRequest object');
  const records: OtlpLogRecord[] = [];
  for (const rl of list((body as { resourceLogs?: unknown }).resourceLogs)) {
    const r = (rl ?? {}) as { resource?: { attributes?: unknown }; scopeLogs?: unknown };
    const resource = jsonAttributes(r.resource?.attributes);
    for (const sl of list(r.scopeLogs)) {
      const s = (sl ?? {}) as { scope?: { name?: unknown }; logRecords?: unknown };
      const scope = typeof s.scope?.name === 'string' ? s.scope.name : '';
      for (const raw of list(s.logRecords)) {
        const lr = (raw ?? {}) as Record<string, unknown>;
        records.push({
          timeNs: toBigInt(lr.timeUnixNano ?? 0),
          observedNs: toBigInt(lr.observedTimeUnixNano ?? 0),
          severityNumber: typeof lr.severityNumber === 'number' ? lr.severityNumber : severityOfName(lr),
          severityText: typeof lr.severityText === 'string' ? lr.severityText : '',
          body: lr.body === undefined || lr.body === null ? undefined : jsonValue(lr.body),
          attributes: jsonAttributes(lr.attributes),
          traceId: jsonId(lr.traceId),
          spanId: jsonId(lr.spanId),
          scope,
          resource,
        });
      }
    }
  }
  return records;
}

/** OTLP/JSON may name the severity enum (`SEVERITY_NUMBER_WARN`) instead of numbering it. */
function severityOfName(lr: Record<string, unknown>): number {
  const name = typeof lr.severityNumber === 'string' ? lr.severityNumber : '';
  const m = /^SEVERITY_NUMBER_([A-Z]+)(\d)?$/.exec(name);
  if (!m) return 0;
  const base = { TRACE: 1, DEBUG: 5, INFO: 9, WARN: 13, ERROR: 17, FATAL: 21 }[m[1]!] ?? 0;
  return base === 0 ? 0 : base + (m[2] ? Number(m[2]) - 1 : 0);
}

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;
type Level = (typeof LEVELS)[number];

/** The words severity texts use, beyond the six levels' own names. */
const TEXT_LEVELS: Record<string, Level> = {
  warning: 'warn',
  err: 'error',
  critical: 'fatal',
  crit: 'fatal',
  emergency: 'fatal',
  alert: 'fatal',
  notice: 'info',
  information: 'info',
  verbose: 'debug',
};

/** Severity number 1–24 by its range (OTel's data model); else the text; else `info`. */
export function levelOf(severityNumber: number, severityText: string): Level {
  if (severityNumber >= 1 && severityNumber <= 24) return LEVELS[Math.floor((severityNumber - 1) / 4)]!;
  const text = severityText.trim().toLowerCase();
  if ((LEVELS as readonly string[]).includes(text)) return text as Level;
  return TEXT_LEVELS[text] ?? 'info';
}

/** A body as the log's message: a string as it is, a structured body as JSON text. */
function messageOf(body: AttrValue | undefined): string {
  if (body === undefined || body === null) return '';
  return typeof body === 'string' ? body : jsonText(body);
}

export interface MappedLogs {
  /** Log items as /api/ingest takes them, with `index` the record's position in the body. */
  logs: { index: number; item: Record<string, unknown> }[];
  rejected: { index: number; message: string }[];
}

/** Attributes that become the log's exception, not attributes. */
const EXCEPTION_KEYS = ['exception.type', 'exception.message', 'exception.stacktrace'];

function toLogItem(r: OtlpLogRecord): Record<string, unknown> {
  const ns = r.timeNs > 0n ? r.timeNs : r.observedNs;
  const attributes: Record<string, unknown> = newAttributes();
  for (const [k, v] of Object.entries(r.attributes)) if (!EXCEPTION_KEYS.includes(k)) attributes[k] = v;
  const { service, environment } = resourceIdentity(r.resource);
  const resource: Attributes = newAttributes();
  for (const [k, v] of Object.entries(r.resource)) {
    if (k !== 'service.name' && k !== 'deployment.environment.name' && k !== 'deployment.environment')
      resource[k] = v;
  }
  if (Object.keys(resource).length > 0) attributes.resource = resource;
  const exceptionType = str(r.attributes['exception.type']);
  const exceptionMessage = str(r.attributes['exception.message']);
  const traceId = isZeroId(r.traceId) ? null : r.traceId;
  const spanId = isZeroId(r.spanId) ? null : r.spanId;
  return {
    timestamp: msOf(ns),
    level: levelOf(r.severityNumber, r.severityText),
    message: messageOf(r.body),
    service,
    environment,
    // A record's span is its execution, or a child span of one: the detail finds it through the child span.
    executionId: spanId,
    traceId,
    spanId,
    logger: r.scope || null,
    attributes: Object.keys(attributes).length > 0 ? attributes : null,
    exception:
      exceptionType || exceptionMessage
        ? {
            type: exceptionType ?? 'Error',
            message: exceptionMessage ?? '',
            stack: str(r.attributes['exception.stacktrace']),
          }
        : null,
  };
}

/** Why a record cannot be mapped, or null: one with no time at all (both times 0) cannot be placed. */
export function logProblem(r: OtlpLogRecord): string | null {
  return r.timeNs <= 0n && r.observedNs <= 0n
    ? 'the log record has neither a time nor an observed time'
    : null;
}

/** Maps a body's records, and lists those that cannot be mapped. */
export function mapLogs(records: readonly OtlpLogRecord[]): MappedLogs {
  const out: MappedLogs = { logs: [], rejected: [] };
  records.forEach((r, index) => {
    const problem = logProblem(r);
    if (problem !== null) out.rejected.push({ index, message: problem });
    else out.logs.push({ index, item: toLogItem(r) });
  });
  return out;
}
