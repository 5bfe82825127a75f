import type { FastifyPluginAsync } from 'fastify';
import { findExecution } from '../../query/executions.js';
import { listExecutionLogPage, listLogs } from '../../query/logs.js';
import { executionIdParamsSchema } from '../../schemas/api.js';
import { executionLogsQuerySchema, logListQuerySchema } from '../../schemas/api-logs.js';
import { notFound } from '../../schemas/errors.js';
import { principalOf, resolveMode } from '../auth.js';
import type { ApiContext } from '../context.js';
import { pageAnswer, resolvePaging } from '../paging.js';
import { timeWindow } from '../time-window.js';
import { parseInput } from '../validate.js';

/** `GET /api/logs` (CONTRACT §7) and `GET /api/executions/{executionId}/logs` (§6.4). */
export const logRoutes =
  (deps: ApiContext): FastifyPluginAsync =>
  async (app) => {
    const { config } = deps;

    app.get('/api/logs', { config: { need: 'read' } }, async (req, _reply) => {
      const principal = principalOf(req);
      const raw = req.query as Record<string, unknown>;
      const mode = resolveMode(principal, raw.mode);
      const q = parseInput(logListQuerySchema, raw, 'query');
      const { page, pageSize } = resolvePaging(q, config);
      const window = timeWindow(q.from, q.to, 7);
      const result = await listLogs(
        deps.engine,
        config.dataDir,
        {
          workspaceId: principal.workspaceId,
          mode,
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
    });

    app.get('/api/executions/:executionId/logs', { config: { need: 'read' } }, async (req, _reply) => {
      const principal = principalOf(req);
      const raw = req.query as Record<string, unknown>;
      const mode = resolveMode(principal, raw.mode);
      const q = parseInput(executionLogsQuerySchema, raw, 'query');
      const { executionId } = parseInput(executionIdParamsSchema, req.params, 'path');
      const { page, pageSize } = resolvePaging(q, config);
      const scope = { workspaceId: principal.workspaceId, mode };
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
    });
  };
