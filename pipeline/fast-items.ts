import {
  attributesWithinDepth,
  contextProblem,
  EXECUTION_ID_RE,
  type ExecutionItem,
  epochMsOf,
  exceptionSchema,
  INGEST_ITEM_LIMITS,
  INGEST_STRING_LIMITS,
  isObject,
  type LogItem,
  METRIC_NAME_RE,
  type MetricPoint,
  outcomeEvidenceListSchema,
  responseSchema,
} from '../schemas/ingest-items.js';
import { EXECUTION_SOURCES, LOG_LEVELS, MODES, OUTCOMES } from '../schemas/records.js';

/**
 * Hand-written validators for the common shapes of ingested items, tried before the zod schemas of
 * schemas/ingest-items.ts: zod cost about a quarter of the parse worker's time, most of it in copying every
 * object. The zod schemas stay the one definition of the contract, and these must follow them exactly:
 *
 * - each returns either exactly what the schema's successful parse returns for the same input (the same
 *   values, and the same key order wherever an object is later written out as JSON), or `undefined`, meaning
 *   "not handled here": for every input the schema refuses, and for valid shapes left to zod (unknown or
 *   `__proto__` keys, response fields, exception frames, outcome evidence…). The caller then runs the schema,
 *   which gives the full answer and the error details;
 * - objects zod builds from a z.object (the item, request, response, exception, histogram value) are built
 *   here too, fresh, in the schema's shape order: later steps rewrite them in place. Values zod would copy
 *   unchanged (records, arrays of scalars, the logs array) or returns as they are (context, attributes) are
 *   the input's own: no later step writes into those (scrubbing is copy-on-write);
 * - the input is a freshly parsed JSON value: own enumerable string keys, no getters, no `undefined` values.
 *
 * Every object is checked for keys the schema does not know by counting the known keys it holds against
 * Object.keys: a mismatch (an unknown key, `__proto__`, a key holding `undefined`) goes to zod, which strips.
 * test/unit/fast-items.test.ts checks the agreement on generated items, valid and near-valid.
 */

type Obj = Record<string, unknown>;

export interface FastPath {
  execution(raw: Obj): ExecutionItem | undefined;
  log(raw: Obj): LogItem | undefined;
  metric(raw: Obj): MetricPoint | undefined;
}

const MODE_SET: ReadonlySet<unknown> = new Set(MODES);
const SOURCE_SET: ReadonlySet<unknown> = new Set(EXECUTION_SOURCES);
const OUTCOME_SET: ReadonlySet<unknown> = new Set(OUTCOMES);
const LEVEL_SET: ReadonlySet<unknown> = new Set(LOG_LEVELS);
const L = INGEST_STRING_LIMITS;

const isString = (v: unknown, min: number, max: number): v is string =>
  typeof v === 'string' && v.length >= min && v.length <= max;

/** For a value known not to be `undefined`: null, or a string of min–max UTF-16 code units. */
const nullOrString = (v: unknown, min: number, max: number): boolean => v === null || isString(v, min, max);

const isFiniteNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

const isDuration = (v: unknown): boolean =>
  isFiniteNumber(v) && v >= 0 && v <= INGEST_ITEM_LIMITS.maxDurationMs;

const isExecutionId = (v: unknown): boolean => typeof v === 'string' && EXECUTION_ID_RE.test(v);

/** epochMsSchema: a string or a finite number, then the shared conversion. */
function epochMs(v: unknown): number | null {
  return typeof v === 'string' || isFiniteNumber(v) ? epochMsOf(v) : null;
}

function keyCount(v: Obj): number {
  return Object.keys(v).length;
}

/** headersSchema: string → string or string[]. The record is returned as it is (zod's copy would equal it). */
function isHeaders(v: unknown): boolean {
  if (!isObject(v)) return false;
  for (const key of Object.keys(v)) {
    if (key === '__proto__') return false;
    const value = v[key];
    if (typeof value === 'string') continue;
    if (!Array.isArray(value)) return false;
    for (let i = 0; i < value.length; i++) if (typeof value[i] !== 'string') return false;
  }
  return true;
}

const isScalar = (v: unknown): boolean =>
  typeof v === 'string' || v === null || typeof v === 'boolean' || isFiniteNumber(v);

