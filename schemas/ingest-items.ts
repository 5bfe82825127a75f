import { z } from 'zod';
import { EXECUTION_SOURCES, LOG_LEVELS, MODES, OUTCOMES } from './records.js';

/**
 * One ingested item of each kind (CONTRACT §5), as the pipeline validates it. Unknown fields are stripped
 * (forward compatibility for SDKs). An optional field may also be `null`: several SDK serializers write
 * null for an unset property, and it means the same as leaving it out.
 *
 * The schemas are built once, at module load: they run for every item, at tens of thousands a second.
 *
 * These zod schemas are the one definition of the contract. pipeline/fast-items.ts holds hand-written
 * validators for the common shapes that must follow them exactly (same acceptance, same output, same key
 * order): it shares the rules below (limits, regexes, the timestamp, context and attributes checks) rather than
 * restating them, and test/unit/fast-items.test.ts checks the two agree. Change a rule here, and the fast path
 * and that test with it.
 */

export const INGEST_ITEM_LIMITS = {
  /** JSON.stringify length of one execution's context. */
  contextMaxChars: 65_536,
  /** Path segments from the context root to a leaf. */
  contextMaxDepth: 8,
  contextMaxLeaves: 256,
  /** Nested response fields are flattened to dotted paths of at most this many segments. */
  fieldsMaxDepth: 8,
  /** Bounds the recursion of every later walk over attributes (scrub, serialization). */
  attributesMaxDepth: 16,
  maxDurationMs: 86_400_000,
  maxTags: 20,
} as const;

/** Lengths of the plain string fields, in UTF-16 code units (what zod's min/max count). */
export const INGEST_STRING_LIMITS = {
  id: 128,
  service: 128,
  environment: 64,
  endpoint: 512,
  method: 32,
  metricName: 200,
} as const;

export type Scalar = string | number | boolean | null;

/** Context and nested response fields: objects all the way down, scalar leaves, no arrays. */
export interface ScalarTree {
  [key: string]: Scalar | ScalarTree;
}

// 9999-12-31T23:59:59.999Z: the last instant RFC 3339's four-digit year can write. Also keeps every time
// below 2^48, the range of a ULID's time part.
const MAX_EPOCH_MS = 253_402_300_799_999;
const TIMESTAMP_MESSAGE =
  'expected an RFC 3339 timestamp with a time zone (Z or ±hh:mm) or epoch milliseconds';
const RFC3339_RE =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;
// Not global: a global regex keeps state (lastIndex) between tests, and these are shared with the fast path.
export const EXECUTION_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;
export const METRIC_NAME_RE = /^[A-Za-z_][A-Za-z0-9_.]*$/;

function daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/** Epoch ms of an RFC 3339 date-time, or null. Parsed by hand: Date.parse accepts far more than RFC 3339. */
export function parseRfc3339(text: string): number | null {
  const m = RFC3339_RE.exec(text);
  if (m === null) return null;
  const year = Number(m[1]);
  const month = Number(m[2]);
  const day = Number(m[3]);
  const hour = Number(m[4]);
  const minute = Number(m[5]);
  // 60 is a leap second: Date.UTC rolls it into the next minute.
  const second = Number(m[6]);
  // Date.UTC maps years 0–99 to 1900–1999; those are before the epoch anyway.
  if (year < 100 || month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return null;
  if (hour > 23 || minute > 59 || second > 60) return null;
  // Sub-millisecond digits are dropped, as Date.parse does.
  const fraction = m[7];
  const ms = fraction === undefined ? 0 : Number(`${fraction}00`.slice(0, 3));
  let offsetMinutes = 0;
  if (m[8] !== undefined) {
    const offsetHours = Number(m[9]);
    const offsetMins = Number(m[10]);
    if (offsetHours > 23 || offsetMins > 59) return null;
    offsetMinutes = (offsetHours * 60 + offsetMins) * (m[8] === '-' ? -1 : 1);
  }
  return Date.UTC(year, month - 1, day, hour, minute, second, ms) - offsetMinutes * 60_000;
}

/**
 * Whole epoch milliseconds of a timestamp that passed the string-or-finite-number check, or null when it is
 * not a time the contract accepts (fractions of a ms are floored).
 */
export function epochMsOf(value: string | number): number | null {
  const ms = typeof value === 'number' ? Math.floor(value) : parseRfc3339(value);
  return ms !== null && ms >= 0 && ms <= MAX_EPOCH_MS ? ms : null;
}

/** RFC 3339 text or epoch milliseconds in; whole epoch milliseconds out (fractions of a ms are floored). */
export const epochMsSchema = z
  .union([z.string(), z.number()], { error: TIMESTAMP_MESSAGE })
  .transform((value, ctx) => {
    const ms = epochMsOf(value);
    if (ms === null) {
      ctx.issues.push({ code: 'custom', message: TIMESTAMP_MESSAGE, input: value });
      return z.NEVER;
    }
    return ms;
  });

export const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

export interface TreeProblem {
  path: string[];
  message: string;
}

interface TreeCount {
  leaves: number;
  /** Upper bound of the JSON text length (every char escaped as \uXXXX), to skip JSON.stringify when small. */
  charBound: number;
}

/**
 * Checks a scalar tree, depth-first, stopping at the first problem. `depth` is the number of path segments
 * of the keys of `node`. The path is built on the way back up, so the happy path allocates nothing.
 */
function checkScalarTree(
  node: Record<string, unknown>,
  depth: number,
  maxDepth: number,
  count: TreeCount,
): TreeProblem | null {
  for (const key of Object.keys(node)) {
    const value = node[key];
    count.charBound += key.length * 6 + 4;
    let problem: TreeProblem | null = null;
    if (value === null || typeof value === 'boolean' || typeof value === 'string') {
      count.leaves++;
      count.charBound += typeof value === 'string' ? value.length * 6 + 2 : 5;
    } else if (typeof value === 'number') {
      if (!Number.isFinite(value)) problem = { path: [], message: 'expected a finite number' };
      count.leaves++;
      count.charBound += 24;
    } else if (Array.isArray(value)) {
      problem = { path: [], message: 'arrays are not allowed: use an object or a scalar' };
    } else if (typeof value === 'object') {
      if (depth + 1 > maxDepth) {
        problem = { path: [], message: `nested deeper than ${maxDepth} levels` };
      } else {
        problem = checkScalarTree(value as Record<string, unknown>, depth + 1, maxDepth, count);
      }
    } else {
      problem = { path: [], message: 'expected a string, number, boolean, null or object' };
    }
    if (problem !== null) {
      problem.path.unshift(key);
      return problem;
    }
  }
  return null;
}

const scalarTreeInput = z.custom<ScalarTree>(isObject, { error: 'expected an object' });

/** The first problem of an execution's context (an object), or null when it is a valid one. */
export function contextProblem(context: Record<string, unknown>): TreeProblem | null {
  const count: TreeCount = { leaves: 0, charBound: 2 };
  const problem = checkScalarTree(context, 1, INGEST_ITEM_LIMITS.contextMaxDepth, count);
  if (problem !== null) return problem;
  if (count.leaves > INGEST_ITEM_LIMITS.contextMaxLeaves) {
    return {
      path: [],
      message: `at most ${INGEST_ITEM_LIMITS.contextMaxLeaves} leaves, got ${count.leaves}`,
    };
  }
  if (
    count.charBound > INGEST_ITEM_LIMITS.contextMaxChars &&
    JSON.stringify(context).length > INGEST_ITEM_LIMITS.contextMaxChars
  ) {
    return { path: [], message: `at most ${INGEST_ITEM_LIMITS.contextMaxChars} characters of JSON` };
  }
  return null;
}

export const contextSchema = scalarTreeInput.superRefine((context, ctx) => {
  const problem = contextProblem(context);
  if (problem !== null) ctx.addIssue({ code: 'custom', message: problem.message, path: problem.path });
});

function flattenInto(node: Record<string, unknown>, prefix: string, out: Record<string, Scalar>): void {
  for (const key of Object.keys(node)) {
    const value = node[key];
    const path = prefix === '' ? key : `${prefix}.${key}`;
    if (isObject(value)) {
      flattenInto(value, path, out);
    } else if (path === '__proto__') {
      // A plain assignment would set the prototype instead of a field.
      Object.defineProperty(out, path, { value, enumerable: true, writable: true, configurable: true });
    } else {
      out[path] = value as Scalar;
    }
  }
}

/** Response fields: scalars, possibly nested; the output is flat, keyed by dotted path, in key order. */
export const responseFieldsSchema = scalarTreeInput.transform((fields, ctx): Record<string, Scalar> => {
  const problem = checkScalarTree(fields, 1, INGEST_ITEM_LIMITS.fieldsMaxDepth, { leaves: 0, charBound: 0 });
  if (problem !== null) {
    ctx.issues.push({ code: 'custom', message: problem.message, input: fields, path: problem.path });
    return z.NEVER;
  }
  const flat: Record<string, Scalar> = {};
  flattenInto(fields, '', flat);
  return flat;
});

function exceedsDepth(value: unknown, depthLeft: number): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (depthLeft === 0) return true;
  if (Array.isArray(value)) return value.some((v) => exceedsDepth(v, depthLeft - 1));
  for (const key of Object.keys(value)) {
    if (exceedsDepth((value as Record<string, unknown>)[key], depthLeft - 1)) return true;
  }
  return false;
}

