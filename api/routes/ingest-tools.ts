import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { processPayload } from '../../pipeline/process-payload.js';
import { listRejections } from '../../query/rejections.js';
import { errorAnswers, ingestValidateAnswer, rejectionListAnswer } from '../../schemas/answers.js';
import { rejectionListQuerySchema } from '../../schemas/api-logs.js';
import { ingestEnvelopeSchema } from '../../schemas/ingest-items.js';
import { modeOf, principalOf } from '../auth.js';
import { parseJson, rawBodyOf } from '../body-parser.js';
import type { ApiContext } from '../context.js';
import { checkEnvelope } from '../ingest-envelope.js';
import { pageAnswer, resolvePaging } from '../paging.js';
import { timeWindow } from '../time-window.js';
import { documentedOnly } from '../validate.js';

const tags = ['ingest'];

/** The tools around ingestion (CONTRACT §5): what the pipeline refused, and a dry run of its validation. */
export const ingestToolRoutes =
  (deps: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    const { config } = deps;

    app.get(
      '/api/ingest/rejections',
      {
        config: { need: 'read' },
        schema: {
          summary: 'The items the pipeline refused (kept 7 days), newest request first',
          tags,
          querystring: rejectionListQuerySchema,
          response: { 200: rejectionListAnswer, ...errorAnswers },
        },
      },
      async (req, _reply) => {
        const principal = principalOf(req);
        const q = req.query;
        const { page, pageSize } = resolvePaging(q, config);
        // Rejections are kept 7 days, so the default window covers all of them.
        const window = timeWindow(q.from, q.to, 7);
        const result = await listRejections(
          deps.engine,
          config.dataDir,
          { workspaceId: principal.workspaceId, mode: modeOf(req), ...window },
          { page, pageSize },
        );
        return pageAnswer(result, page, pageSize);
      },
    );

    // Same checks as POST /api/ingest, then the pipeline's own validation right here: nothing is published,
    // stored or counted as ingested.
    app.post(
      '/api/ingest/validate',
      {
        config: { rawJsonBody: true, need: 'ingest' },
        schema: {
          summary: "A dry run of ingest: the pipeline's validation of each item, nothing stored",
          tags,
          body: documentedOnly(ingestEnvelopeSchema),
          response: { 200: ingestValidateAnswer, ...errorAnswers },
        },
      },
      async (req, _reply) => {
        const principal = principalOf(req);
        if (principal.kind !== 'key') throw new Error('unreachable: ingest is for keys');
        const body = rawBodyOf(req);
        const payload = parseJson(body.decoded);
        checkEnvelope(payload, principal.mode, {
          executions: config.MAX_EXECUTIONS_PER_REQUEST,
          logs: config.MAX_LOGS_PER_REQUEST,
          metrics: config.MAX_METRICS_PER_REQUEST,
        });
        // Outcome rules only classify, they never refuse an item, so the dry run leaves them out.
        const out = processPayload(payload, {
          mode: principal.mode,
          requestId: String(req.id),
          receivedAt: Date.now(),
        });
        return {
          valid: { executions: out.executions.length, logs: out.logs.length, metrics: out.metrics.length },
          rejected: out.rejections.map((r) => ({
            kind: r.kind,
            index: r.index,
            code: r.code,
            details: r.details,
          })),
        };
      },
    );
  };
