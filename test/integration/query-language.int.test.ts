import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, execution, ingest, startStack, type TestStack } from '../support/env.js';
import { call, errorCode, type SignedUp, signup } from '../support/http.js';

let stack: TestStack;
let owner: SignedUp;

const SERVICES = ['alpha', 'beta', 'gamma'];
const ENVIRONMENTS = ['prod', 'staging'];
const METHODS = ['GET', 'POST'];
const ENDPOINTS = ['/orders/1', '/orders/2', '/users/1', '/health'];
const TRACES = ['t1', 't2', 't3'];
const TIERS = ['gold', 'silver', '3'];
const ITEMS: (number | string)[] = [1, 2, 3, '3'];

beforeAll(async () => {
  stack = await startStack('q');
  owner = await signup(stack.service);
  await call(stack.service, 'PATCH', '/api/workspace/settings', {
    token: owner.session,
    body: { indexedContextKeys: ['customer.tier', 'cart.items', 'flags.beta'] },
  });
  // The pipeline reads the indexed keys from this process's copy of the settings.
  await eventually(
    async () => stack.service.control.settingsOf(owner.workspaceId).indexedContextKeys,
    (keys) => keys.includes('flags.beta'),
  );
  // Deterministic, varied data: every filter below has something to match and something to miss.
  const items = Array.from({ length: 240 }, (_, i) =>
    execution({
      service: SERVICES[i % 3],
      environment: ENVIRONMENTS[i % 2],
      method: METHODS[(i >> 1) % 2],
      endpoint: ENDPOINTS[i % 4],
      statusCode: [200, 404, 500][i % 3],
      durationMs: (i * 37) % 500,
      traceId: TRACES[i % 3],
      startedAt: Date.now() - 60_000 - i * 1000,
      context: {
        customer: { tier: TIERS[i % 3] },
        cart: { items: ITEMS[i % 4] },
        ...(i % 5 === 0 ? {} : { flags: { beta: i % 2 === 0 } }),
      },
    }),
  );
  await ingest(stack.service, owner.testKey, { executions: items });
  await eventually(
    async () =>
      (await call(stack.service, 'GET', '/api/executions?pageSize=1', { token: owner.session })).json().total,
    (n) => n === 240,
  );
});
afterAll(async () => {
  await stack?.close();
});

const quote = (s: string) => `"${s.replace(/"/g, '\\"')}"`;
const contextLiteral = (v: string | number | boolean) => (typeof v === 'string' ? quote(v) : String(v));

/** Each filter is present one time in four, so generated searches are narrow but rarely empty. */
const sometimes = <T>(arb: fc.Arbitrary<T>) =>
  fc.oneof({ arbitrary: fc.constant(undefined), weight: 3 }, { arbitrary: arb, weight: 1 });

const filterArb = fc.record({
  service: sometimes(fc.constantFrom(...SERVICES)),
  environment: sometimes(fc.constantFrom(...ENVIRONMENTS)),
  method: sometimes(fc.constantFrom('GET', 'post')),
  endpoint: sometimes(fc.constantFrom(...ENDPOINTS, '/orders/*', '/u*')),
  status: sometimes(
    fc.uniqueArray(fc.constantFrom('success', 'failed', 'unknown'), { minLength: 1, maxLength: 3 }),
  ),
  trace: sometimes(fc.constantFrom(...TRACES)),
  min: sometimes(fc.integer({ min: 0, max: 500 })),
  max: sometimes(fc.integer({ min: 0, max: 500 })),
  tier: sometimes(
    fc.uniqueArray(fc.constantFrom<string | number>('gold', 'silver', '3', 3), {
      minLength: 1,
      maxLength: 2,
    }),
  ),
  items: sometimes(
    fc.uniqueArray(fc.constantFrom<string | number>(1, 3, '3'), { minLength: 1, maxLength: 2 }),
  ),
  beta: sometimes(fc.boolean()),
});

type Filter = typeof filterArb extends fc.Arbitrary<infer T> ? T : never;

