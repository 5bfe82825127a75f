import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { publishIngest, requestMessageId } from '../../broker/ingest-publisher.js';
import { errorAnswers, ingestAnswer } from '../../schemas/answers.js';
import { validationError } from '../../schemas/errors.js';
import { ingestEnvelopeSchema } from '../../schemas/ingest-items.js';
import { principalOf } from '../auth.js';
import { rawBodyOf } from '../body-parser.js';
import type { ApiContext } from '../context.js';
import { checkBody } from '../ingest-envelope.js';
import { documentedOnly } from '../validate.js';

const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,128}$/;

/** The body and the headers as documented; the route checks both itself (the body as bytes, in one scan). */
const ingestBody = documentedOnly(ingestEnvelopeSchema);
const ingestHeaders = documentedOnly(
  z.object({
    'idempotency-key': z
      .string()
      .regex(IDEMPOTENCY_KEY)
      .optional()
      .describe('A resend with the same key within 10 minutes is stored once (answered duplicate: true)'),
    'content-encoding': z.enum(['gzip', 'identity']).optional(),
  }),
);

/** POST /api/ingest (CONTRACT §5): checked at once, stored durably by the broker, then 202. */
export const ingestRoutes =
  (deps: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    const { config } = deps;
    app.post(
      '/api/ingest',
      {
        config: { rawJsonBody: true, need: 'ingest' },
        schema: {
          summary: 'Send executions, logs and metric points: 202 once the broker has stored them durably',
          description:
            'The envelope is checked at once; each item is validated by the pipeline after the answer, and the ' +
            'items it refuses are listed by GET /api/ingest/rejections.',
          tags: ['ingest'],
          headers: ingestHeaders,
          body: ingestBody,
          response: { 202: ingestAnswer, ...errorAnswers },
        },
      },
      async (req, reply) => {
        const principal = principalOf(req);
        if (principal.kind !== 'key') throw new Error('unreachable: ingest is for keys');
        const body = rawBodyOf(req);
        // A one-pass scan of the bytes (about 3× JSON.parse, and no objects for the GC): the body is parsed for
        // real by a pipeline worker, after the 202.
        const { counts, cuts } = checkBody(body.decoded, principal.mode, {
          executions: config.MAX_EXECUTIONS_PER_REQUEST,
          logs: config.MAX_LOGS_PER_REQUEST,
          metrics: config.MAX_METRICS_PER_REQUEST,
        });
        const idem = req.headers['idempotency-key'];
        if (idem !== undefined && (typeof idem !== 'string' || !IDEMPOTENCY_KEY.test(idem))) {
          throw validationError('idempotency-key must be 1–128 visible ASCII characters', [
            { path: 'idempotency-key', message: 'expected 1–128 visible ASCII characters' },
          ]);
        }
        const msgId = requestMessageId(
          principal,
          typeof idem === 'string' ? { idempotencyKey: idem } : { body: body.raw },
        );
        const requestId = String(req.id);
        const started = performance.now();
        const result = await publishIngest(
          deps.broker,
          {
            workspaceId: principal.workspaceId,
            mode: principal.mode,
            keyId: principal.id,
            requestId,
            receivedAt: Date.now(),
            encoding: body.encoding,
            jsonCuts: cuts,
          },
          msgId,
          body.raw,
          config.PUBLISH_TIMEOUT_MS,
          config.STREAM_COMPRESSION,
        );
        deps.metrics.publishSeconds.observe((performance.now() - started) / 1000);
        for (const kind of ['executions', 'logs', 'metrics'] as const) {
          if (counts[kind] > 0) deps.metrics.ingestItems.inc({ kind }, counts[kind]);
        }
        // The broker forgets the ids of messages already acked when it restarts: this process's pipeline remembers.
        const duplicate = result.duplicate || deps.pipeline?.committedRequest(msgId) === true;
        reply.code(202);
        return { accepted: counts, duplicate, requestId };
      },
    );
  };
