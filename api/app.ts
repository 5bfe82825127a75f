import fastifyCookie from '@fastify/cookie';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifySchema } from 'fastify';
import { newUlid } from '../schemas/ulid.js';
import { installAnswerCheck } from './answer-check.js';
import type { Need } from './auth.js';
import { installBodyParser } from './body-parser.js';
import { createContext } from './context.js';
import type { AppDeps } from './deps.js';
import { installErrorHandler } from './error-handler.js';
import { registerOpenApi } from './openapi.js';
import { authRoutes } from './routes/auth.js';
import { dashboardRoutes } from './routes/dashboard.js';
import { executionRoutes } from './routes/executions.js';
import { healthRoutes } from './routes/health.js';
import { ingestRoutes } from './routes/ingest.js';
import { ingestToolRoutes } from './routes/ingest-tools.js';
import { issueRoutes } from './routes/issues.js';
import { keyRoutes } from './routes/keys.js';
import { logRoutes } from './routes/logs.js';
import { metricRoutes } from './routes/metrics.js';
import { operationsRoutes } from './routes/operations.js';
import { otlpRoutes } from './routes/otlp.js';
import { workspaceRoutes } from './routes/workspace.js';
import { requestValidator } from './validate.js';

export const API_VERSION = '2026-11-beta';

/** A route as registered, what its caller needs (null: nothing, it is public), and the schemas it declares. */
export interface RegisteredRoute {
  method: string;
  url: string;
  need: Need | null;
  schema: FastifySchema | null;
  /** The dashboard's page and assets: not part of the API (left out of its document). */
  page: boolean;
}

declare module 'fastify' {
  interface FastifyInstance {
    routeTable: RegisteredRoute[];
  }
}
const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Builds the HTTP app; only the process entry listens. */
export async function buildApp(deps: AppDeps, logger: FastifyBaseLogger): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: logger,
    trustProxy: deps.config.TRUST_PROXY,
    bodyLimit: deps.config.BODY_MAX_BYTES,
    // A client's x-request-id is echoed when it is a sane token; otherwise one is made.
    genReqId: (req) => {
      const sent = req.headers['x-request-id'];
      return typeof sent === 'string' && CLIENT_REQUEST_ID.test(sent) ? sent : `req_${newUlid()}`;
    },
    return503OnClosing: true,
  });

  const ctx = createContext(deps);
  // Cookies parsed in its onRequest hook: registered before the guard's, which reads the session cookie.
  await app.register(fastifyCookie);
  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
    reply.header('api-version', API_VERSION);
    // Credentials, permission and rate before anything reads (or decompresses) the body.
    const need = req.routeOptions.config?.need;
    if (need) await ctx.guard(req, reply, need);
  });
  app.addHook('onResponse', async (req, reply) => {
    const route = req.routeOptions.url;
    if (route === '/api/ingest' || route?.startsWith('/v1/'))
      ctx.metrics.ingestRequests.inc({ status: String(reply.statusCode) });
    else if (route && req.method === 'GET' && route.startsWith('/api/')) {
      ctx.metrics.querySeconds.observe({ route }, reply.elapsedTime / 1000);
    }
  });
  installErrorHandler(app);
  // Each route declares its zod schemas: requests are validated with them (after the guard, so 401 and 403 come
  // first); answers are sent with plain JSON.stringify, and checked against them only with VALIDATE_ANSWERS
  // (answer-check.ts says why).
  app.setValidatorCompiler(requestValidator);
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  if (deps.config.VALIDATE_ANSWERS) installAnswerCheck(app);
  await registerOpenApi(app, API_VERSION);
  installBodyParser(app, {
    maxBytes: deps.config.BODY_MAX_BYTES,
    maxDecodedBytes: deps.config.BODY_MAX_DECODED_BYTES,
  });
  // Every route and what it needs, as registered: for the checks that every route answers as the contract says.
  const routeTable: RegisteredRoute[] = [];
  app.decorate('routeTable', routeTable);
  app.addHook('onRoute', (r) => {
    for (const method of [r.method].flat()) {
      if (method === 'HEAD') continue;
      routeTable.push({
        method,
        url: r.url,
        need: (r.config as { need?: Need } | undefined)?.need ?? null,
        schema: r.schema ?? null,
        page: (r.schema as { hide?: boolean } | undefined)?.hide === true,
      });
    }
  });
  for (const routes of [
    healthRoutes,
    dashboardRoutes,
    operationsRoutes,
    authRoutes,
    workspaceRoutes,
    keyRoutes,
    ingestRoutes,
    ingestToolRoutes,
    otlpRoutes,
    executionRoutes,
    logRoutes,
    issueRoutes,
    metricRoutes,
  ]) {
    await app.register(routes(ctx));
  }
  return app;
}
