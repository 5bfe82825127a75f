import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { findExecution } from '../../query/executions.js';
import { listExecutionLogPage, listLogs } from '../../query/logs.js';
import { errorAnswers, logListAnswer } from '../../schemas/answers.js';
import { executionIdParamsSchema } from '../../schemas/api.js';
import { executionLogsQuerySchema, logListQuerySchema } from '../../schemas/api-logs.js';
import { notFound } from '../../schemas/errors.js';
import { modeOf, principalOf } from '../auth.js';
import type { ApiContext } from '../context.js';
import { pageAnswer, resolvePaging } from '../paging.js';
import { timeWindow } from '../time-window.js';

/** `GET /api/logs` (CONTRACT §7) and `GET /api/executions/{executionId}/logs` (§6.4). */
export const logRoutes =
  (deps: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    const { config } = deps;

    app.get(
      '/api/logs',
      {
        config: { need: 'read' },
        schema: {
          summary: 'Search log records',
          tags: ['logs'],
          querystring: logListQuerySchema,
          response: { 200: logListAnswer, ...errorAnswers },
        },
      },
      async (req, _reply) => {
        const principal = principalOf(req);
        const q = req.query;
        const { page, pageSize } = resolvePaging(q, config);
        const window = timeWindow(q.from, q.to, 7);
        const result = await listLogs(
          deps.engine,
          config.dataDir,
          {
            workspaceId: principal.workspaceId,
            mode: modeOf(req),
            ...window,
            serviceName: q.serviceName,
            environment: q.environment,
            level: q.level,
            executionId: q.executionId,
            traceId: q.traceId,
            search: q.search,
          },
          { page, pageSize, sort: q.sort },
        );
        return pageAnswer(result, page, pageSize);
      },
    );

    app.get(
      '/api/executions/:executionId/logs',
      {
        config: { need: 'read' },
        schema: {
          summary: "An execution's log records, in time order",
          tags: ['executions', 'logs'],
          params: executionIdParamsSchema,
          querystring: executionLogsQuerySchema,
          response: { 200: logListAnswer, ...errorAnswers },
        },
      },
      async (req, _reply) => {
        const principal = principalOf(req);
        const { executionId } = req.params;
        const { page, pageSize } = resolvePaging(req.query, config);
        const scope = { workspaceId: principal.workspaceId, mode: modeOf(req) };
        // The same lookup as GET /api/executions/{id} defines "exists", and gives the time window.
        const execution = await findExecution(deps.engine, config.dataDir, scope, executionId);
        if (!execution) throw notFound(`no execution ${executionId} in this workspace and mode`);
        const result = await listExecutionLogPage(
          deps.engine,
          config.dataDir,
          scope,
          { executionId, startedAt: Date.parse(execution.startedAt), durationMs: execution.durationMs },
          { page, pageSize },
        );
        return pageAnswer(result, page, pageSize);
      },
    );
  };
