import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTenant,
  eventually,
  get,
  json,
  startStack,
  type TestStack,
} from '../../../test/support/env.js';

/**
 * The SDK inside real apps (CONTRACT §13), each its own process, against a running service: an Express 5 app in
 * CommonJS and a Fastify 5 app in ES modules, both with init() from the package. The Express app calls the Fastify
 * one with fetch and with node:http, so a trace crosses the two. What arrives is read back through the API.
 */

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');

interface App {
  child: ChildProcess;
  url: string;
  /** Lines of JSON the app printed after its first. */
  lines: Record<string, unknown>[];
}

async function startApp(file: string, env: Record<string, string>): Promise<App> {
  const child = spawn(process.execPath, [path.join(fixtures, file)], {
    cwd: fixtures,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines: Record<string, unknown>[] = [];
  const rl = readline.createInterface({ input: child.stdout! });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${file} exited (${code}) before listening`)));
    rl.on('line', (line) => {
      const msg = JSON.parse(line) as Record<string, unknown>;
      if (typeof msg.port === 'number') resolve(msg.port);
      else lines.push(msg);
    });
  });
  return { child, url: `http://127.0.0.1:${port}`, lines };
}

async function stopApp(app: App): Promise<Record<string, unknown>> {
  const exited = new Promise((r) => app.child.once('exit', r));
  app.child.kill('SIGTERM');
  await exited;
  return app.lines.at(-1) ?? {};
}

let stack: TestStack;
let key: string;
const run = `${process.pid}-${Date.now().toString(36)}`;
const A = `shop-${run}`;
const B = `orders-${run}`;
const C = `carts-${run}`;
let express: Record<string, unknown>;
let fastify: Record<string, unknown>;
let koa: Record<string, unknown>;

interface Execution {
  executionId: string;
  endpoint: string;
  method: string | null;
  statusCode: number | null;
  outcome: string;
  exceptionType: string | null;
  traceId: string | null;
  spanId: string | null;
  parentSpanId: string | null;
  source: string;
}

const list = async (service: string) =>
  json<{ data: Execution[]; total: number }>(
    await get(
      stack.service,
      key,
      `/api/executions?serviceName=${service}&pageSize=100&from=${Date.now() - 3_600_000}`,
    ),
  );
const detail = async (id: string) =>
  json<Record<string, unknown> & { logs: { message: string; level: string }[] }>(
    await get(stack.service, key, `/api/executions/${id}`),
  );

beforeAll(async () => {
  stack = await startStack('sdk-apps', { PORT: '0', HOST: '127.0.0.1' }, { listen: true });
  key = (await createTenant(stack.service)).keys.test!;
  const env = { SVC_API_KEY: key, SVC_ENDPOINT: stack.service.url!, SVC_ENVIRONMENT: 'ci' };
  const b = await startApp('fastify-app.mjs', { ...env, SVC_SERVICE: B });
  const a = await startApp('express-app.cjs', { ...env, SVC_SERVICE: A, DOWNSTREAM: b.url });
  for (const p of [
    '/users/42',
    '/users/7?token=abc&page=2',
    '/shop/items/sku-9',
    '/boom',
    '/crash',
    '/not-found',
    '/healthz',
    '/healthz',
    '/downstream',
    '/http-downstream',
  ]) {
    await (await fetch(`${a.url}${p}`)).text();
  }
  for (const p of ['/fail', '/readyz']) await (await fetch(`${b.url}${p}`)).text();
  const c = await startApp('koa-app.mjs', { ...env, SVC_SERVICE: C });
  for (const p of ['/carts/c-77', '/explode', '/livez']) await (await fetch(`${c.url}${p}`)).text();
  koa = await stopApp(c);
  // Both close on SIGTERM (svc.close() flushes); B after A, so A's calls to it are done.
  express = await stopApp(a);
  fastify = await stopApp(b);
  await stack.service.pipeline!.drained();
}, 120_000);
afterAll(async () => {
  await stack?.close();
});

describe('the SDK in an Express app (CommonJS)', () => {
  it('captures each request with its route template, status and duration; health checks are not captured', async () => {
    expect(express).toMatchObject({ closed: true, stats: { queued: 0, dropped: 0 } });
    const { data } = await eventually(
      () => list(A),
      (l) => l.total >= 9,
    );
    expect(data.map((e) => `${e.method} ${e.endpoint} ${e.statusCode}`).sort()).toEqual(
      [
        'GET /boom 500',
        'GET /crash 500',
        'GET /downstream 200',
        'GET /http-downstream 200',
        'GET /not-found 404',
        'GET /shop/items/:sku 200',
        'GET /users/:id 200',
        'GET /users/:id 200',
        'null nightly-report null',
      ].sort(),
    );
  });

  it('gives a failure that reaches the error middleware its exception type, and keeps a 404 a success', async () => {
    const { data } = await list(A);
    const boom = data.find((e) => e.endpoint === '/boom')!;
    expect(boom).toMatchObject({ outcome: 'failed', exceptionType: 'TypeError' });
    const d = await detail(boom.executionId);
    expect(d.exception).toMatchObject({ type: 'TypeError', message: 'no such user', handled: true });
    expect(d.issue).not.toBeNull();
    expect(data.find((e) => e.endpoint === '/not-found')).toMatchObject({ outcome: 'success' });
    // An error only Express's final handler answers (no error middleware) is captured too.
    expect(data.find((e) => e.endpoint === '/crash')).toMatchObject({
      outcome: 'failed',
      exceptionType: 'RangeError',
    });
  });

  it('attaches context and logs to the request, scrubbed', async () => {
    const { data } = await list(A);
    const users = data.filter((e) => e.endpoint === '/users/:id');
    const details = await Promise.all(users.map((u) => detail(u.executionId)));
    const withQuery = details.find((d) => (d.request as { query?: unknown } | null)?.query)!;
    expect(withQuery.request).toMatchObject({
      route: '/users/:id',
      query: { token: '[redacted]', page: '2' },
    });
    expect(withQuery.context).toMatchObject({ user: { id: '7', tier: 'gold' }, password: '[redacted]' });
    expect(withQuery.logs).toMatchObject([{ message: 'user loaded', level: 'info' }]);
  });

  it('records a job with track(), its logs and its metrics', async () => {
    const { data } = await list(A);
    const job = data.find((e) => e.endpoint === 'nightly-report')!;
    expect(job).toMatchObject({ source: 'job', outcome: 'success' });
    expect((await detail(job.executionId)).logs).toMatchObject([{ message: 'report built' }]);
    const series = json<{ type: string; series: { points: { value: number | null }[] }[] }>(
      await get(
        stack.service,
        key,
        `/api/metrics/series?name=reports.built&serviceName=${A}&interval=1h&from=${Date.now() - 3_600_000}`,
      ),
    );
    expect(series.type).toBe('counter');
    expect(series.series.flatMap((s) => s.points).reduce((a, p) => a + (p.value ?? 0), 0)).toBe(1);
  });
});

describe('the SDK in a Fastify app (ES modules)', () => {
  it('captures routes and a handler error with its type; a readiness check is not captured', async () => {
    expect(fastify).toMatchObject({ closed: true, stats: { queued: 0, dropped: 0 } });
    const { data } = await eventually(
      () => list(B),
      (l) => l.total >= 3,
    );
    expect(data.map((e) => `${e.endpoint} ${e.statusCode}`).sort()).toEqual(
      ['/fail 500', '/orders/:id 200', '/orders/:id 200'].sort(),
    );
    expect(data.find((e) => e.endpoint === '/fail')).toMatchObject({
      outcome: 'failed',
      exceptionType: 'RangeError',
    });
    const series = json<{ series: { points: { value: number | null }[] }[] }>(
      await get(
        stack.service,
        key,
        `/api/metrics/series?name=orders.looked_up&serviceName=${B}&interval=1h&from=${Date.now() - 3_600_000}`,
      ),
    );
    expect(series.series.flatMap((s) => s.points).reduce((a, p) => a + (p.value ?? 0), 0)).toBe(2);
  });

  it('continues the trace of the Express app that called it, through fetch and through node:http', async () => {
    const a = (await list(A)).data;
    const b = (await list(B)).data.filter((e) => e.endpoint === '/orders/:id');
    for (const caller of ['/downstream', '/http-downstream']) {
      const up = a.find((e) => e.endpoint === caller)!;
      const down = b.find((e) => e.traceId === up.traceId);
      expect(down, caller).toBeDefined();
      expect(down!.parentSpanId).toBe(up.spanId);
    }
    const d = await detail(b[0]!.executionId);
    expect(d.logs).toMatchObject([{ message: 'order looked up', level: 'warn' }]);
  });
});

describe('the SDK in a Koa app (ES modules)', () => {
  it('captures the router’s template and an error that reaches Koa’s error event, with its type', async () => {
    expect(koa).toMatchObject({ closed: true, stats: { queued: 0, dropped: 0 } });
    const { data } = await eventually(
      () => list(C),
      (l) => l.total >= 2,
    );
    expect(data.map((e) => `${e.endpoint} ${e.statusCode}`).sort()).toEqual([
      '/carts/:cartId 200',
      '/explode 500',
    ]);
    expect(data.find((e) => e.endpoint === '/explode')).toMatchObject({
      outcome: 'failed',
      exceptionType: 'SyntaxError',
    });
    const cart = data.find((e) => e.endpoint === '/carts/:cartId')!;
    expect((await detail(cart.executionId)).logs).toMatchObject([{ message: 'cart read' }]);
  });
});
