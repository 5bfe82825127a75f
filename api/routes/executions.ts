import type { FastifyPluginAsync } from 'fastify';
import { getExecution, listExecutions } from '../../query/executions.js';
import { executionIdParamsSchema, executionListQuerySchema, modeOnlyQuerySchema } from '../../schemas/api.js';
import { notFound, ServiceError, validationError } from '../../schemas/errors.js';
import { principalOf, resolveMode } from '../auth.js';
import type { ApiContext } from '../context.js';
import { parseInput } from '../validate.js';

const DAY_MS = 86_400_000;

/** Resolves `from`/`to` (CONTRACT §1: from inclusive, to exclusive, default the last `defaultDays`). */
export function timeWindow(
  from: number | undefined,
  to: number | undefined,
  defaultDays: number,
  now = Date.now(),
) {
  const end = to ?? (from !== undefined ? Math.max(now, from + 1) : now);
  const start = from ?? end - defaultDays * DAY_MS;
  if (start >= end) {
    throw validationError('from must be before to', [{ path: 'from', message: 'must be before to' }]);
  }
  return { from: start, to: end };
}

export const executionRoutes =
  (deps: ApiContext): FastifyPluginAsync =>
  async (app) => {
    const { config } = deps;

    app.get('/api/executions', { config: { need: 'read' } }, async (req, _reply) => {
      const principal = principalOf(req);
      const raw = req.query as Record<string, unknown>;
      const mode = resolveMode(principal, raw.mode);
      const contextKeys = Object.keys(raw).filter((k) => k.startsWith('context.'));
      const rest = Object.fromEntries(Object.entries(raw).filter(([k]) => !k.startsWith('context.')));
      const q = parseInput(executionListQuerySchema, rest, 'query');
      const pageSize = q.pageSize ?? config.PAGE_SIZE_DEFAULT;
      const details = [];
      if (pageSize > config.PAGE_SIZE_MAX)
        details.push({ path: 'pageSize', message: `must be at most ${config.PAGE_SIZE_MAX}` });
      if (q.page * pageSize > config.MAX_RESULT_WINDOW) {
        details.push({
          path: 'page',
          message: `page × pageSize must not exceed ${config.MAX_RESULT_WINDOW}; narrow the time range`,
        });
      }
      if (
        q.minDurationMs !== undefined &&
        q.maxDurationMs !== undefined &&
        q.minDurationMs > q.maxDurationMs
      ) {
        details.push({ path: 'minDurationMs', message: 'must not exceed maxDurationMs' });
      }
      if (details.length > 0) throw validationError(`${details[0]!.path} ${details[0]!.message}`, details);
      if (q.q !== undefined) {
        throw validationError('the query language is not available yet', [
          { path: 'q', message: 'not supported yet' },
        ]);
      }
      if (contextKeys.length > 0) {
        // No workspace has indexed context keys yet, so every context key is outside the allowed set.
        throw new ServiceError(
          'CONTEXT_KEY_NOT_ALLOWED',
          `${contextKeys[0]} is not an indexed context key`,
          contextKeys.map((k) => ({ path: k, message: 'not in the workspace indexedContextKeys' })),
        );
      }
      const window = timeWindow(q.from, q.to, 7);
      const result = await listExecutions(
        deps.engine,
        config.dataDir,
        {
          workspaceId: principal.workspaceId,
          mode,
          ...window,
          serviceName: q.serviceName,
          environment: q.environment,
          status: q.status,
          method: q.method,
          endpoint: q.endpoint,
          executionId: q.executionId,
          traceId: q.traceId,
          issueId: q.issueId,
          minDurationMs: q.minDurationMs,
          maxDurationMs: q.maxDurationMs,
        },
        { page: q.page, pageSize, sort: q.sort },
      );
      return {
        data: result.data,
        page: q.page,
        pageSize,
        hasMore: q.page * pageSize < result.total,
        total: result.total,
      };
    });

    app.get('/api/executions/:executionId', { config: { need: 'read' } }, async (req, _reply) => {
      const principal = principalOf(req);
      const raw = req.query as Record<string, unknown>;
      const mode = resolveMode(principal, raw.mode);
      parseInput(modeOnlyQuerySchema, raw, 'query');
      const { executionId } = parseInput(executionIdParamsSchema, req.params, 'path');
      const detail = await getExecution(
        deps.engine,
        config.dataDir,
        { workspaceId: principal.workspaceId, mode },
        executionId,
      );
      if (!detail) throw notFound(`no execution ${executionId} in this workspace and mode`);
      return detail;
    });
  };
