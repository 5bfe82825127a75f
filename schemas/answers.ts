import { z } from 'zod';
import { PERMISSIONS, ROLES } from './control.js';
import { ERROR_STATUS, type ErrorCode } from './errors.js';
import { exceptionSchema, outcomeEvidenceSchema } from './ingest-items.js';
import { FAILURE_TYPES, ISSUE_STATUSES, issueCommentSchema, issueEventSchema } from './issues.js';
import { INTERVAL_NAMES, SERIES_AGGS, TIMESERIES_METRICS } from './metrics.js';
import { EXECUTION_SOURCES, ITEM_KINDS, LOG_LEVELS, METRIC_TYPES, MODES, OUTCOMES } from './records.js';
import { settingsSchema } from './settings.js';

/**
 * The answers of the HTTP API (CONTRACT §1–§12), as the client receives them (JSON). Routes declare them, the
 * OpenAPI document is made from them, and with VALIDATE_ANSWERS every answer is checked against them, so they
 * describe what the handlers really send: objects are strict (a field a handler adds is a mismatch until it is
 * described here), and nothing has a default (a missing field must fail, not be filled in). Schemas with an
 * `id` are components of the document, referred to wherever they occur.
 */

/** RFC 3339 in UTC with milliseconds, as Date#toISOString writes it (CONTRACT §1). */
const timestamp = z
  .string()
  .regex(
    /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/,
    'expected an RFC 3339 UTC timestamp with milliseconds',
  )
  .meta({ format: 'date-time' });
const count = z.number().int().min(0);
/** A fraction, 0–1. */
const share = z.number().min(0).max(1);
const ms = z.number().min(0);

/** CONTRACT §1: a list answer. */
const pageOf = <T extends z.ZodType>(item: T) =>
  z.strictObject({ data: z.array(item), page: count, pageSize: count, hasMore: z.boolean(), total: count });

/** 204: no body. */
export const noContent = z.undefined().describe('No content');

// ---- errors (CONTRACT §3) ----

const errorDetail = z.strictObject({
  path: z.string(),
  message: z.string(),
  /** Query-language details (CONTRACT §6.2) also name the term and its offset in `q`. */
  term: z.string().optional(),
  offset: count.optional(),
});

export const errorAnswer = z
  .strictObject({
    error: z.strictObject({
      code: z.enum(Object.keys(ERROR_STATUS) as [ErrorCode, ...ErrorCode[]]),
      message: z.string(),
      details: z.array(errorDetail),
      requestId: z.string(),
    }),
  })
  .meta({ id: 'Error', description: 'An error (CONTRACT §3)' });

/** The error answers every route may give, for the document (answers under 400 are the ones checked). */
export const errorAnswers = { '4xx': errorAnswer, '5xx': errorAnswer } as const;

// ---- operations (CONTRACT §4, §11) ----

export const healthAnswer = z.strictObject({ status: z.literal('ok') });
export const readyAnswer = z.strictObject({
  status: z.literal('ready'),
  checks: z.strictObject({ broker: z.literal('ok'), storage: z.literal('ok') }),
});

const rate = z.strictObject({ requestsPerSecond: count, burst: count });
export const limitsAnswer = z.strictObject({
  ingest: rate,
  read: rate,
  body: z.strictObject({ maxBytes: count, maxDecodedBytes: count }),
  items: z.strictObject({ executions: count, logs: count, metrics: count }),
  pageSize: z.strictObject({ default: count, max: count }),
  maxResultWindow: count,
  context: z.strictObject({
    maxIndexedKeys: count,
    maxKeysPerSearch: count,
    maxValuesPerKey: count,
    windowWithoutServiceHours: count,
    windowWithServiceDays: count,
  }),
  metrics: z.strictObject({ maxPoints: count }),
  retentionDays: count,
});

/** Prometheus text format; not JSON. */
export const prometheusAnswer = { content: { 'text/plain': { schema: z.string() } } };

/** The OpenAPI 3.1 document; its parts are OpenAPI's, not described again here. */
export const openApiAnswer = z.looseObject({
  openapi: z.literal('3.1.0'),
  info: z.looseObject({ title: z.string(), version: z.string() }),
  paths: z.record(z.string(), z.record(z.string(), z.unknown())),
});

// ---- accounts, workspace, keys (CONTRACT §2, §10) ----

const user = z.strictObject({ id: z.string(), email: z.string(), name: z.string().nullable() });
const workspace = z.strictObject({ id: z.string(), name: z.string() });
const session = z.strictObject({ token: z.string(), expiresAt: timestamp });

const keyFields = {
  id: z.string(),
  name: z.string(),
  mode: z.enum(MODES),
  permissions: z.array(z.enum(PERMISSIONS)),
  prefix: z.string(),
  last4: z.string(),
  createdAt: timestamp,
  revokedAt: timestamp.nullable(),
};
/** A key as listed: never the key itself. */
const keyListing = z.strictObject({ ...keyFields, lastUsedAt: timestamp.nullable() });
export const keyListAnswer = z.strictObject({ data: z.array(keyListing.meta({ id: 'ApiKey' })) });
/** A key just made: the only time `key` is shown. */
export const createdKeyAnswer = keyListing.extend({ key: z.string() });

