import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTenant,
  eventually,
  execution,
  get,
  ingest,
  json,
  startStack,
  type TestStack,
  type TestTenant,
} from '../support/env.js';
import { call, errorCode, type SignedUp, signup, uniqueEmail } from '../support/http.js';

let stack: TestStack;
let tenant: TestTenant;
let owner: SignedUp;

beforeAll(async () => {
  stack = await startStack('outage', { PUBLISH_TIMEOUT_MS: '1000' });
  tenant = await createTenant(stack.service);
  owner = await signup(stack.service);
});
afterAll(async () => {
  await stack?.close();
});

describe('broker outage', () => {
  it('answers 503 while the broker is down, then resumes with nothing lost', async () => {
    const service = `outage-${Date.now()}`;
    const before = Array.from({ length: 30 }, () => execution({ service }));
    expect((await ingest(stack.service, tenant.keys.test!, { executions: before })).statusCode).toBe(202);

    await stack.nats.stop();
    await eventually(
      async () => stack.service.broker.isConnected(),
      (c) => !c,
    );
    const refused = await ingest(stack.service, tenant.keys.test!, { executions: [execution({ service })] });
    expect(refused.statusCode).toBe(503);
    expect(refused.headers['retry-after']).toBeDefined();
    expect(json<{ error: { code: string } }>(refused).error.code).toBe('UNAVAILABLE');
    expect((await stack.service.app!.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(503);
    // Every route that needs the broker answers the outage as one (503, retry-after), never another code: a
    // sign-up is not a taken e-mail (409), a settings change not a conflict.
    const signup = await call(stack.service, 'POST', '/api/auth/signup', {
      body: { email: uniqueEmail(), password: 'long enough password' },
    });
    expect(signup.statusCode, signup.body).toBe(503);
    expect(signup.headers['retry-after']).toBeDefined();
    const patch = await call(stack.service, 'PATCH', '/api/workspace/settings', {
      token: owner.session,
      body: { retentionDays: 9 },
    });
    expect(patch.statusCode, patch.body).toBe(503);
    expect(errorCode(patch)).toBe('UNAVAILABLE');

    await stack.nats.start();
    await eventually(
      async () => stack.service.broker.isConnected(),
      (c) => c,
    );
    const after = Array.from({ length: 30 }, () => execution({ service }));
    const accepted = await eventually(
      () => ingest(stack.service, tenant.keys.test!, { executions: after }),
      (r) => r.statusCode === 202,
    );
    expect(json(accepted).duplicate).toBe(false);

    const listed = await eventually(
      async () =>
        json<{ total: number; data: { executionId: string }[] }>(
          await get(stack.service, tenant.keys.test!, `/api/executions?serviceName=${service}&pageSize=100`),
        ),
      (l) => l.total === 60,
      20_000,
    );
    const ids = new Set(listed.data.map((e) => e.executionId));
    for (const e of [...before, ...after]) expect(ids.has(e.executionId as string)).toBe(true);
  });
});