function asParams(f: Filter): string {
  const p = new URLSearchParams();
  if (f.service) p.set('serviceName', f.service);
  if (f.environment) p.set('environment', f.environment);
  if (f.method) p.set('method', f.method);
  if (f.endpoint) p.set('endpoint', f.endpoint);
  if (f.status) p.set('status', f.status.join(','));
  if (f.trace) p.set('traceId', f.trace);
  if (f.min !== undefined) p.set('minDurationMs', String(f.min));
  if (f.max !== undefined) p.set('maxDurationMs', String(f.max));
  for (const v of f.tier ?? []) p.append('context.customer.tier', contextLiteral(v));
  for (const v of f.items ?? []) p.append('context.cart.items', contextLiteral(v));
  if (f.beta !== undefined) p.append('context.flags.beta', String(f.beta));
  return p.toString();
}

function asQ(f: Filter): string {
  const t: string[] = [];
  if (f.service) t.push(`service:${f.service}`);
  if (f.environment) t.push(`environment:${quote(f.environment)}`);
  if (f.method) t.push(`method:${f.method}`);
  if (f.endpoint) t.push(`endpoint:${f.endpoint}`);
  if (f.status) t.push(`status:${f.status.join(',')}`);
  if (f.trace) t.push(`trace:${f.trace}`);
  if (f.min !== undefined) t.push(`duration:>=${f.min}`);
  if (f.max !== undefined) t.push(`duration:<=${f.max}`);
  for (const v of f.tier ?? []) t.push(`context:customer.tier=${contextLiteral(v)}`);
  for (const v of f.items ?? []) t.push(`context:cart.items=${contextLiteral(v)}`);
  if (f.beta !== undefined) t.push(`context:flags.beta=${f.beta}`);
  return t.join(' ');
}

async function ids(query: string) {
  const res = await call(stack.service, 'GET', `/api/executions?pageSize=200&${query}`, {
    token: owner.session,
  });
  expect(res.statusCode, res.body).toBe(200);
  const b = res.json() as { total: number; data: { executionId: string }[] };
  return { total: b.total, ids: b.data.map((e) => e.executionId) };
}

describe('q and the equivalent parameters', () => {
  it('give identical results over generated filters', async () => {
    let nonEmpty = 0;
    await fc.assert(
      fc.asyncProperty(filterArb, async (f) => {
        const byParams = await ids(asParams(f));
        const byQ = await ids(`q=${encodeURIComponent(asQ(f))}`);
        expect(byQ).toEqual(byParams);
        if (byParams.total > 0) nonEmpty++;
      }),
      { numRuns: 60, seed: 20261121 },
    );
    // The property must have compared real matches, not only empty answers.
    expect(nonEmpty).toBeGreaterThan(10);
  });

  it('ANDs q with the parameters', async () => {
    const both = await ids(`serviceName=gamma&q=${encodeURIComponent('status:failed')}`);
    const params = await ids('serviceName=gamma&status=failed');
    expect(both).toEqual(params);
    expect(both.total).toBeGreaterThan(0);
    const conflicting = await ids(`serviceName=gamma&q=${encodeURIComponent('service:beta')}`);
    expect(conflicting.total).toBe(0);
  });

  it('answers a term that does not parse with its offset', async () => {
    const res = await call(
      stack.service,
      'GET',
      `/api/executions?q=${encodeURIComponent('service:alpha colour:red')}`,
      {
        token: owner.session,
      },
    );
    expect(errorCode(res)).toBe('VALIDATION_ERROR');
    expect(res.json().error.details).toEqual([
      { path: 'q', message: expect.stringContaining('unknown key colour'), term: 'colour:red', offset: 14 },
    ]);
    const notIndexed = await call(
      stack.service,
      'GET',
      `/api/executions?q=${encodeURIComponent('context:user.id=1')}`,
      {
        token: owner.session,
      },
    );
    expect(errorCode(notIndexed)).toBe('CONTEXT_KEY_NOT_ALLOWED');
  });
});