/** Whether log attributes (an object) stay within the depth limit. */
export const attributesWithinDepth = (attributes: Record<string, unknown>): boolean =>
  !exceedsDepth(attributes, INGEST_ITEM_LIMITS.attributesMaxDepth);

/** Log attributes: any JSON object (arrays allowed), bounded in depth. */
export const attributesSchema = z
  .custom<Record<string, unknown>>(isObject, { error: 'expected an object' })
  .refine(attributesWithinDepth, {
    message: `nested deeper than ${INGEST_ITEM_LIMITS.attributesMaxDepth} levels`,
  });

const scalarSchema = z.union([z.string(), z.number(), z.boolean(), z.null()]);
const idSchema = z.string().min(1).max(INGEST_STRING_LIMITS.id);
export const executionIdSchema = z
  .string()
  .regex(EXECUTION_ID_RE, { error: 'expected 1–128 characters of A-Z a-z 0-9 . _ : -' });
const serviceSchema = z.string().min(1).max(INGEST_STRING_LIMITS.service);
/** `environment` defaults to `default` when neither the item nor the resource names one. */
const environmentSchema = z
  .string()
  .min(1)
  .max(INGEST_STRING_LIMITS.environment)
  .nullish()
  .transform((environment) => environment ?? 'default');
const modeSchema = z.enum(MODES);
const durationSchema = z.number().min(0).max(INGEST_ITEM_LIMITS.maxDurationMs);

const headersSchema = z.record(z.string(), z.union([z.string(), z.array(z.string())]));

export const requestSchema = z.object({
  route: z.string().nullish(),
  headers: headersSchema.nullish(),
  query: z.record(z.string(), z.union([scalarSchema, z.array(scalarSchema)])).nullish(),
});

export const responseSchema = z.object({
  headers: headersSchema.nullish(),
  fields: responseFieldsSchema.nullish(),
});

const frameSchema = z.object({
  function: z.string().nullish(),
  file: z.string().nullish(),
  line: z.number().int().nonnegative().nullish(),
  column: z.number().int().nonnegative().nullish(),
  inApp: z.boolean().nullish(),
});

/** `handled` absent means unhandled (CONTRACT §5). */
export const exceptionSchema = z.object({
  type: z.string().min(1),
  message: z.string(),
  stack: z.string().nullish(),
  handled: z.boolean().nullish(),
  frames: z.array(frameSchema).nullish(),
});

export const outcomeEvidenceSchema = z.object({
  kind: z.string().min(1),
  detail: z.string().nullish(),
  verdict: z.enum(['failed', 'success']).nullish(),
});

export const outcomeEvidenceListSchema = z.array(outcomeEvidenceSchema);

export const executionItemSchema = z
  .object({
    executionId: executionIdSchema.nullish(),
    traceId: idSchema.nullish(),
    spanId: idSchema.nullish(),
    parentSpanId: idSchema.nullish(),
    service: serviceSchema,
    environment: environmentSchema,
    mode: modeSchema.nullish(),
    source: z
      .enum(EXECUTION_SOURCES)
      .nullish()
      .transform((source) => source ?? 'http'),
    endpoint: z.string().min(1).max(INGEST_STRING_LIMITS.endpoint),
    method: z
      .string()
      .min(1)
      .max(INGEST_STRING_LIMITS.method)
      .nullish()
      .transform((method) => (method == null ? null : method.toUpperCase())),
    startedAt: epochMsSchema,
    durationMs: durationSchema.nullish(),
    /** Alias of durationMs (the spec's name), in milliseconds; used only when durationMs is absent. */
    duration: durationSchema.nullish(),
    statusCode: z.number().int().min(100).max(599).nullish(),
    /** The SDK's own verdict. */
    outcome: z.enum(OUTCOMES).nullish(),
    request: requestSchema.nullish(),
    response: responseSchema.nullish(),
    context: contextSchema.nullish(),
    exception: exceptionSchema.nullish(),
    outcomeEvidence: outcomeEvidenceListSchema.nullish(),
    fingerprint: z.array(z.string()).nullish(),
    /**
     * Log records of this execution. Each is checked on its own with logItemSchema after inheriting the
     * execution's service, environment, executionId and traceId, so one bad log never rejects the execution.
     */
    logs: z.array(z.unknown()).nullish(),
  })
  .refine((item) => item.durationMs != null || item.duration != null, {
    message: 'required: durationMs (or its alias duration), in milliseconds',
    path: ['durationMs'],
    // Also report it when other fields are invalid, so one answer lists every problem.
    when: (payload) => isObject(payload.value),
  })
  .transform((item) => {
    // The object is zod's own copy, so settling the alias in place costs no second copy.
    item.durationMs ??= item.duration;
    return item as typeof item & { durationMs: number };
  });

