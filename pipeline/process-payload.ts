import type { z } from 'zod';
import {
  type ExecutionItem,
  executionItemSchema,
  type LogItem,
  logItemSchema,
  type MetricPoint,
  metricPointSchema,
} from '../schemas/ingest-items.js';
import { type IssueOccurrences, mergeOccurrences } from '../schemas/issues.js';
import type {
  ErrorDetail,
  ExecutionRecord,
  ItemKind,
  LogRecord,
  MetricRecord,
  Mode,
  ProcessedPayload,
} from '../schemas/records.js';
import { type Classification, type ClassifyRules, classifyExecution } from './classify.js';
import { type DirectExecutions, TAKEN } from './direct-executions.js';
import { FAST_PATH, type FastPath } from './fast-items.js';
import {
  endpointTemplate,
  type FingerprintInput,
  failureTypeOf,
  fingerprintParts,
  issueIdOf,
  issueTitle,
} from './fingerprint.js';
import { deterministicUlid, fillResourceDefaults, type ResourceDefaults } from './normalize.js';
import {
  redactServiceKeys,
  type ScrubState,
  scrubExecutionItem,
  scrubLogItem,
  scrubMetricPoint,
} from './scrub.js';

export interface ProcessContext {
  /** The mode of the key that sent the request: items naming the other mode are FORBIDDEN. */
  mode: Mode;
  /** Seeds the ids assigned to executions that came without one, so reprocessing is deterministic. */
  requestId: string;
  /** Epoch ms the API received the request; not needed by these steps, kept for the caller's records. */
  receivedAt: number;
  /**
   * The workspace the request came in for: with the mode, it scopes the issue ids. Absent: no fingerprint stage
   * (no endpoint templates, fingerprints or issue ids), as for POST /api/ingest/validate.
   */
  workspaceId?: string;
}

export interface ProcessOptions {
  /** The workspace's outcome rules (CONTRACT §5 step 1); without it classification starts at step 2. */
  classifyRules?: ClassifyRules;
  /**
   * The validators tried before the zod schemas (pipeline/fast-items.ts), FAST_PATH unless given. Tests pass
   * ZOD_ONLY to check the output is the same without them, or a wrapper to count what falls back.
   */
  fastPath?: FastPath;
}

// A hopeless item (every field wrong, thousands of frames) must not make a huge rejection record.
const MAX_DETAILS = 20;
const NOT_AN_OBJECT: ErrorDetail = { path: '', message: 'expected an object' };
const NO_ITEMS: readonly unknown[] = [];

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const toJson = (value: unknown): string | null => (value == null ? null : JSON.stringify(value));

const joinPath = (prefix: string, path: string): string =>
  prefix === '' ? path : path === '' ? prefix : `${prefix}.${path}`;

/** zod issues as contract details. Paths and messages can echo client keys, so they are scrubbed too. */
function toDetails(error: z.ZodError, prefix: string): ErrorDetail[] {
  const count = Math.min(error.issues.length, MAX_DETAILS);
  const details: ErrorDetail[] = new Array(count);
  for (let i = 0; i < count; i++) {
    const issue = error.issues[i]!;
    details[i] = {
      path: redactServiceKeys(joinPath(prefix, issue.path.map(String).join('.'))),
      message: redactServiceKeys(issue.message),
    };
  }
  return details;
}

/** A detail when the item names the other mode; an invalid mode value is left to validation. */
function modeMismatch(mode: unknown, keyMode: Mode, path: string): ErrorDetail | null {
  if ((mode !== 'test' && mode !== 'live') || mode === keyMode) return null;
  return { path, message: `mode "${mode}" is not the mode of the key ("${keyMode}")` };
}

class PayloadProcessor {
  readonly out: ProcessedPayload = { executions: [], logs: [], metrics: [], rejections: [], issues: [] };
  /** The payload's occurrences per issue: one entry an issue, not one an execution. */
  private readonly issues = new Map<string, IssueOccurrences>();
  private readonly ctx: ProcessContext;
  private readonly resource: ResourceDefaults | undefined;
  private readonly classifyRules: ClassifyRules | undefined;
  private readonly fast: FastPath;

  constructor(ctx: ProcessContext, resource: ResourceDefaults | undefined, options: ProcessOptions) {
    this.ctx = ctx;
    this.resource = resource;
    this.classifyRules = options.classifyRules;
    this.fast = options.fastPath ?? FAST_PATH;
  }

  private reject(
    kind: ItemKind,
    index: number,
    code: 'VALIDATION_ERROR' | 'FORBIDDEN',
    details: ErrorDetail[],
  ): void {
    this.out.rejections.push({ kind, index, code, details });
  }

