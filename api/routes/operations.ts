import crypto from 'node:crypto';
import type { FastifyPluginAsync } from 'fastify';
import { unauthorized } from '../../schemas/errors.js';
import { principalOf } from '../auth.js';
import type { ApiContext } from '../context.js';

/** GET /api/limits (CONTRACT §4) and GET /metrics (CONTRACT §11). */
export const operationsRoutes =
  (ctx: ApiContext): FastifyPluginAsync =>
  async (app) => {
    const c = ctx.config;

    app.get('/api/limits', { config: { need: 'any' } }, async (req, _reply) => {
      const p = principalOf(req);
      return {
        ingest: { requestsPerSecond: c.INGEST_RATE_PER_SEC, burst: c.INGEST_BURST },
        read: { requestsPerSecond: c.READ_RATE_PER_SEC, burst: c.READ_BURST },
        body: { maxBytes: c.BODY_MAX_BYTES, maxDecodedBytes: c.BODY_MAX_DECODED_BYTES },
        items: {
          executions: c.MAX_EXECUTIONS_PER_REQUEST,
          logs: c.MAX_LOGS_PER_REQUEST,
          metrics: c.MAX_METRICS_PER_REQUEST,
        },
        pageSize: { default: c.PAGE_SIZE_DEFAULT, max: c.PAGE_SIZE_MAX },
        maxResultWindow: c.MAX_RESULT_WINDOW,
        context: {
          maxIndexedKeys: c.CONTEXT_MAX_INDEXED_KEYS,
          maxKeysPerSearch: c.CONTEXT_MAX_KEYS_PER_SEARCH,
          maxValuesPerKey: c.CONTEXT_MAX_VALUES_PER_KEY,
          windowWithoutServiceHours: c.CONTEXT_WINDOW_WITHOUT_SERVICE_HOURS,
          windowWithServiceDays: c.CONTEXT_WINDOW_WITH_SERVICE_DAYS,
        },
        metrics: { maxPoints: c.METRICS_MAX_POINTS },
        retentionDays: ctx.control.settingsOf(p.workspaceId).retentionDays,
      };
    });

    app.get('/metrics', async (req, reply) => {
      if (c.METRICS_TOKEN) {
        const sent = Buffer.from(String(req.headers.authorization ?? ''));
        const want = Buffer.from(`Bearer ${c.METRICS_TOKEN}`);
        if (sent.length !== want.length || !crypto.timingSafeEqual(sent, want))
          throw unauthorized('a metrics token is required');
      }
      await ctx.metrics.refreshLag();
      reply.header('content-type', ctx.metrics.registry.contentType);
      return ctx.metrics.registry.metrics();
    });
  };
