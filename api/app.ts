import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { ulid } from 'ulid';
import { installBodyParser } from './body-parser.js';
import type { AppDeps } from './deps.js';
import { installErrorHandler } from './error-handler.js';
import { executionRoutes } from './routes/executions.js';
import { healthRoutes } from './routes/health.js';
import { ingestRoutes } from './routes/ingest.js';

export const API_VERSION = '2026-11-beta';
const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Builds the HTTP app; only the process entry listens. */
export async function buildApp(deps: AppDeps, logger: FastifyBaseLogger): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: logger,
    bodyLimit: deps.config.BODY_MAX_BYTES,
    // A client's x-request-id is echoed when it is a sane token; otherwise one is made.
    genReqId: (req) => {
      const sent = req.headers['x-request-id'];
      return typeof sent === 'string' && CLIENT_REQUEST_ID.test(sent) ? sent : `req_${ulid()}`;
    },
    return503OnClosing: true,
  });
  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
    reply.header('api-version', API_VERSION);
  });
  installErrorHandler(app);
  installBodyParser(app, {
    maxBytes: deps.config.BODY_MAX_BYTES,
    maxDecodedBytes: deps.config.BODY_MAX_DECODED_BYTES,
  });
  await app.register(healthRoutes(deps));
  await app.register(ingestRoutes(deps));
  await app.register(executionRoutes(deps));
  return app;
}
