import fastifySwagger from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';
import type { Need } from './auth.js';

/**
 * The OpenAPI 3.1 document (served by GET /api/openapi.json): made by @fastify/swagger from the routes as they
 * are registered, their zod schemas turned into JSON Schema by the type provider's transforms, and what each
 * route needs (its `need`, the one the guard checks) turned into its security requirement.
 */

/** CONTRACT §2: a key as a Bearer token or `x-api-key`, a session as a Bearer token or the `svc_session` cookie. */
const SECURITY_SCHEMES = {
  bearer: {
    type: 'http',
    scheme: 'bearer',
    description: 'An API key (svc_test_… / svc_live_…) or a session token (svc_sess_…)',
  },
  apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key', description: 'An API key' },
  session: {
    type: 'apiKey',
    in: 'cookie',
    name: 'svc_session',
    description: 'A session, from POST /api/auth/login',
  },
} as const;

type Requirement = Record<string, string[]>[];
const KEY: Requirement = [{ bearer: [] }, { apiKey: [] }];
const SESSION: Requirement = [{ bearer: [] }, { session: [] }];
const EITHER: Requirement = [{ bearer: [] }, { apiKey: [] }, { session: [] }];

const SECURITY: Record<Need, Requirement> = {
  ingest: KEY,
  read: EITHER,
  any: EITHER,
  member: SESSION,
  actor: SESSION,
  admin: SESSION,
};

/** What an answer of each status is, where its schema does not say (@fastify/swagger: "Default Response"). */
const ANSWER_DESCRIPTIONS: Record<string, string> = {
  '200': 'OK',
  '201': 'Created',
  '202': 'Accepted',
  '204': 'No content',
  '4xx': 'Refused: the error says why (CONTRACT §3)',
  '5xx': 'Failed, or a dependency is down (CONTRACT §3)',
};

/** The route's answers with a description each (a copy: the route's own schema is left as it is). */
function describeAnswers(response: unknown): unknown {
  if (response === null || typeof response !== 'object') return response;
  return Object.fromEntries(
    Object.entries(response).map(([status, schema]) => {
      const s = schema as { description?: string };
      const description = s.description ?? ANSWER_DESCRIPTIONS[status];
      return [status, description === undefined ? s : { ...s, description }];
    }),
  );
}

const COMPONENT = '#/components/schemas/';

function refsIn(v: unknown, into: Set<string>): Set<string> {
  if (Array.isArray(v)) for (const x of v) refsIn(x, into);
  else if (v !== null && typeof v === 'object') {
    for (const [k, x] of Object.entries(v)) {
      if (k === '$ref' && typeof x === 'string' && x.startsWith(COMPONENT))
        into.add(x.slice(COMPONENT.length));
      else refsIn(x, into);
    }
  }
  return into;
}

/**
 * The type provider makes an input and an output component of every schema with an id (`Issue`, `IssueInput`);
 * the document keeps those its operations refer to, directly or through other components.
 */
function withUsedComponents<
  D extends { paths?: unknown; components?: { schemas?: Record<string, unknown> } },
>(doc: D): D {
  const all = doc.components?.schemas;
  if (!all) return doc;
  const used = refsIn(doc.paths, new Set());
  for (const name of used) refsIn(all[name], used);
  const schemas = Object.fromEntries(Object.entries(all).filter(([name]) => used.has(name)));
  return { ...doc, components: { ...doc.components, schemas } };
}

/** Registers the document's maker; before the routes, whose registration it records. */
export async function registerOpenApi(app: FastifyInstance, version: string): Promise<void> {
  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Telemetry service API',
        version,
        description:
          'Executions, logs, metrics and issues of the services that send them. Errors have one shape ' +
          '(Error); list answers are paged with page and pageSize.',
      },
      components: { securitySchemes: SECURITY_SCHEMES },
    },
    transform: (doc) => {
      const out = jsonSchemaTransform(doc);
      if (!out.schema) return out;
      const need = (doc.route.config as { need?: Need } | undefined)?.need;
      const schema = { ...out.schema, response: describeAnswers(out.schema.response) };
      return { ...out, schema: need ? { ...schema, security: SECURITY[need] } : schema };
    },
    transformObject: (doc) => withUsedComponents(jsonSchemaTransformObject(doc)),
  });
}