export const logItemSchema = z.object({
  timestamp: epochMsSchema,
  level: z
    .string()
    .transform((level) => level.toLowerCase())
    .pipe(z.enum(LOG_LEVELS)),
  message: z.string(),
  service: serviceSchema,
  environment: environmentSchema,
  mode: modeSchema.nullish(),
  executionId: executionIdSchema.nullish(),
  traceId: idSchema.nullish(),
  spanId: idSchema.nullish(),
  logger: z.string().nullish(),
  attributes: attributesSchema.nullish(),
  exception: exceptionSchema.nullish(),
});

const metricShape = {
  name: z
    .string()
    .max(INGEST_STRING_LIMITS.metricName)
    .regex(METRIC_NAME_RE, { error: 'expected [A-Za-z_][A-Za-z0-9_.]*' }),
  unit: z.string().nullish(),
  timestamp: epochMsSchema,
  service: serviceSchema,
  environment: environmentSchema,
  mode: modeSchema.nullish(),
  tags: z
    .record(z.string(), z.string())
    .refine((tags) => Object.keys(tags).length <= INGEST_ITEM_LIMITS.maxTags, {
      message: `at most ${INGEST_ITEM_LIMITS.maxTags} tags`,
    })
    .nullish(),
};

export const histogramValueSchema = z.object(
  {
    count: z.number().int().nonnegative(),
    sum: z.number(),
    min: z.number(),
    max: z.number(),
  },
  { error: 'a histogram value is { count, sum, min, max }' },
);

/** The type decides the value's shape: a number for counter and gauge, an object for histogram. */
export const metricPointSchema = z.discriminatedUnion('type', [
  z.object({
    ...metricShape,
    type: z.enum(['counter', 'gauge']),
    value: z.number({ error: 'a counter or gauge value is a finite number' }),
  }),
  z.object({ ...metricShape, type: z.literal('histogram'), value: histogramValueSchema }),
]);

/** The envelope's `resource`: fills service, environment and mode of every item that omits them. */
export const resourceSchema = z.object({
  service: serviceSchema.nullish(),
  environment: z.string().min(1).max(INGEST_STRING_LIMITS.environment).nullish(),
  mode: modeSchema.nullish(),
});

export const sdkSchema = z.object({
  name: z.string().min(1).max(128).nullish(),
  version: z.string().min(1).max(64).nullish(),
});

export type ExecutionItemInput = z.input<typeof executionItemSchema>;
export type ExecutionItem = z.output<typeof executionItemSchema>;
export type LogItemInput = z.input<typeof logItemSchema>;
export type LogItem = z.output<typeof logItemSchema>;
export type MetricPointInput = z.input<typeof metricPointSchema>;
export type MetricPoint = z.output<typeof metricPointSchema>;
export type ExceptionItem = z.output<typeof exceptionSchema>;
export type RequestItem = z.output<typeof requestSchema>;
export type ResponseItem = z.output<typeof responseSchema>;
export type OutcomeEvidenceItem = z.output<typeof outcomeEvidenceSchema>;
export type ResourceInput = z.input<typeof resourceSchema>;
export type SdkInput = z.input<typeof sdkSchema>;

/**
 * The body of `POST /api/ingest` and `POST /api/ingest/validate` (CONTRACT §5), for the API's description only:
 * the routes check the bytes themselves (api/ingest-envelope.ts) and the pipeline validates each item with the
 * schemas above, one item at a time, so one bad item never refuses the others.
 */
export const ingestEnvelopeSchema = z
  .object({
    sdk: sdkSchema.optional(),
    resource: resourceSchema.optional(),
    executions: z.array(executionItemSchema).optional(),
    logs: z.array(logItemSchema).optional(),
    metrics: z.array(metricPointSchema).optional(),
  })
  .meta({ id: 'IngestEnvelope' });
