import fs from 'node:fs/promises';
import path from 'node:path';
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

  it('a request resent after the broker restarted is stored once, though the broker forgot its id', async () => {
    const service = `resend-${Date.now()}`;
    const body = { executions: Array.from({ length: 20 }, () => execution({ service })) };
    const headers = { 'idempotency-key': `resend-${Date.now()}` };
    const first = await ingest(stack.service, tenant.keys.test!, body, headers);
    expect(first.statusCode).toBe(202);
    const listed = async () =>
      json<{ total: number }>(
        await get(stack.service, tenant.keys.test!, `/api/executions?serviceName=${service}&pageSize=1`),
      ).total;
    // Committed and acked: the stream no longer holds the message, so a restarted broker has no record of its id.
    await eventually(listed, (n) => n === 20);
    await stack.service.pipeline!.drained();

    await stack.nats.stop();
    await stack.nats.start();
    const skippedBefore = stack.service.pipeline!.stats().redeliveredSkipped;
    const again = await eventually(
      () => ingest(stack.service, tenant.keys.test!, body, headers),
      (r) => r.statusCode === 202,
    );
    expect(json(again).duplicate).toBe(true);
    // The same bytes without a key are the same request too (their id is the body's hash).
    const sameBytes = await ingest(stack.service, tenant.keys.test!, body);
    expect(sameBytes.statusCode).toBe(202);
    const sameBytesAgain = await ingest(stack.service, tenant.keys.test!, body);
    expect(json(sameBytesAgain).duplicate).toBe(true);

    const marker = execution({ service });
    expect((await ingest(stack.service, tenant.keys.test!, { executions: [marker] })).statusCode).toBe(202);
    // Everything sent is committed (the resend was read and dropped by the pipeline, not left in the stream).
    await stack.service.pipeline!.drained();
    expect(await eventually(listed, (n) => n === 41)).toBe(41);
    // The broker stored the resend again (it had forgotten the id): the journal is what kept it out.
    expect(stack.service.pipeline!.stats().redeliveredSkipped).toBeGreaterThan(skippedBefore);
  });

  it('a broker that dies is started again, and what it had accepted is all stored', async () => {
    const service = `broker-kill-${Date.now()}`;
    const pidFile = path.join(stack.dir, 'nats', 'nats-server.pid');
    const pid = Number(await fs.readFile(pidFile, 'utf8'));
    const sent = Array.from({ length: 40 }, () => execution({ service }));
    expect(
      (await ingest(stack.service, tenant.keys.test!, { executions: sent.slice(0, 20) })).statusCode,
    ).toBe(202);
    process.kill(pid, 'SIGKILL');
    await eventually(
      async () => Number(await fs.readFile(pidFile, 'utf8')),
      (p) => p !== pid,
      20_000,
    );
    const after = await eventually(
      () => ingest(stack.service, tenant.keys.test!, { executions: sent.slice(20) }),
      (r) => r.statusCode === 202,
      20_000,
    );
    expect(json(after).duplicate).toBe(false);
    const listed = await eventually(
      async () =>
        json<{ total: number }>(
          await get(stack.service, tenant.keys.test!, `/api/executions?serviceName=${service}&pageSize=1`),
        ).total,
      (n) => n === 40,
      20_000,
    );
    expect(listed).toBe(40);
  });
});