/** requestSchema.query: string → scalar or scalar[]. */
function isQuery(v: unknown): boolean {
  if (!isObject(v)) return false;
  for (const key of Object.keys(v)) {
    if (key === '__proto__') return false;
    const value = v[key];
    if (isScalar(value)) continue;
    if (!Array.isArray(value)) return false;
    for (let i = 0; i < value.length; i++) if (!isScalar(value[i])) return false;
  }
  return true;
}

/** metricShape.tags: string → string, at most maxTags of them. */
function isTags(v: unknown): boolean {
  if (!isObject(v)) return false;
  const keys = Object.keys(v);
  if (keys.length > INGEST_ITEM_LIMITS.maxTags) return false;
  for (const key of keys) {
    if (key === '__proto__' || typeof v[key] !== 'string') return false;
  }
  return true;
}

function isStringArray(v: unknown): boolean {
  if (!Array.isArray(v)) return false;
  for (let i = 0; i < v.length; i++) if (typeof v[i] !== 'string') return false;
  return true;
}

/** requestSchema. */
function fastRequest(v: unknown): Obj | undefined {
  if (!isObject(v)) return undefined;
  const out: Obj = {};
  let seen = 0;
  const route = v.route;
  if (route !== undefined) {
    if (route !== null && typeof route !== 'string') return undefined;
    out.route = route;
    seen++;
  }
  const headers = v.headers;
  if (headers !== undefined) {
    if (headers !== null && !isHeaders(headers)) return undefined;
    out.headers = headers;
    seen++;
  }
  const query = v.query;
  if (query !== undefined) {
    if (query !== null && !isQuery(query)) return undefined;
    out.query = query;
    seen++;
  }
  return seen === keyCount(v) ? out : undefined;
}

/** responseSchema; fields (flattened by a transform) are left to it. */
function fastResponse(v: unknown): Obj | undefined {
  if (!isObject(v)) return undefined;
  const fields = v.fields;
  if (fields != null) {
    const parsed = responseSchema.safeParse(v);
    return parsed.success ? parsed.data : undefined;
  }
  const out: Obj = {};
  let seen = 0;
  const headers = v.headers;
  if (headers !== undefined) {
    if (headers !== null && !isHeaders(headers)) return undefined;
    out.headers = headers;
    seen++;
  }
  if (fields !== undefined) {
    out.fields = fields;
    seen++;
  }
  return seen === keyCount(v) ? out : undefined;
}

/** exceptionSchema; frames are left to it. */
function fastException(v: unknown): Obj | undefined {
  if (!isObject(v)) return undefined;
  const frames = v.frames;
  if (frames != null) {
    const parsed = exceptionSchema.safeParse(v);
    return parsed.success ? parsed.data : undefined;
  }
  const out: Obj = {};
  const type = v.type;
  if (!isString(type, 1, Number.POSITIVE_INFINITY)) return undefined;
  out.type = type;
  const message = v.message;
  if (typeof message !== 'string') return undefined;
  out.message = message;
  let seen = 2;
  const stack = v.stack;
  if (stack !== undefined) {
    if (stack !== null && typeof stack !== 'string') return undefined;
    out.stack = stack;
    seen++;
  }
  const handled = v.handled;
  if (handled !== undefined) {
    if (handled !== null && typeof handled !== 'boolean') return undefined;
    out.handled = handled;
    seen++;
  }
  if (frames !== undefined) {
    out.frames = frames;
    seen++;
  }
  return seen === keyCount(v) ? out : undefined;
}

/**
 * `executionId`, `traceId`, `spanId`: optional and nullable, next to each other in both the execution's and the
 * log's shape. Copied in that order; answers how many were present, or -1 when one is invalid.
 */
function copyCorrelationIds(raw: Obj, out: Obj): number {
  let seen = 0;
  const executionId = raw.executionId;
  if (executionId !== undefined) {
    if (executionId !== null && !isExecutionId(executionId)) return -1;
    out.executionId = executionId;
    seen++;
  }
  const traceId = raw.traceId;
  if (traceId !== undefined) {
    if (!nullOrString(traceId, 1, L.id)) return -1;
    out.traceId = traceId;
    seen++;
  }
  const spanId = raw.spanId;
  if (spanId !== undefined) {
    if (!nullOrString(spanId, 1, L.id)) return -1;
    out.spanId = spanId;
    seen++;
  }
  return seen;
}

