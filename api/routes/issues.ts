import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { activityOf } from '../../control/issues.js';
import { findExecution } from '../../query/executions.js';
import { issueInsights } from '../../query/issue-insights.js';
import {
  type IssueRowStats,
  issueFactors,
  issueStats,
  type OneIssueStats,
  oneIssueStats,
} from '../../query/issues.js';
import {
  activityListAnswer,
  commentAnswer,
  commentListAnswer,
  errorAnswers,
  issueAnswer,
  issueListAnswer,
} from '../../schemas/answers.js';
import { USER_ID_SHAPE } from '../../schemas/control.js';
import { notFound, validationError } from '../../schemas/errors.js';
import {
  commentBodySchema,
  ISSUE_ID_SHAPE,
  type IssueRecord,
  type IssueSort,
  issueIdParamsSchema,
  issueListQuerySchema,
  issuePagedQuerySchema,
  issuePatchSchema,
} from '../../schemas/issues.js';
import type { Mode } from '../../schemas/records.js';
import { DAY_MS } from '../../schemas/time.js';
import { modeOf, type Principal, principalOf } from '../auth.js';
import type { ApiContext } from '../context.js';
import { pageAnswer, resolvePaging } from '../paging.js';

/** Issues (CONTRACT §9): the list, one issue with its evidence, its lifecycle, comments and activity. */

/** The common factors' window: the 7 days before the issue's last occurrence (widened to whole hours by issueFactors). */
const FACTOR_WINDOW_MS = 7 * DAY_MS;
const RECENT_ACTIVITY = 20;

const iso = (ms: number) => new Date(ms).toISOString();
const MODE_ONLY = issuePagedQuerySchema.pick({ mode: true }).strict();
const tags = ['issues'];

type RowStats = IssueRowStats | null | undefined;
/** The first and last occurrence: the record's, or the stored rows' where they know an earlier or later one. */
const firstSeenMs = (r: IssueRecord, s: RowStats) =>
  s ? Math.min(Date.parse(r.firstSeenAt), s.firstSeenMs) : Date.parse(r.firstSeenAt);
const lastSeenMs = (r: IssueRecord, s: RowStats) =>
  s ? Math.max(Date.parse(r.lastSeenAt), s.lastSeenMs) : Date.parse(r.lastSeenAt);

/** A resolved issue whose rows hold an occurrence that started after resolvedAt (CONTRACT §9: it regresses). */
const regressionDue = (r: IssueRecord, s: RowStats): s is IssueRowStats =>
  r.status === 'resolved' && !!s && r.resolvedAt !== null && s.lastSeenMs > Date.parse(r.resolvedAt);

/** The fields every issue answer has (the list's items): the record's, with the figures of its stored rows. */
function issueSummary(r: IssueRecord, s: RowStats) {
  const first = firstSeenMs(r, s);
  const last = lastSeenMs(r, s);
  return {
    id: r.id,
    mode: r.mode,
    title: r.title,
    status: r.status,
    service: r.service,
    environments: r.environments,
    endpoint: r.endpoint,
    method: r.method,
    failureType: r.failureType,
    exceptionType: r.exceptionType,
    fingerprintParts: r.fingerprintParts,
    firstSeenAt: iso(first),
    lastSeenAt: iso(last),
    statusChangedAt: r.statusChangedAt,
    resolvedAt: r.resolvedAt,
    regressedAt: r.regressedAt,
    occurrences: { total: s?.total ?? 0, last24h: s?.last24h ?? 0, last7d: s?.last7d ?? 0 },
    assignee: r.assignee,
  };
}
/** Each sort's key (descending): computed for every issue, while only a page's issues are made answers. */
const SORTS: Record<IssueSort, (r: IssueRecord, s: RowStats) => number> = {
  '-lastSeenAt': lastSeenMs,
  '-firstSeenAt': firstSeenMs,
  '-occurrences': (_r, s) => s?.total ?? 0,
};