export const signupAnswer = z.strictObject({
  user,
  workspace,
  session,
  testKey: z.strictObject({ ...keyFields, key: z.string() }),
});
export const loginAnswer = z.strictObject({ user, workspace, session });
export const meAnswer = z.strictObject({ user, workspace, role: z.enum(ROLES) });

/** The workspace's settings (CONTRACT §10), as stored: the request's schema. */
export const settingsAnswer = settingsSchema.meta({ id: 'Settings' });

export const workspaceAnswer = z.strictObject({
  id: z.string(),
  name: z.string(),
  createdAt: timestamp,
  /** null for an API key: keys have no role. */
  role: z.enum(ROLES).nullable(),
});

export const memberAnswer = z
  .strictObject({
    id: z.string(),
    email: z.string(),
    name: z.string().nullable(),
    role: z.enum(ROLES),
    createdAt: timestamp,
  })
  .meta({ id: 'Member' });
export const memberListAnswer = z.strictObject({ data: z.array(memberAnswer) });

// ---- ingest (CONTRACT §5) ----

const itemCounts = z.strictObject({ executions: count, logs: count, metrics: count });

export const ingestAnswer = z.strictObject({
  accepted: itemCounts,
  duplicate: z.boolean(),
  requestId: z.string(),
});

const itemKind = z.enum(ITEM_KINDS);
const rejectionCode = z.enum(['VALIDATION_ERROR', 'FORBIDDEN']);

export const ingestValidateAnswer = z.strictObject({
  valid: itemCounts,
  rejected: z.array(
    z.strictObject({ kind: itemKind, index: count, code: rejectionCode, details: z.array(errorDetail) }),
  ),
});

export const rejectionListAnswer = pageOf(
  z.strictObject({
    requestId: z.string(),
    kind: itemKind,
    index: count,
    code: rejectionCode,
    details: z.array(errorDetail),
    receivedAt: timestamp,
  }),
);

// ---- executions and logs (CONTRACT §6, §7) ----

const scalar = z.union([z.string(), z.number(), z.boolean(), z.null()]);
const headers = z.record(z.string(), z.union([z.string(), z.array(z.string())]));

const executionFields = {
  executionId: z.string(),
  traceId: z.string().nullable(),
  service: z.string(),
  environment: z.string(),
  mode: z.enum(MODES),
  source: z.enum(EXECUTION_SOURCES),
  endpoint: z.string(),
  method: z.string().nullable(),
  statusCode: z.number().int().nullable(),
  durationMs: ms,
  outcome: z.enum(OUTCOMES),
  startedAt: timestamp,
  issueId: z.string().nullable(),
  exceptionType: z.string().nullable(),
};

const executionSummary = z
  .strictObject({
    ...executionFields,
    /**
     * Only in GET /api/executions with includeMatchedContext=true: each context filter's path and the value
     * that matched (null: none).
     */
    matchedContext: z.record(z.string(), scalar).optional(),
  })
  .meta({ id: 'ExecutionSummary' });

export const executionListAnswer = pageOf(executionSummary);

/** A log record as stored (scrubbed; strings over 8 KiB cut, then `truncated`). */
const logItem = z
  .strictObject({
    timestamp,
    level: z.enum(LOG_LEVELS),
    message: z.string(),
    service: z.string(),
    environment: z.string(),
    executionId: z.string().nullable(),
    traceId: z.string().nullable(),
    spanId: z.string().nullable(),
    logger: z.string().nullable(),
    attributes: z.record(z.string(), z.unknown()).nullable(),
    exception: exceptionSchema.nullable(),
    truncated: z.boolean(),
  })
  .meta({ id: 'LogRecord' });

export const logListAnswer = pageOf(logItem);

/** A child span of an execution (CONTRACT §12). */
const spanItem = z
  .strictObject({
    spanId: z.string(),
    parentSpanId: z.string().nullable(),
    name: z.string(),
    kind: z.string(),
    startedAt: timestamp,
    durationMs: z.number(),
    status: z.string(),
    attributes: z.record(z.string(), z.unknown()).nullable(),
  })
  .meta({ id: 'Span' });