  /**
   * Steps 1–3 (resource defaults, mode, validation) for a top-level item; null when it was rejected. The fast
   * path answers for the common shapes; zod for everything else, with the error details.
   */
  private admit<T>(
    kind: ItemKind,
    index: number,
    raw: unknown,
    fast: (raw: Record<string, unknown>) => T | undefined,
    schema: z.ZodType<T>,
  ): T | null {
    if (!isObject(raw)) {
      this.reject(kind, index, 'VALIDATION_ERROR', [NOT_AN_OBJECT]);
      return null;
    }
    fillResourceDefaults(raw, this.resource);
    const forbidden = modeMismatch(raw.mode, this.ctx.mode, 'mode');
    if (forbidden !== null) {
      this.reject(kind, index, 'FORBIDDEN', [forbidden]);
      return null;
    }
    const item = fast(raw);
    if (item !== undefined) return item;
    const parsed = schema.safeParse(raw);
    if (!parsed.success) {
      this.reject(kind, index, 'VALIDATION_ERROR', toDetails(parsed.error, ''));
      return null;
    }
    return parsed.data;
  }

  execution(raw: unknown, index: number): void {
    const item = this.admit('executions', index, raw, this.fast.execution, executionItemSchema);
    if (item === null) return;
    const state: ScrubState = { truncated: false };
    scrubExecutionItem(item, state);
    // After the scrub: an assigned id holds nothing to scrub, and the rules see the final id.
    const executionId = item.executionId ?? deterministicUlid(item.startedAt, this.ctx.requestId, index);
    item.executionId = executionId;
    const classification = classifyExecution(item, this.classifyRules);
    const record = toExecutionRecord(item, executionId, classification, state.truncated);
    if (record.outcome === 'failed')
      this.fingerprint(record, item.exception ?? null, item.request?.route, item.fingerprint);
    this.out.executions.push(record);
    if (item.logs != null) this.inlineLogs(item.logs, index, record);
  }

  /**
   * The fingerprint stage (CONTRACT §9) of a failed execution: its failure type, fingerprint parts and issue id
   * go into the record, and the occurrence into the payload's per-issue summary.
   */
  fingerprint(
    record: ExecutionRecord,
    exception: FingerprintInput['exception'],
    route: string | null | undefined,
    custom: string[] | null | undefined,
  ): void {
    const workspaceId = this.ctx.workspaceId;
    if (workspaceId === undefined) return;
    const failureType = failureTypeOf({
      statusCode: record.statusCode,
      outcomeReason: record.outcomeReason,
      exception,
    });
    // The endpoint template (CONTRACT §9): the framework's route when sent. Only failures need one: templating
    // and storing one for every execution showed about 2 µs more CPU an execution (of ~33) in an ingest A/B.
    const template = route != null && route !== '' ? route : endpointTemplate(record.endpoint);
    record.endpointTemplate = template;
    const parts = fingerprintParts(
      {
        statusCode: record.statusCode,
        outcomeReason: record.outcomeReason,
        exception,
        service: record.service,
        template,
        custom,
      },
      failureType,
    );
    record.failureType = failureType;
    record.fingerprint = JSON.stringify(parts);
    const issueId = issueIdOf(workspaceId, this.ctx.mode, parts);
    record.issueId = issueId;
    const occurrence: IssueOccurrences = {
      issueId,
      fingerprintParts: parts,
      title: issueTitle(record.exceptionType, failureType, record.method, template),
      service: record.service,
      endpoint: template,
      method: record.method,
      failureType,
      exceptionType: record.exceptionType,
      environments: [record.environment],
      count: 1,
      firstStartedAt: record.startedAt,
      lastStartedAt: record.startedAt,
      lastExecutionId: record.executionId,
    };
    const seen = this.issues.get(issueId);
    if (seen) mergeOccurrences(seen, occurrence);
    else {
      this.issues.set(issueId, occurrence);
      this.out.issues.push(occurrence);
    }
  }

  /** An invalid inline log is dropped and reported under its execution; the execution stays. */
  private inlineLogs(logs: readonly unknown[], index: number, execution: ExecutionRecord): void {
    for (let j = 0; j < logs.length; j++) {
      const raw = logs[j];
      const prefix = `logs.${j}`;
      if (!isObject(raw)) {
        this.reject('executions', index, 'VALIDATION_ERROR', [
          { path: prefix, message: NOT_AN_OBJECT.message },
        ]);
        continue;
      }
      const forbidden = modeMismatch(raw.mode, this.ctx.mode, `${prefix}.mode`);
      if (forbidden !== null) {
        this.reject('executions', index, 'FORBIDDEN', [forbidden]);
        continue;
      }
      inheritFromExecution(raw, execution);
      const item = this.fast.log(raw);
      if (item !== undefined) {
        this.out.logs.push(toLogRecord(item));
        continue;
      }
      const parsed = logItemSchema.safeParse(raw);
      if (!parsed.success) {
        this.reject('executions', index, 'VALIDATION_ERROR', toDetails(parsed.error, prefix));
        continue;
      }
      this.out.logs.push(toLogRecord(parsed.data));
    }
  }

  log(raw: unknown, index: number): void {
    const item = this.admit('logs', index, raw, this.fast.log, logItemSchema);
    if (item !== null) this.out.logs.push(toLogRecord(item));
  }