/** executionItemSchema, including its duration refinement and alias transform. */
export function fastExecutionItem(raw: Obj): ExecutionItem | undefined {
  const out: Obj = {};
  let seen = 0;
  const ids = copyCorrelationIds(raw, out);
  if (ids < 0) return undefined;
  seen += ids;
  const parentSpanId = raw.parentSpanId;
  if (parentSpanId !== undefined) {
    if (!nullOrString(parentSpanId, 1, L.id)) return undefined;
    out.parentSpanId = parentSpanId;
    seen++;
  }
  const service = raw.service;
  if (!isString(service, 1, L.service)) return undefined;
  out.service = service;
  seen++;
  const environment = raw.environment;
  if (environment !== undefined) {
    if (!nullOrString(environment, 1, L.environment)) return undefined;
    seen++;
  }
  out.environment = environment ?? 'default';
  const mode = raw.mode;
  if (mode !== undefined) {
    if (mode !== null && !MODE_SET.has(mode)) return undefined;
    out.mode = mode;
    seen++;
  }
  const source = raw.source;
  if (source !== undefined) {
    if (source !== null && !SOURCE_SET.has(source)) return undefined;
    seen++;
  }
  out.source = source ?? 'http';
  const endpoint = raw.endpoint;
  if (!isString(endpoint, 1, L.endpoint)) return undefined;
  out.endpoint = endpoint;
  seen++;
  const method = raw.method;
  if (method !== undefined) {
    if (!nullOrString(method, 1, L.method)) return undefined;
    seen++;
  }
  out.method = method == null ? null : (method as string).toUpperCase();
  const startedAt = epochMs(raw.startedAt);
  if (startedAt === null) return undefined;
  out.startedAt = startedAt;
  seen++;
  const durationMs = raw.durationMs;
  if (durationMs !== undefined) {
    if (durationMs !== null && !isDuration(durationMs)) return undefined;
    out.durationMs = durationMs;
    seen++;
  }
  const duration = raw.duration;
  if (duration !== undefined) {
    if (duration !== null && !isDuration(duration)) return undefined;
    out.duration = duration;
    seen++;
  }
  const statusCode = raw.statusCode;
  if (statusCode !== undefined) {
    if (
      statusCode !== null &&
      !(Number.isSafeInteger(statusCode) && (statusCode as number) >= 100 && (statusCode as number) <= 599)
    ) {
      return undefined;
    }
    out.statusCode = statusCode;
    seen++;
  }
  const outcome = raw.outcome;
  if (outcome !== undefined) {
    if (outcome !== null && !OUTCOME_SET.has(outcome)) return undefined;
    out.outcome = outcome;
    seen++;
  }
  const request = raw.request;
  if (request !== undefined) {
    const value = request === null ? null : fastRequest(request);
    if (value === undefined) return undefined;
    out.request = value;
    seen++;
  }
  const response = raw.response;
  if (response !== undefined) {
    const value = response === null ? null : fastResponse(response);
    if (value === undefined) return undefined;
    out.response = value;
    seen++;
  }
  const context = raw.context;
  if (context !== undefined) {
    // contextSchema returns the object itself.
    if (context !== null && !(isObject(context) && contextProblem(context) === null)) return undefined;
    out.context = context;
    seen++;
  }
  const exception = raw.exception;
  if (exception !== undefined) {
    const value = exception === null ? null : fastException(exception);
    if (value === undefined) return undefined;
    out.exception = value;
    seen++;
  }
  const outcomeEvidence = raw.outcomeEvidence;
  if (outcomeEvidence !== undefined) {
    if (outcomeEvidence === null) {
      out.outcomeEvidence = null;
    } else {
      const parsed = outcomeEvidenceListSchema.safeParse(outcomeEvidence);
      if (!parsed.success) return undefined;
      out.outcomeEvidence = parsed.data;
    }
    seen++;
  }
  const fingerprint = raw.fingerprint;
  if (fingerprint !== undefined) {
    if (fingerprint !== null && !isStringArray(fingerprint)) return undefined;
    out.fingerprint = fingerprint;
    seen++;
  }
  const logs = raw.logs;
  if (logs !== undefined) {
    if (logs !== null && !Array.isArray(logs)) return undefined;
    out.logs = logs;
    seen++;
  }
  if (seen !== keyCount(raw)) return undefined;
  // The schema's refinement, then its transform: an absent durationMs is added last, as zod's `??=` does.
  if (out.durationMs == null && out.duration == null) return undefined;
  out.durationMs ??= out.duration;
  return out as ExecutionItem;
}