export const issueRoutes =
  (ctx: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    const { config, control, engine } = ctx;

    /** A path id of the wrong shape is NOT_FOUND (CONTRACT §3), as is an issue of another workspace or mode. */
    const issueId = (id: string): string => {
      if (!ISSUE_ID_SHAPE.test(id)) throw notFound(`no issue ${id.slice(0, 64)} in this workspace and mode`);
      return id;
    };
    const load = async (p: Principal, mode: Mode, id: string): Promise<IssueRecord> => {
      const r = await control.issues.get(p.workspaceId, mode, id);
      if (!r) throw notFound(`no issue ${id} in this workspace and mode`);
      return r;
    };
    /** The caller and the mode of a route on one issue. */
    const scoped = (req: FastifyRequest) => ({ p: principalOf(req), mode: modeOf(req) });
    /** A page of one issue's comments or activity: `list` makes the whole list, oldest or newest first. */
    const issuePage = async <T>(
      req: FastifyRequest,
      q: { page: number; pageSize?: number | undefined },
      id: string,
      list: (r: IssueRecord) => Promise<T[]>,
    ) => {
      const { p, mode } = scoped(req);
      const { page, pageSize } = resolvePaging(q, config);
      const all = await list(await load(p, mode, issueId(id)));
      const start = (page - 1) * pageSize;
      return pageAnswer({ data: all.slice(start, start + pageSize), total: all.length }, page, pageSize);
    };

    /**
     * A resolved issue whose rows hold an occurrence that started after resolvedAt is regressed (CONTRACT §9). The
     * write path does this as it stores the occurrence; this catches the one it stored before the resolve reached
     * it (a client clock ahead of the service's).
     */
    const regressIfDue = async (r: IssueRecord, s: RowStats) => {
      if (!regressionDue(r, s)) return r;
      return (
        (await control.issues.regressIfLater(r.workspaceId, r.mode, r.id, s.lastSeenMs, s.lastExecutionId)) ??
        r
      );
    };

    /** The whole issue: the list's fields plus the evidence, the representative execution and recent activity. */
    const detail = async (record: IssueRecord) => {
      const scope = { workspaceId: record.workspaceId, mode: record.mode };
      const now = Date.now();
      const stats: OneIssueStats | null = await oneIssueStats(engine, config.dataDir, scope, record.id, now);
      const r = await regressIfDue(record, stats);
      const summary = issueSummary(r, stats);
      const lastSeen = Date.parse(summary.lastSeenAt);
      const [evidence, representative, comments] = await Promise.all([
        issueFactors(engine, config.dataDir, scope, {
          issueId: r.id,
          services: stats?.services ?? [],
          endpoints: stats?.endpoints ?? [],
          from: lastSeen - FACTOR_WINDOW_MS,
          to: lastSeen + 1,
          indexedKeys: control.settingsOf(r.workspaceId).indexedContextKeys,
        }),
        stats ? findExecution(engine, config.dataDir, scope, stats.lastExecutionId) : null,
        control.issues.comments(r.workspaceId, r.mode, r.id),
      ]);
      const { hypothesis, suggestedFix } = issueInsights({
        issueId: r.id,
        failureType: r.failureType,
        exceptionType: r.exceptionType,
        fingerprintParts: r.fingerprintParts,
        method: r.method,
        endpoint: r.endpoint,
        status: r.status,
        resolvedAt: r.resolvedAt,
        regressedAt: r.regressedAt,
        total: summary.occurrences.total,
        last24h: summary.occurrences.last24h,
        firstSeenMs: Date.parse(summary.firstSeenAt),
        evidence,
        now,
      });
      return {
        ...summary,
        hypothesis,
        suggestedFix,
        commonFactors: evidence.factors,
        representativeExecution: representative,
        recentActivity: activityOf(r, comments).slice(0, RECENT_ACTIVITY),
      };
    };

    app.get(
      '/api/issues',
      {
        config: { need: 'read' },
        schema: {
          summary: 'List issues',
          tags,
          querystring: issueListQuerySchema,
          response: { 200: issueListAnswer, ...errorAnswers },
        },
      },
      async (req, _reply) => {
        const { p, mode } = scoped(req);
        const q = req.query;
        const { page, pageSize } = resolvePaging(q, config);
        if (q.from !== undefined && q.to !== undefined && q.from >= q.to) {
          throw validationError('from must be before to', [{ path: 'from', message: 'must be before to' }]);
        }
        const statuses = q.status ? new Set(q.status) : null;
        const assignee = q.assignee === 'none' ? null : q.assignee;
        const records = control.issues
          .list(p.workspaceId, mode)
          .filter(
            (r) =>
              (q.serviceName === undefined || r.service === q.serviceName) &&
              (assignee === undefined || r.assignee === assignee),
          );
        const stats =
          records.length > 0
            ? await issueStats(engine, config.dataDir, { workspaceId: p.workspaceId, mode }, Date.now())
            : new Map<string, IssueRowStats>();
        const key = SORTS[q.sort];
        const listed: { r: IssueRecord; s: RowStats; key: number }[] = [];
        for (let r of records) {
          const s = stats.get(r.id);
          if (regressionDue(r, s)) r = await regressIfDue(r, s);
          if (statuses !== null && !statuses.has(r.status)) continue;
          const last = lastSeenMs(r, s);
          if ((q.from !== undefined && last < q.from) || (q.to !== undefined && last >= q.to)) continue;
          listed.push({ r, s, key: key(r, s) });
        }
        listed.sort((a, b) => b.key - a.key || (a.r.id < b.r.id ? -1 : 1));
        const start = (page - 1) * pageSize;
        const data = listed.slice(start, start + pageSize).map((x) => issueSummary(x.r, x.s));
        return pageAnswer({ data, total: listed.length }, page, pageSize);
      },
    );

    app.get(
      '/api/issues/:id',
      {
        config: { need: 'read' },
        schema: {
          summary: 'One issue, with its evidence, representative execution and recent activity',
          tags,
          params: issueIdParamsSchema,
          querystring: MODE_ONLY,
          response: { 200: issueAnswer, ...errorAnswers },
        },
      },
      async (req, _reply) => {
        const { p, mode } = scoped(req);
        return detail(await load(p, mode, issueId(req.params.id)));
      },
    );

    app.patch(
      '/api/issues/:id',
      {
        config: { need: 'actor' },
        schema: {
          summary: 'Change the status or the assignee (a session: its user is the actor); answers the issue',
          tags,
          params: issueIdParamsSchema,
          querystring: MODE_ONLY,
          body: issuePatchSchema,
          response: { 200: issueAnswer, ...errorAnswers },
        },
      },
      async (req, _reply) => {
        const { p, mode } = scoped(req);
        if (p.kind !== 'session') throw new Error('unreachable: the actor need admits sessions only');
        const patch = req.body;
        if (typeof patch.assignee === 'string') {
          const member =
            USER_ID_SHAPE.test(patch.assignee) && (await control.isMember(p.workspaceId, patch.assignee));
          if (!member) {
            throw validationError('assignee: not a member of this workspace', [
              { path: 'assignee', message: 'not a member of this workspace' },
            ]);
          }
        }
        const id = issueId(req.params.id);
        return detail(await control.issues.patch(p.workspaceId, mode, id, patch, p.userId));
      },
    );

    app.get(
      '/api/issues/:id/comments',
      {
        config: { need: 'read' },
        schema: {
          summary: "An issue's comments, oldest first",
          tags,
          params: issueIdParamsSchema,
          querystring: issuePagedQuerySchema,
          response: { 200: commentListAnswer, ...errorAnswers },
        },
      },
      (req) =>
        issuePage(req, req.query, req.params.id, (r) => control.issues.comments(r.workspaceId, r.mode, r.id)),
    );

    app.post(
      '/api/issues/:id/comments',
      {
        config: { need: 'actor' },
        schema: {
          summary: 'Comment on an issue (a session: its user is the author)',
          tags,
          params: issueIdParamsSchema,
          querystring: MODE_ONLY,
          body: commentBodySchema,
          response: { 201: commentAnswer, ...errorAnswers },
        },
      },
      async (req, reply) => {
        const { p, mode } = scoped(req);
        if (p.kind !== 'session') throw new Error('unreachable: the actor need admits sessions only');
        const { body } = req.body;
        const id = issueId(req.params.id);
        const comment = await control.issues.addComment(p.workspaceId, mode, id, body, {
          id: p.userId,
          email: p.email,
        });
        reply.code(201);
        return comment;
      },
    );

    app.get(
      '/api/issues/:id/activity',
      {
        config: { need: 'read' },
        schema: {
          summary: "An issue's activity, newest first",
          tags,
          params: issueIdParamsSchema,
          querystring: issuePagedQuerySchema,
          response: { 200: activityListAnswer, ...errorAnswers },
        },
      },
      (req) =>
        issuePage(req, req.query, req.params.id, async (r) =>
          activityOf(r, await control.issues.comments(r.workspaceId, r.mode, r.id)),
        ),
    );
  };
