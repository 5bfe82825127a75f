import crypto from 'node:crypto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import { errorAnswers, limitsAnswer, openApiAnswer, prometheusAnswer } from '../../schemas/answers.js';
import { unauthorized } from '../../schemas/errors.js';
import { principalOf } from '../auth.js';
import type { ApiContext } from '../context.js';

/** GET /api/limits (CONTRACT §4), GET /metrics and GET /api/openapi.json (CONTRACT §11). */
export const operationsRoutes =
  (ctx: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    const c = ctx.config;

    app.get(
      '/api/limits',
      {
        config: { need: 'any' },
        schema: {
          summary: 'The effective limits',
          tags: ['operations'],
          response: { 200: limitsAnswer, ...errorAnswers },
        },
      },
      async (req, _reply) => {
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
      },
    );

    app.get(
      '/metrics',
      {
        schema: {
          summary:
            "The service's own figures (Prometheus text format); a Bearer token when METRICS_TOKEN is set",
          tags: ['operations'],
          response: { 200: prometheusAnswer, ...errorAnswers },
        },
      },
      async (req, reply) => {
        if (c.METRICS_TOKEN) {
          const sent = Buffer.from(String(req.headers.authorization ?? ''));
          const want = Buffer.from(`Bearer ${c.METRICS_TOKEN}`);
          if (sent.length !== want.length || !crypto.timingSafeEqual(sent, want))
            throw unauthorized('a metrics token is required');
        }
        await ctx.metrics.refreshLag();
        reply.header('content-type', ctx.metrics.registry.contentType);
        return ctx.metrics.registry.metrics();
      },
    );

    app.get(
      '/api/openapi.json',
      {
        schema: {
          summary: 'This document: the OpenAPI 3.1 description of every route',
          tags: ['operations'],
          response: { 200: openApiAnswer },
        },
      },
      // Made once, from the routes as registered (the app is ready by the time a request comes).
      async () => app.swagger() as z.input<typeof openApiAnswer>,
    );
  };
