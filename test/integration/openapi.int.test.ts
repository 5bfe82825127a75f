import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { startStack, type TestStack } from '../support/env.js';
import { call, signup } from '../support/http.js';

/**
 * GET /api/openapi.json (CONTRACT §11) describes every registered route from the same zod schemas that validate
 * its requests (and, in tests, check its answers: VALIDATE_ANSWERS), with no zod internals left in it.
 */

interface Operation {
  summary?: string;
  tags?: string[];
  security?: Record<string, string[]>[];
  parameters?: { in: string; name: string; required?: boolean; schema?: unknown }[];
  requestBody?: { content: Record<string, { schema?: unknown }> };
  responses: Record<string, { description: string; content?: Record<string, { schema?: unknown }> }>;
}

interface Document {
  openapi: string;
  info: { title: string; version: string };
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, unknown>; securitySchemes: Record<string, unknown> };
}

let stack: TestStack;
let doc: Document;
let text: string;

beforeAll(async () => {
  stack = await startStack('openapi');
  const res = await stack.service.app!.inject({ method: 'GET', url: '/api/openapi.json' });
  expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  text = res.body;
  doc = res.json();
});
afterAll(async () => {
  await stack?.close();
});

/** Fastify's `/a/:id` as OpenAPI writes it: `/a/{id}`. */
const openApiPath = (url: string) => url.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}');

/** Every key of every object in `v`, however deep. */
function keysOf(v: unknown, into = new Set<string>()): Set<string> {
  if (Array.isArray(v)) for (const x of v) keysOf(x, into);
  else if (v !== null && typeof v === 'object') {
    for (const [k, x] of Object.entries(v)) {
      into.add(k);
      keysOf(x, into);
    }
  }
  return into;
}

function refsOf(v: unknown, into: string[] = []): string[] {
  if (Array.isArray(v)) for (const x of v) refsOf(x, into);
  else if (v !== null && typeof v === 'object') {
    for (const [k, x] of Object.entries(v)) {
      if (k === '$ref' && typeof x === 'string') into.push(x);
      else refsOf(x, into);
    }
  }
  return into;
}

/** A schema, or the component its `$ref` names. */
const resolve = (schema: unknown): Record<string, unknown> => {
  const ref = (schema as { $ref?: string }).$ref;
  return (ref ? doc.components.schemas[ref.slice('#/components/schemas/'.length)] : schema) as Record<
    string,
    unknown
  >;
};

describe('GET /api/openapi.json', () => {
  it('is an OpenAPI 3.1 document, served without credentials, of the running version', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.version).toBe('2026-11-beta');
    expect(Object.keys(doc.components.securitySchemes).sort()).toEqual(['apiKey', 'bearer', 'session']);
  });

  it('has every registered route, with its parameters, body and answers', () => {
    // The dashboard's page and assets are not the API (CONTRACT §14).
    const table = stack.service.app!.routeTable.filter((r) => !r.page);
    expect(table.length).toBeGreaterThan(30);
    for (const r of table) {
      const what = `${r.method} ${r.url}`;
      const op = doc.paths[openApiPath(r.url)]?.[r.method.toLowerCase()];
      expect(op, what).toBeDefined();
      if (!op) continue;
      expect(op.summary, what).toBeTruthy();
      expect(op.tags?.length, what).toBeGreaterThan(0);
      // Who may call it, from the need the guard checks.
      if (r.need === null) expect(op.security, what).toBeUndefined();
      else expect(op.security?.length, what).toBeGreaterThan(0);

      const schema = (r.schema ?? {}) as Record<string, unknown>;
      const params = op.parameters ?? [];
      const pathParams = [...r.url.matchAll(/:([A-Za-z_][A-Za-z0-9_]*)/g)].map((m) => m[1]);
      expect(
        params.filter((p) => p.in === 'path').map((p) => p.name),
        what,
      ).toEqual(pathParams);
      for (const p of params) expect(p.schema, `${what} ${p.name}`).toBeDefined();
      if (schema.querystring instanceof z.ZodObject) {
        // One parameter for each the schema takes.
        expect(
          params
            .filter((p) => p.in === 'query')
            .map((p) => p.name)
            .sort(),
          what,
        ).toEqual(Object.keys(schema.querystring.shape).sort());
      } else
        expect(
          params.filter((p) => p.in === 'query'),
          what,
        ).toEqual([]);
      if (schema.body) expect(op.requestBody?.content['application/json']?.schema, what).toBeDefined();
      else expect(op.requestBody, what).toBeUndefined();

      const declared = Object.keys((schema.response ?? {}) as object);
      expect(declared.length, what).toBeGreaterThan(0);
      expect(Object.keys(op.responses).sort(), what).toEqual(declared.map((s) => s.toUpperCase()).sort());
      for (const status of declared) {
        const answer = op.responses[status.toUpperCase()]!;
        expect(answer.description, `${what} ${status}`).toBeTruthy();
        if (status === '204') {
          expect(answer.content, `${what} ${status}`).toBeUndefined();
          continue;
        }
        const media = r.url === '/metrics' && status === '200' ? 'text/plain' : 'application/json';
        expect(answer.content?.[media]?.schema, `${what} ${status}`).toBeDefined();
        if (status === '4xx' || status === '5xx') {
          expect(answer.content?.[media]?.schema).toEqual({ $ref: '#/components/schemas/Error' });
        }
      }
    }
  });

  it('holds JSON Schema, not zod internals, and every reference resolves', () => {
    const keys = keysOf(doc);
    for (const internal of ['_zod', 'def', '_def', '~standard', 'shape'])
      expect(keys.has(internal), internal).toBe(false);
    expect(text).not.toContain('__SCHEMA__');
    for (const ref of refsOf(doc)) {
      expect(ref, ref).toMatch(/^#\/components\/schemas\//);
      expect(doc.components.schemas[ref.slice('#/components/schemas/'.length)], ref).toBeDefined();
    }
    // What a client generator needs to see: types, enums and required fields.
    const list = doc.paths['/api/executions']!.get!;
    const status = list.parameters!.find((p) => p.name === 'sort');
    expect(status?.schema).toMatchObject({ enum: ['-startedAt', 'startedAt', '-durationMs', 'durationMs'] });
    const signupBody = doc.paths['/api/auth/signup']!.post!.requestBody!.content['application/json']!.schema;
    expect(signupBody).toMatchObject({ type: 'object', required: ['email', 'password'] });
    // The ingest body is described (as a component), though the route checks its bytes itself.
    const ingestBody = resolve(
      doc.paths['/api/ingest']!.post!.requestBody!.content['application/json']!.schema,
    );
    expect(Object.keys(ingestBody.properties as object).sort()).toEqual([
      'executions',
      'logs',
      'metrics',
      'resource',
      'sdk',
    ]);
  });

  it('is the same for any caller, and credentials change nothing', async () => {
    const owner = await signup(stack.service, 'openapi');
    const withSession = await call(stack.service, 'GET', '/api/openapi.json', { token: owner.session });
    expect(withSession.statusCode).toBe(200);
    expect(withSession.json()).toEqual(doc);
  });
});
