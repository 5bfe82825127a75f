import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { constraintsFromParams, constraintsFromQuery } from '../../query/constraints.js';
import { contextFiltersFromQuery } from '../../query/context-filter.js';
import { getExecution, listExecutions } from '../../query/executions.js';
import { type ParsedQuery, parseQuery, QueryLanguageError } from '../../query/query-language.js';
import { errorAnswers, executionAnswer, executionListAnswer } from '../../schemas/answers.js';
import { executionIdParamsSchema, executionListQuerySchema, modeOnlyQuerySchema } from '../../schemas/api.js';
import { notFound, ServiceError, validationError } from '../../schemas/errors.js';
import { DAY_MS, HOUR_MS } from '../../schemas/time.js';
import { modeOf, principalOf } from '../auth.js';
import type { ApiContext } from '../context.js';
import { checkPaging, pageAnswer } from '../paging.js';
import { timeWindow } from '../time-window.js';

export const executionRoutes =
  (deps: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    const { config } = deps;
    const MAX_CONTEXT_KEYS = config.CONTEXT_MAX_KEYS_PER_SEARCH;
    const MAX_CONTEXT_VALUES = config.CONTEXT_MAX_VALUES_PER_KEY;
    const CONTEXT_WINDOW_WITHOUT_SERVICE_MS = config.CONTEXT_WINDOW_WITHOUT_SERVICE_HOURS * HOUR_MS;
    const CONTEXT_WINDOW_WITH_SERVICE_MS = config.CONTEXT_WINDOW_WITH_SERVICE_DAYS * DAY_MS;

    app.get(
      '/api/executions',
      {
        config: { need: 'read' },
        schema: {
          summary: 'Search executions',
          description:
            'Filters are ANDed; `context.<dotted.path>=<value>` parameters (repeated: OR) search indexed ' +
            'context keys, and `q` takes the query language (CONTRACT §6).',
          tags: ['executions'],
          querystring: executionListQuerySchema,
          response: { 200: executionListAnswer, ...errorAnswers },
        },
      },
      async (req, _reply) => {
        const principal = principalOf(req);
        const mode = modeOf(req);
        const q = req.query;
        const { pageSize, problems } = checkPaging(q, config);
        const { filters: paramContext, errors: details } = contextFiltersFromQuery(q);
        details.push(...problems);
        let parsed: ParsedQuery = { duration: [], context: [] };
        if (q.q !== undefined) {
          try {
            parsed = parseQuery(q.q);
          } catch (err) {
            if (!(err instanceof QueryLanguageError)) throw err;
            details.push(err.detail);
          }
        }
        // Parameters and q are ANDed: a key in both is two filters, each ORing its own values.
        const context = [...paramContext, ...parsed.context];
        const contextKeys = new Set(context.map((c) => c.path));
        const serviceName = q.serviceName ?? parsed.service;
        if (contextKeys.size > MAX_CONTEXT_KEYS) {
          details.push({ path: 'context', message: `at most ${MAX_CONTEXT_KEYS} context keys per search` });
        }
        for (const c of context) {
          if (c.values.length > MAX_CONTEXT_VALUES) {
            details.push({
              path: `context.${c.path}`,
              message: `at most ${MAX_CONTEXT_VALUES} values per key`,
            });
          }
        }
        // A context search defaults to the last 24 hours; anything else to the last 7 days.
        const window = timeWindow(q.from, q.to, context.length > 0 ? 1 : 7);
        if (details.length > 0) throw validationError(`${details[0]!.path}: ${details[0]!.message}`, details);
        if (context.length > 0) {
          const indexed = new Set(deps.control.settingsOf(principal.workspaceId).indexedContextKeys);
          const notAllowed = context.filter((c) => !indexed.has(c.path));
          if (notAllowed.length > 0) {
            throw new ServiceError(
              'CONTEXT_KEY_NOT_ALLOWED',
              `context.${notAllowed[0]!.path} is not an indexed context key of this workspace`,
              notAllowed.map((c) => ({
                path: `context.${c.path}`,
                message: 'not in the workspace settings indexedContextKeys',
              })),
            );
          }
          const span = window.to - window.from;
          const limitMs = serviceName ? CONTEXT_WINDOW_WITH_SERVICE_MS : CONTEXT_WINDOW_WITHOUT_SERVICE_MS;
          if (span > limitMs) {
            throw new ServiceError(
              'CONTEXT_QUERY_TOO_BROAD',
              serviceName
                ? `a context search may span at most ${config.CONTEXT_WINDOW_WITH_SERVICE_DAYS} days; narrow from/to`
                : `a context search without serviceName may span at most ${config.CONTEXT_WINDOW_WITHOUT_SERVICE_HOURS} hours; add serviceName or narrow from/to`,
              [{ path: 'from', message: `the window spans ${Math.round(span / HOUR_MS)} h` }],
            );
          }
        }
        const result = await listExecutions(
          deps.engine,
          config.dataDir,
          {
            workspaceId: principal.workspaceId,
            mode,
            ...window,
            constraints: [...constraintsFromParams(q), ...constraintsFromQuery(parsed)],
            context,
          },
          { page: q.page, pageSize, sort: q.sort, includeMatchedContext: q.includeMatchedContext === 'true' },
        );
        return pageAnswer(result, q.page, pageSize);
      },
    );

    app.get(
      '/api/executions/:executionId',
      {
        config: { need: 'read' },
        schema: {
          summary: 'One execution, whole, with its first 1,000 logs and its issue',
          tags: ['executions'],
          params: executionIdParamsSchema,
          querystring: modeOnlyQuerySchema,
          response: { 200: executionAnswer, ...errorAnswers },
        },
      },
      async (req, _reply) => {
        const principal = principalOf(req);
        const mode = modeOf(req);
        const { executionId } = req.params;
        const detail = await getExecution(
          deps.engine,
          config.dataDir,
          { workspaceId: principal.workspaceId, mode },
          executionId,
        );
        if (!detail) throw notFound(`no execution ${executionId} in this workspace and mode`);
        const issue = detail.issueId
          ? await deps.control.issues.get(principal.workspaceId, mode, detail.issueId)
          : null;
        return {
          ...detail,
          issue: issue ? { id: issue.id, title: issue.title, status: issue.status } : null,
        };
      },
    );
  };
