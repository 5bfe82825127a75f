import Fastify from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { installAnswerCheck } from '../../api/answer-check.js';
import { installErrorHandler } from '../../api/error-handler.js';
import { documentedOnly, requestValidator } from '../../api/validate.js';
import { strictWithPrefixed } from '../../schemas/api.js';

/**
 * What the routes' zod schemas do, on a real Fastify app with the service's validator, error handler and answer
 * check: a bad request is the contract's VALIDATION_ERROR, in the form the routes have always given it; with
 * VALIDATE_ANSWERS, an answer that is not what its route declares fails loudly (a 500 naming each mismatch), so
 * a test that receives it fails; without it, answers go out as JSON.stringify makes them.
 */

const answer = z.strictObject({ n: z.number().int(), at: z.string() });

const routes: FastifyPluginAsyncZod = async (app) => {
  app.get(
    '/right',
    { schema: { querystring: z.strictObject({ n: z.coerce.number() }), response: { 200: answer } } },
    async (req) => ({ n: req.query.n, at: 'now' }),
  );
  app.post(
    '/things/:id',
    {
      schema: {
        params: z.object({ id: z.string().regex(/^[a-z]+$/) }),
        querystring: strictWithPrefixed({ mode: z.enum(['test', 'live']).optional() }, 'tags.'),
        body: z.object({ name: z.string().min(1) }),
        response: { 200: z.strictObject({ id: z.string(), query: z.record(z.string(), z.unknown()) }) },
      },
    },
    async (req) => ({ id: req.params.id, query: req.query }),
  );
  app.post(
    '/raw',
    { schema: { body: documentedOnly(z.object({ name: z.string() })), response: { 200: z.unknown() } } },
    async (req) => ({ got: req.body ?? null }),
  );
  // Each handler below breaks its declaration in one way.
  app.get(
    '/wrong-type',
    { schema: { response: { 200: answer } } },
    async () => ({ n: 1.5, at: 'now' }) as never,
  );
  app.get('/extra-field', { schema: { response: { 200: answer } } }, async () => ({
    n: 1,
    at: 'x',
    more: 1,
  }));
  app.get('/undeclared-status', { schema: { response: { 200: answer } } }, async (_req, reply) => {
    // The type provider refuses an undeclared status at compile time; a mistake can still make one at run time.
    reply.code(201 as 200);
    return { n: 1, at: 'now' };
  });
  // What is checked is the JSON the client gets: a Date is sent as its ISO string.
  app.get('/as-sent', { schema: { response: { 200: answer } } }, async () => ({
    n: 2,
    at: new Date(0) as unknown as string,
  }));
};

async function appWith(check: boolean) {
  const app = Fastify();
  installErrorHandler(app);
  app.setValidatorCompiler(requestValidator);
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  if (check) installAnswerCheck(app);
  await app.register(routes);
  return app;
}

describe('request validation', () => {
  const post = (app: Awaited<ReturnType<typeof appWith>>, url: string, body?: unknown) =>
    app.inject({
      method: 'POST',
      url,
      ...(body === undefined
        ? {}
        : { headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) }),
    });
  const errorOf = (res: { json(): unknown }) =>
    (res.json() as { error: { code: string; message: string; details: unknown[] } }).error;

  it('passes valid parts, and parameters under the allowed prefix, to the handler', async () => {
    const app = await appWith(true);
    const res = await post(app, '/things/abc?mode=live&tags.region=eu', { name: 'x', ignored: 1 });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ id: 'abc', query: { mode: 'live', 'tags.region': 'eu' } });
    await app.close();
  });

  it('names the part, the path and the problem, and every unknown parameter', async () => {
    const app = await appWith(true);
    const query = errorOf(await post(app, '/things/abc?mode=prod&bogus=1&tags.ok=1&also=2', { name: 'x' }));
    expect(query).toEqual({
      code: 'VALIDATION_ERROR',
      message: 'query: mode: Invalid option: expected one of "test"|"live"',
      details: [
        { path: 'mode', message: 'Invalid option: expected one of "test"|"live"' },
        { path: 'bogus, also', message: 'unknown parameter' },
      ],
      requestId: expect.any(String),
    });
    expect(errorOf(await post(app, '/things/ABC', { name: 'x' })).message).toMatch(/^path: id: /);
    expect(errorOf(await post(app, '/things/abc', { name: '' })).message).toMatch(/^body: name: /);
    await app.close();
  });

  it('reports a bad query before a bad path or body, and an absent body as an empty one', async () => {
    const app = await appWith(true);
    for (const url of ['/things/ABC?bogus=1', '/things/abc?bogus=1']) {
      const error = errorOf(await post(app, url, { name: '' }));
      expect(error.message, url).toBe('query: bogus: unknown parameter');
    }
    const absent = errorOf(await post(app, '/things/abc'));
    expect(absent.details).toEqual([
      { path: 'name', message: 'Invalid input: expected string, received undefined' },
    ]);
    await app.close();
  });

  it('leaves a documented-only body to its route', async () => {
    const app = await appWith(true);
    const res = await post(app, '/raw', { name: 3 });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ got: { name: 3 } });
    await app.close();
  });
});

describe('the answer check', () => {
  it('passes answers that match their declaration', async () => {
    const app = await appWith(true);
    const right = await app.inject('/right?n=3');
    expect(right.statusCode).toBe(200);
    expect(right.json()).toEqual({ n: 3, at: 'now' });
    expect((await app.inject('/as-sent')).json()).toEqual({ n: 2, at: '1970-01-01T00:00:00.000Z' });
    // Request validation is not the answer check's: a bad parameter is still a 400.
    const bad = await app.inject('/right?n=x&extra=1');
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.details).toEqual([
      { path: 'n', message: 'Invalid input: expected number, received NaN' },
      { path: 'extra', message: 'unknown parameter' },
    ]);
    expect(bad.json().error.message).toBe('query: n: Invalid input: expected number, received NaN');
    await app.close();
  });

  it('fails a mismatch with a 500 that names it', async () => {
    const app = await appWith(true);
    for (const [url, path] of [
      ['/wrong-type', 'n'],
      ['/extra-field', ''],
      ['/undeclared-status', ''],
    ] as const) {
      const res = await app.inject(url);
      expect(res.statusCode, url).toBe(500);
      const error = res.json().error;
      expect(error.code).toBe('INTERNAL_ERROR');
      expect(error.message, url).toContain(`GET ${url}`);
      expect(error.details.map((d: { path: string }) => d.path)).toEqual([path]);
    }
    await app.close();
  });

  it('is off by default: answers go out as they are', async () => {
    const app = await appWith(false);
    const res = await app.inject('/extra-field');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ n: 1, at: 'x', more: 1 });
    await app.close();
  });
});