  metric(raw: unknown, index: number): void {
    const item = this.admit('metrics', index, raw, this.fast.metric, metricPointSchema);
    if (item !== null) this.out.metrics.push(toMetricRecord(item));
  }
}

/**
 * Inline logs take the execution's ids, service and environment where they omit them (absent or null).
 * In place, like fillResourceDefaults, and as idempotent: the execution's id is deterministic.
 */
function inheritFromExecution(log: Record<string, unknown>, execution: ExecutionRecord): void {
  log.service ??= execution.service;
  log.environment ??= execution.environment;
  log.executionId ??= execution.executionId;
  log.traceId ??= execution.traceId;
}

function toExecutionRecord(
  item: ExecutionItem,
  executionId: string,
  classification: Classification,
  truncated: boolean,
): ExecutionRecord {
  const exception = item.exception ?? null;
  return {
    executionId,
    traceId: item.traceId ?? null,
    spanId: item.spanId ?? null,
    parentSpanId: item.parentSpanId ?? null,
    service: item.service,
    environment: item.environment,
    source: item.source,
    endpoint: item.endpoint,
    method: item.method,
    startedAt: item.startedAt,
    durationMs: item.durationMs,
    statusCode: item.statusCode ?? null,
    outcome: classification.outcome,
    outcomeReason: classification.reason,
    exceptionType: exception?.type ?? null,
    exceptionMessage: exception?.message ?? null,
    context: toJson(item.context),
    contextTree: item.context ?? null,
    request: toJson(item.request),
    response: toJson(item.response),
    exception: toJson(exception),
    outcomeEvidence: toJson(item.outcomeEvidence),
    // Set by the fingerprint stage, for failed executions only.
    fingerprint: null,
    issueId: null,
    failureType: null,
    endpointTemplate: null,
    truncated,
  };
}

function toLogRecord(item: LogItem): LogRecord {
  const state: ScrubState = { truncated: false };
  scrubLogItem(item, state);
  return {
    timestamp: item.timestamp,
    level: item.level,
    message: item.message,
    service: item.service,
    environment: item.environment,
    executionId: item.executionId ?? null,
    traceId: item.traceId ?? null,
    spanId: item.spanId ?? null,
    logger: item.logger ?? null,
    attributes: toJson(item.attributes),
    exception: toJson(item.exception),
    truncated: state.truncated,
  };
}

function toMetricRecord(item: MetricPoint): MetricRecord {
  scrubMetricPoint(item, { truncated: false });
  const histogram = item.type === 'histogram' ? item.value : null;
  return {
    timestamp: item.timestamp,
    name: item.name,
    type: item.type,
    value: item.type === 'histogram' ? null : item.value,
    histCount: histogram?.count ?? null,
    histSum: histogram?.sum ?? null,
    histMin: histogram?.min ?? null,
    histMax: histogram?.max ?? null,
    unit: item.unit ?? null,
    service: item.service,
    environment: item.environment,
    tags: toJson(item.tags),
  };
}

/**
 * Validates, normalizes, scrubs and classifies every item of one ingest request body (CONTRACT §5).
 * Never throws on client data: an item that fails is listed in `rejections` with its kind and index.
 * `payload` must be a freshly parsed body the caller throws away: its items get the resource's and their
 * execution's defaults filled in place (idempotently); nothing else in it is changed.
 * Output order: executions as sent; logs = the executions' inline logs (in execution order), then the
 * top-level logs; metrics as sent.
 *
 * `direct`: the body's execution items, still as bytes (the payload's `executions` then an empty array), read
 * by the direct lane; the items it declines are processed here. It throws when those bytes are not the list
 * they were said to be: the caller then processes the body parsed whole.
 */
export function processPayload(
  payload: unknown,
  ctx: ProcessContext,
  options: ProcessOptions = {},
  direct?: DirectExecutions,
): ProcessedPayload {
  if (!isObject(payload)) return { executions: [], logs: [], metrics: [], rejections: [], issues: [] };
  const resource = isObject(payload.resource) ? payload.resource : undefined;
  const processor = new PayloadProcessor(ctx, resource, options);
  if (direct !== undefined) {
    direct.useResource(resource);
    const { executions, logs } = processor.out;
    for (let i = 0; i < direct.count; i++) {
      const raw = direct.next(i, executions, logs);
      if (raw !== TAKEN) processor.execution(raw, i);
      else if (direct.failure !== null) {
        const { record, exception, route } = direct.failure;
        processor.fingerprint(record, exception, route, null);
      }
    }
    direct.finish();
  }
  const executions = Array.isArray(payload.executions) ? payload.executions : NO_ITEMS;
  for (let i = 0; i < executions.length; i++) processor.execution(executions[i], i);
  const logs = Array.isArray(payload.logs) ? payload.logs : NO_ITEMS;
  for (let i = 0; i < logs.length; i++) processor.log(logs[i], i);
  const metrics = Array.isArray(payload.metrics) ? payload.metrics : NO_ITEMS;
  for (let i = 0; i < metrics.length; i++) processor.metric(metrics[i], i);
  return processor.out;
}