/** logItemSchema. */
export function fastLogItem(raw: Obj): LogItem | undefined {
  const out: Obj = {};
  const timestamp = epochMs(raw.timestamp);
  if (timestamp === null) return undefined;
  out.timestamp = timestamp;
  let level = raw.level;
  if (typeof level !== 'string') return undefined;
  if (!LEVEL_SET.has(level)) {
    level = level.toLowerCase();
    if (!LEVEL_SET.has(level)) return undefined;
  }
  out.level = level;
  const message = raw.message;
  if (typeof message !== 'string') return undefined;
  out.message = message;
  const service = raw.service;
  if (!isString(service, 1, L.service)) return undefined;
  out.service = service;
  let seen = 4;
  const environment = raw.environment;
  if (environment !== undefined) {
    if (!nullOrString(environment, 1, L.environment)) return undefined;
    seen++;
  }
  out.environment = environment ?? 'default';
  const mode = raw.mode;
  if (mode !== undefined) {
    if (mode !== null && !MODE_SET.has(mode)) return undefined;
    out.mode = mode;
    seen++;
  }
  const ids = copyCorrelationIds(raw, out);
  if (ids < 0) return undefined;
  seen += ids;
  const logger = raw.logger;
  if (logger !== undefined) {
    if (logger !== null && typeof logger !== 'string') return undefined;
    out.logger = logger;
    seen++;
  }
  const attributes = raw.attributes;
  if (attributes !== undefined) {
    // attributesSchema returns the object itself.
    if (attributes !== null && !(isObject(attributes) && attributesWithinDepth(attributes))) return undefined;
    out.attributes = attributes;
    seen++;
  }
  const exception = raw.exception;
  if (exception !== undefined) {
    const value = exception === null ? null : fastException(exception);
    if (value === undefined) return undefined;
    out.exception = value;
    seen++;
  }
  return seen === keyCount(raw) ? (out as LogItem) : undefined;
}

/** histogramValueSchema. */
function fastHistogram(v: unknown): Obj | undefined {
  if (!isObject(v)) return undefined;
  const { count, sum, min, max } = v;
  if (!(Number.isSafeInteger(count) && (count as number) >= 0)) return undefined;
  if (!isFiniteNumber(sum) || !isFiniteNumber(min) || !isFiniteNumber(max)) return undefined;
  return keyCount(v) === 4 ? { count, sum, min, max } : undefined;
}

/** metricPointSchema: metricShape's keys, then type and value. */
export function fastMetricPoint(raw: Obj): MetricPoint | undefined {
  const type = raw.type;
  const value =
    type === 'counter' || type === 'gauge'
      ? isFiniteNumber(raw.value)
        ? raw.value
        : undefined
      : type === 'histogram'
        ? fastHistogram(raw.value)
        : undefined;
  if (value === undefined) return undefined;
  const out: Obj = {};
  const name = raw.name;
  if (!(isString(name, 0, L.metricName) && METRIC_NAME_RE.test(name))) return undefined;
  out.name = name;
  // name, timestamp, service, type and value are required.
  let seen = 5;
  const unit = raw.unit;
  if (unit !== undefined) {
    if (unit !== null && typeof unit !== 'string') return undefined;
    out.unit = unit;
    seen++;
  }
  const timestamp = epochMs(raw.timestamp);
  if (timestamp === null) return undefined;
  out.timestamp = timestamp;
  const service = raw.service;
  if (!isString(service, 1, L.service)) return undefined;
  out.service = service;
  const environment = raw.environment;
  if (environment !== undefined) {
    if (!nullOrString(environment, 1, L.environment)) return undefined;
    seen++;
  }
  out.environment = environment ?? 'default';
  const mode = raw.mode;
  if (mode !== undefined) {
    if (mode !== null && !MODE_SET.has(mode)) return undefined;
    out.mode = mode;
    seen++;
  }
  const tags = raw.tags;
  if (tags !== undefined) {
    if (tags !== null && !isTags(tags)) return undefined;
    out.tags = tags;
    seen++;
  }
  out.type = type;
  out.value = value;
  return seen === keyCount(raw) ? (out as MetricPoint) : undefined;
}

export const FAST_PATH: FastPath = {
  execution: fastExecutionItem,
  log: fastLogItem,
  metric: fastMetricPoint,
};

/** No fast path: every item goes through zod. For tests that compare the two. */
export const ZOD_ONLY: FastPath = {
  execution: () => undefined,
  log: () => undefined,
  metric: () => undefined,
};