/** The whole execution (CONTRACT §6.4): the nested parts as ingested, normalized and scrubbed. */
export const executionAnswer = z
  .strictObject({
    ...executionFields,
    spanId: z.string().nullable(),
    parentSpanId: z.string().nullable(),
    /** Nested objects with scalar leaves. */
    context: z.record(z.string(), z.unknown()).nullable(),
    request: z
      .strictObject({
        route: z.string().nullish(),
        headers: headers.nullish(),
        query: z.record(z.string(), z.union([scalar, z.array(scalar)])).nullish(),
      })
      .nullable(),
    response: z
      .strictObject({
        headers: headers.nullish(),
        /** Flat: keyed by dotted path. */
        fields: z.record(z.string(), scalar).nullish(),
      })
      .nullable(),
    exception: exceptionSchema.nullable(),
    outcomeReason: z.string(),
    outcomeEvidence: z.array(outcomeEvidenceSchema).nullable(),
    truncated: z.boolean(),
    issue: z.strictObject({ id: z.string(), title: z.string(), status: z.enum(ISSUE_STATUSES) }).nullable(),
    /**
     * The first 1,000 in time order (the execution's, and those of its child spans); GET
     * /api/executions/{executionId}/logs pages through the execution's own.
     */
    logs: z.array(logItem),
    logsTruncated: z.boolean(),
    /** OTLP child spans of the same trace that descend from it (CONTRACT §12), in time order, up to 1,000. */
    spans: z.array(spanItem),
  })
  .meta({ id: 'Execution' });

// ---- issues (CONTRACT §9) ----

const issueFields = {
  id: z.string(),
  mode: z.enum(MODES),
  title: z.string(),
  status: z.enum(ISSUE_STATUSES),
  service: z.string(),
  environments: z.array(z.string()),
  endpoint: z.string(),
  method: z.string().nullable(),
  failureType: z.enum(FAILURE_TYPES),
  exceptionType: z.string().nullable(),
  fingerprintParts: z.array(z.string()),
  firstSeenAt: timestamp,
  lastSeenAt: timestamp,
  statusChangedAt: timestamp,
  resolvedAt: timestamp.nullable(),
  regressedAt: timestamp.nullable(),
  occurrences: z.strictObject({ total: count, last24h: count, last7d: count }),
  assignee: z.string().nullable(),
};

export const issueListAnswer = pageOf(z.strictObject(issueFields).meta({ id: 'IssueSummary' }));

const insight = z.strictObject({ text: z.string(), facts: z.array(z.string()) });
const activityEvent = issueEventSchema.strict().meta({ id: 'IssueEvent' });

export const issueAnswer = z
  .strictObject({
    ...issueFields,
    hypothesis: insight,
    suggestedFix: insight,
    commonFactors: z.array(
      z.strictObject({
        field: z.string(),
        value: z.union([z.string(), z.number(), z.boolean()]),
        issueShare: share,
        baselineShare: share,
      }),
    ),
    representativeExecution: executionSummary.nullable(),
    /** The last 20 events, newest first. */
    recentActivity: z.array(activityEvent),
  })
  .meta({ id: 'Issue' });

export const commentAnswer = issueCommentSchema.strict().meta({ id: 'Comment' });
export const commentListAnswer = pageOf(commentAnswer);
export const activityListAnswer = pageOf(activityEvent);

// ---- metrics (CONTRACT §8) ----

const percentiles = z.enum(['exact', 'sketch']);
const latency = z.strictObject({
  avg: ms.nullable(),
  p50: ms.nullable(),
  p95: ms.nullable(),
  p99: ms.nullable(),
});
const figures = {
  requests: count,
  throughputPerMin: z.number().min(0),
  failed: count,
  failureRate: share,
  latency,
};

export const overviewAnswer = z.strictObject({
  from: timestamp,
  to: timestamp,
  percentiles,
  services: z.array(
    z.strictObject({
      service: z.string(),
      ...figures,
      health: z.enum(['healthy', 'degraded', 'critical']),
      previous: z.strictObject(figures),
    }),
  ),
});

/** One line of a chart: its group (`{}` when not grouped; `__other__` for the rest) and a point per bucket. */
const series = z.array(
  z.strictObject({
    group: z.record(z.string(), z.string().nullable()),
    points: z.array(z.strictObject({ t: timestamp, value: z.number().nullable() })),
  }),
);

export const timeseriesAnswer = z.strictObject({
  metric: z.enum(TIMESERIES_METRICS),
  interval: z.enum(INTERVAL_NAMES),
  percentiles,
  from: timestamp,
  to: timestamp,
  series,
  /** With compare=previous_period: the period of equal length just before. */
  previous: z.strictObject({ from: timestamp, to: timestamp, series }).optional(),
});

export const endpointsAnswer = z.strictObject({
  from: timestamp,
  to: timestamp,
  percentiles,
  data: z.array(
    z.strictObject({
      service: z.string(),
      method: z.string().nullable(),
      endpoint: z.string(),
      requests: count,
      failureRate: share,
      p50: ms.nullable(),
      p95: ms.nullable(),
      p99: ms.nullable(),
    }),
  ),
});

export const seriesAnswer = z.strictObject({
  name: z.string(),
  /** null: no point of this name in the range. */
  type: z.enum(METRIC_TYPES).nullable(),
  agg: z.enum(SERIES_AGGS),
  interval: z.enum(INTERVAL_NAMES),
  from: timestamp,
  to: timestamp,
  series,
});

export const metricNamesAnswer = z.strictObject({
  data: z.array(
    z.strictObject({
      name: z.string(),
      type: z.enum(METRIC_TYPES),
      unit: z.string().nullable(),
      lastSeenAt: timestamp,
    }),
  ),
});
