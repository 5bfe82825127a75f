import { encodeJsonCuts, JSON_GROUP_BYTES } from '../schemas/broker-messages.js';
import { forbidden, ServiceError, validationError } from '../schemas/errors.js';
import type { Mode } from '../schemas/records.js';
import { type EnvelopeShape, type JsonKind, scanEnvelope } from './json-envelope.js';

export interface ItemCounts {
  executions: number;
  logs: number;
  metrics: number;
}

export interface ItemLimits {
  executions: number;
  logs: number;
  metrics: number;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The kind of a value as JSON.parse could have made it. What JSON cannot hold (a function, a symbol, a bigint)
 * is neither an object nor an array to the rules, which is all they ask; it passes as a string.
 */
function kindOf(v: unknown): JsonKind | undefined {
  if (v === undefined) return undefined;
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (isObject(v)) return 'object';
  if (typeof v === 'number') return 'number';
  if (typeof v === 'boolean') return 'boolean';
  return 'string';
}

/** The shape of an already parsed body, as scanEnvelope reports it for the bytes. */
export function envelopeShape(body: unknown): EnvelopeShape {
  const b: Record<string, unknown> = isObject(body) ? body : {};
  const count = (v: unknown) => (Array.isArray(v) ? v.length : 0);
  let inlineLogs = 0;
  if (Array.isArray(b.executions)) {
    for (const e of b.executions) if (isObject(e) && Array.isArray(e.logs)) inlineLogs += e.logs.length;
  }
  const mode = isObject(b.resource) ? b.resource.mode : undefined;
  return {
    top: kindOf(body) ?? 'null',
    executions: kindOf(b.executions),
    executionCount: count(b.executions),
    inlineLogs,
    logs: kindOf(b.logs),
    logCount: count(b.logs),
    metrics: kindOf(b.metrics),
    metricCount: count(b.metrics),
    resource: kindOf(b.resource),
    mode: kindOf(mode),
    modeValue: typeof mode === 'string' ? mode : undefined,
    // A parsed body has no bytes to cut.
    cuts: {},
  };
}

/**
 * The checks made before a payload is accepted (CONTRACT §5 "What is checked when"): an object, item arrays
 * within their limits, `resource.mode` matching the key. Items themselves are validated by the pipeline.
 * Logs count those sent inline in executions too. The one rule set behind both checkEnvelope (a parsed body)
 * and checkEnvelopeBytes (the bytes, scanned without parsing).
 */
export function checkEnvelopeShape(shape: EnvelopeShape, keyMode: Mode, limits: ItemLimits): ItemCounts {
  if (shape.top !== 'object') {
    throw validationError('the body must be a JSON object', [{ path: '', message: 'expected an object' }]);
  }
  if (shape.resource !== undefined && shape.resource !== 'object') {
    throw validationError('resource must be an object', [
      { path: 'resource', message: 'expected an object' },
    ]);
  }
  if (shape.mode !== undefined) {
    const mode = shape.modeValue;
    if (mode !== 'test' && mode !== 'live') {
      throw validationError('resource.mode must be test or live', [
        { path: 'resource.mode', message: 'expected test or live' },
      ]);
    }
    if (mode !== keyMode) throw forbidden(`a ${keyMode} key cannot send ${mode} data`);
  }
  const details = [];
  for (const kind of ['executions', 'logs', 'metrics'] as const) {
    const k = shape[kind];
    if (k !== undefined && k !== 'array') details.push({ path: kind, message: 'expected an array' });
  }
  if (details.length > 0) throw validationError(`${details[0]!.path} must be an array`, details);
  const counts = {
    executions: shape.executionCount,
    logs: shape.logCount + shape.inlineLogs,
    metrics: shape.metricCount,
  };
  for (const kind of ['executions', 'logs', 'metrics'] as const) {
    if (counts[kind] > limits[kind]) {
      throw new ServiceError(
        'PAYLOAD_TOO_LARGE',
        `${counts[kind]} ${kind} in one request; at most ${limits[kind]}`,
        [{ path: kind, message: `at most ${limits[kind]} items per request` }],
      );
    }
  }
  return counts;
}

/** The envelope check of a parsed body (for routes that need the parsed body anyway). */
export function checkEnvelope(body: unknown, keyMode: Mode, limits: ItemLimits): ItemCounts {
  return checkEnvelopeShape(envelopeShape(body), keyMode, limits);
}

/**
 * The envelope check of the body's bytes, answering exactly as `checkEnvelope(parseJson(buf), …)` does,
 * invalid JSON included, but without building the value.
 */
export function checkEnvelopeBytes(buf: Uint8Array, keyMode: Mode, limits: ItemLimits): ItemCounts {
  return checkBody(buf, keyMode, limits).counts;
}

/**
 * checkEnvelopeBytes, and where the pipeline may cut the body's item arrays to parse it in groups (encoded for the
 * message's header; none for a body below two groups, which one JSON.parse reads as fast).
 */
export function checkBody(
  buf: Uint8Array,
  keyMode: Mode,
  limits: ItemLimits,
): { counts: ItemCounts; cuts: string | undefined } {
  const scan = scanEnvelope(buf);
  if (!scan.ok) {
    throw validationError('the body is not valid JSON', [{ path: '', message: scan.message }]);
  }
  const { shape } = scan;
  const counts = checkEnvelopeShape(shape, keyMode, limits);
  const lists = { executions: shape.executionCount, logs: shape.logCount, metrics: shape.metricCount };
  const cuts = buf.length >= 2 * JSON_GROUP_BYTES ? encodeJsonCuts(shape.cuts, lists) : '';
  return { counts, cuts: cuts === '' ? undefined : cuts };
}
