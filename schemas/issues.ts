import { z } from 'zod';
import { timeParam } from './api.js';
import { MODES } from './records.js';

/** Issues (CONTRACT §9): what is stored in the control plane's buckets, what the pipeline hands it, the API's parameters. */

export const ISSUE_ID_PREFIX = 'iss_';
export const ISSUE_ID_SHAPE = /^iss_[0-9a-f]{16}$/;

export const FAILURE_TYPES = [
  'exception',
  'http_5xx',
  'http_4xx',
  'timeout',
  'response_error',
  'unknown',
] as const;
export type FailureType = (typeof FAILURE_TYPES)[number];

export const ISSUE_STATUSES = ['open', 'acknowledged', 'resolved', 'ignored', 'regressed'] as const;
export type IssueStatus = (typeof ISSUE_STATUSES)[number];

const ACTIVITY_TYPES = ['created', 'status_changed', 'assigned', 'commented', 'regressed'] as const;

const actorSchema = z.union([
  z.object({ type: z.literal('user'), id: z.string() }),
  z.object({ type: z.literal('system') }),
]);
export type Actor = z.infer<typeof actorSchema>;

export const issueEventSchema = z.object({
  id: z.string(),
  type: z.enum(ACTIVITY_TYPES),
  actor: actorSchema,
  at: z.string(),
  data: z.record(z.string(), z.unknown()),
});
export type IssueEvent = z.infer<typeof issueEventSchema>;

/**
 * An issue's state, stored under `<workspaceId>.<mode>.<issueId>`. Occurrence counts, the last occurrence and the
 * representative execution are not here: they come from the stored rows (query/issues.ts), so a redelivered
 * message or a restart can never count an occurrence twice, and the hot path writes here only when something
 * here changes (a new issue, an earlier first occurrence, a new environment, a regression).
 */
export const issueRecordSchema = z.object({
  id: z.string(),
  workspaceId: z.string(),
  mode: z.enum(MODES),
  fingerprintParts: z.array(z.string()),
  title: z.string(),
  service: z.string(),
  endpoint: z.string(),
  method: z.string().nullable(),
  failureType: z.enum(FAILURE_TYPES),
  exceptionType: z.string().nullable(),
  environments: z.array(z.string()),
  /** When the issue was made (its `created` activity). */
  createdAt: z.string(),
  firstSeenAt: z.string(),
  /** The latest occurrence this record was told of; the stored rows may know a later one. */
  lastSeenAt: z.string(),
  status: z.enum(ISSUE_STATUSES),
  statusChangedAt: z.string(),
  resolvedAt: z.string().nullable(),
  regressedAt: z.string().nullable(),
  assignee: z.string().nullable(),
  /** status_changed, assigned and regressed events, oldest first (created and commented are derived). */
  events: z.array(issueEventSchema),
  /** Events dropped from the front of `events` to keep the record small. */
  eventsDropped: z.number().int().default(0),
});
export type IssueRecord = z.infer<typeof issueRecordSchema>;

/** Stored under `<workspaceId>.<mode>.<issueId>.<commentId>`; comment ids sort by creation time. */
export const issueCommentSchema = z.object({
  id: z.string(),
  body: z.string(),
  author: z.object({ id: z.string(), email: z.string() }),
  createdAt: z.string(),
});
export type IssueComment = z.infer<typeof issueCommentSchema>;

/**
 * One issue's occurrences in one ingest message (from the parse worker) or one batch (merged): what the
 * control plane needs to create the issue or move it, never per execution.
 */
export interface IssueOccurrences {
  issueId: string;
  fingerprintParts: string[];
  title: string;
  service: string;
  endpoint: string;
  method: string | null;
  failureType: FailureType;
  exceptionType: string | null;
  environments: string[];
  count: number;
  /** Epoch ms. */
  firstStartedAt: number;
  lastStartedAt: number;
  /** The execution that started last. */
  lastExecutionId: string;
}

/** Merges `b` into `a` (same issue). */
export function mergeOccurrences(a: IssueOccurrences, b: IssueOccurrences): void {
  a.count += b.count;
  if (b.firstStartedAt < a.firstStartedAt) a.firstStartedAt = b.firstStartedAt;
  if (b.lastStartedAt > a.lastStartedAt) {
    a.lastStartedAt = b.lastStartedAt;
    a.lastExecutionId = b.lastExecutionId;
  }
  for (const e of b.environments) if (!a.environments.includes(e)) a.environments.push(e);
}

// ---- the API ----

const statusList = z
  .union([z.string(), z.array(z.string())])
  .describe(`a comma list (or a repeated parameter) of ${ISSUE_STATUSES.join(', ')}`)
  .transform((v) => (Array.isArray(v) ? v : [v]).flatMap((s) => s.split(',')).map((s) => s.trim()))
  .pipe(z.array(z.enum(ISSUE_STATUSES)).min(1));

export const ISSUE_SORTS = ['-lastSeenAt', '-firstSeenAt', '-occurrences'] as const;
export type IssueSort = (typeof ISSUE_SORTS)[number];

export const issueListQuerySchema = z.strictObject({
  mode: z.enum(MODES).optional(),
  status: statusList.optional(),
  serviceName: z.string().min(1).max(128).optional(),
  /** A member's id, or `none` for unassigned issues. */
  assignee: z.string().min(1).max(64).optional(),
  from: timeParam.optional(),
  to: timeParam.optional(),
  sort: z.enum(ISSUE_SORTS).default('-lastSeenAt'),
  page: z.coerce.number().int().min(1).default(1),
  pageSize: z.coerce.number().int().min(1).optional(),
});

export const issuePagedQuerySchema = z.strictObject({
  mode: z.enum(MODES).optional(),
  page: z.coerce.number().int().min(1).default(1),
  pageSize: z.coerce.number().int().min(1).optional(),
});

/** Unknown fields are ignored (CONTRACT §1); `assignee: null` unassigns. */
export const issuePatchSchema = z
  .object({
    status: z.enum(ISSUE_STATUSES).optional(),
    assignee: z.string().min(1).max(64).nullable().optional(),
  })
  .refine((p) => p.status !== undefined || p.assignee !== undefined, {
    message: 'name at least one of status, assignee',
    path: [],
  });
export type IssuePatch = z.infer<typeof issuePatchSchema>;

export const MAX_COMMENT_LENGTH = 10_000;

export const commentBodySchema = z.object({
  body: z
    .string()
    .refine((s) => s.trim().length > 0, 'must not be empty')
    .pipe(z.string().max(MAX_COMMENT_LENGTH)),
});

export const issueIdParamsSchema = z.object({ id: z.string() });
