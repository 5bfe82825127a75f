import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyRetention } from '../../storage/retention.js';
import { eventually, execution, ingest, startStack, type TestStack } from '../support/env.js';
import { call, errorCode, type SignedUp, signup } from '../support/http.js';

let stack: TestStack;
let owner: SignedUp;

beforeAll(async () => {
  stack = await startStack('settings');
  owner = await signup(stack.service);
});
afterAll(async () => {
  await stack?.close();
});

const list = async (query: string) => {
  const res = await call(stack.service, 'GET', `/api/executions${query}`, { token: owner.session });
  return res;
};
const total = async (query: string) => (await list(query)).json().total as number;
const patch = (body: unknown) =>
  call(stack.service, 'PATCH', '/api/workspace/settings', { token: owner.session, body });

describe('workspace settings', () => {
  it('answers defaults, validates, and replaces each named field whole', async () => {
    const got = await call(stack.service, 'GET', '/api/workspace/settings', { token: owner.session });
    expect(got.json()).toEqual({
      indexedContextKeys: [],
      outcomeRules: [],
      retentionDays: 30,
      healthThresholds: {
        degraded: { failureRate: 0.05, p95Ms: 1000 },
        critical: { failureRate: 0.2, p95Ms: 5000 },
      },
    });
    for (const [body, pathPrefix] of [
      [{ indexedContextKeys: ['customer..id'] }, 'indexedContextKeys.0'],
      [{ indexedContextKeys: Array.from({ length: 51 }, (_, i) => `k${i}`) }, 'indexedContextKeys'],
      [
        { outcomeRules: [{ match: { statusCodes: '499-400' }, outcome: 'failed' }] },
        'outcomeRules.0.match.statusCodes',
      ],
      [{ outcomeRules: [{ match: {}, outcome: 'failed' }] }, 'outcomeRules.0.match'],
      [{ retentionDays: 0 }, 'retentionDays'],
    ] as const) {
      const res = await patch(body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().error.details[0].path.startsWith(pathPrefix)).toBe(true);
    }
    const ok = await patch({ retentionDays: 90, indexedContextKeys: ['customer.id'] });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toMatchObject({
      retentionDays: 90,
      indexedContextKeys: ['customer.id'],
      outcomeRules: [],
    });
    const again = await patch({ indexedContextKeys: ['customer.tier'] });
    expect(again.json()).toMatchObject({ retentionDays: 90, indexedContextKeys: ['customer.tier'] });
    // Unknown fields are ignored (CONTRACT §1: an SDK or dashboard newer than the service still works), not kept.
    const newer = await patch({ retentionDays: 60, unknownSetting: true });
    expect(newer.statusCode).toBe(200);
    expect(newer.json()).not.toHaveProperty('unknownSetting');
    const stored = await call(stack.service, 'GET', '/api/workspace/settings', { token: owner.session });
    expect(stored.json()).toEqual({ ...again.json(), retentionDays: 60 });
  });

  it('outcome rules classify executions ingested after the change, not the stored ones', async () => {
    await patch({ outcomeRules: [] });
    const before = execution({ service: 'rules', endpoint: '/cart/1', statusCode: 404 });
    await ingest(stack.service, owner.testKey, { executions: [before] });
    await eventually(
      () => total(`?executionId=${before.executionId}`),
      (n) => n === 1,
    );
    const res = await patch({
      outcomeRules: [
        { match: { service: 'other' }, outcome: 'success' },
        { match: { endpoint: '/cart/*', statusCodes: '404' }, outcome: 'failed' },
      ],
    });
    expect(res.statusCode).toBe(200);
    // The pipeline classifies with its process's copy of the settings: the change must have reached it.
    await eventually(
      async () => stack.service.control.settingsOf(owner.workspaceId).outcomeRules.length,
      (n) => n === 2,
    );
    const after = execution({ service: 'rules', endpoint: '/cart/2', statusCode: 404 });
    const unmatched = execution({ service: 'rules', endpoint: '/other', statusCode: 404 });
    await ingest(stack.service, owner.testKey, { executions: [after, unmatched] });
    await eventually(
      () => total('?serviceName=rules'),
      (n) => n === 3,
    );
    const detail = async (id: unknown) =>
      (await call(stack.service, 'GET', `/api/executions/${id}`, { token: owner.session })).json();
    expect(await detail(before.executionId)).toMatchObject({ outcome: 'success', outcomeReason: 'status' });
    expect(await detail(after.executionId)).toMatchObject({ outcome: 'failed', outcomeReason: 'rule:1' });
    expect(await detail(unmatched.executionId)).toMatchObject({
      outcome: 'success',
      outcomeReason: 'status',
    });
  });
});

describe('context search', () => {
  beforeAll(async () => {
    await patch({
      indexedContextKeys: ['customer.id', 'customer.tier', 'cart.items', 'flags.beta', 'region', 'a', 'b'],
    });
    const items = [
      execution({
        service: 'ctx',
        context: { customer: { id: 'c_1', tier: 'gold' }, cart: { items: 3 }, flags: { beta: true } },
      }),
      execution({
        service: 'ctx',
        context: { customer: { id: 'c_2', tier: 'silver' }, cart: { items: '3' }, flags: { beta: false } },
      }),
      execution({
        service: 'ctx',
        context: { customer: { id: 'c_3', tier: 'gold' }, cart: { items: 3.5 }, region: 'eu' },
      }),
      execution({ service: 'ctx', context: { customer: { id: 'say "hi"' } } }),
    ];
    await ingest(stack.service, owner.testKey, { executions: items });
    await eventually(
      () => total('?serviceName=ctx'),
      (n) => n === 4,
    );
  });

  const ids = async (query: string) => {
    const res = await list(`?serviceName=ctx&${query}`);
    expect(res.statusCode, res.body).toBe(200);
    return (res.json().data as { executionId: string; matchedContext?: unknown }[]).length;
  };

  it('matches by type, ORs repeated values, ANDs keys', async () => {
    expect(await ids('context.customer.tier=gold')).toBe(2);
    expect(await ids('context.customer.tier=%22gold%22')).toBe(2);
    expect(await ids('context.cart.items=3')).toBe(1);
    expect(await ids('context.cart.items=%223%22')).toBe(1);
    expect(await ids('context.cart.items=3.5')).toBe(1);
    expect(await ids('context.flags.beta=true')).toBe(1);
    expect(await ids('context.flags.beta=false')).toBe(1);
    expect(await ids('context.flags.beta=%22true%22')).toBe(0);
    expect(await ids('context.customer.id=c_1&context.customer.id=c_2')).toBe(2);
    expect(await ids('context.customer.tier=gold&context.region=eu')).toBe(1);
    expect(await ids(`context.customer.id=${encodeURIComponent('"say \\"hi\\""')}`)).toBe(1);
  });

  it('answers the matched context when asked', async () => {
    const res = await list(
      '?serviceName=ctx&context.customer.tier=gold&context.cart.items=3&includeMatchedContext=true',
    );
    expect(res.json().data).toEqual([
      expect.objectContaining({ matchedContext: { 'customer.tier': 'gold', 'cart.items': 3 } }),
    ]);
    const without = await list('?serviceName=ctx&context.customer.tier=gold');
    expect(without.json().data[0].matchedContext).toBeUndefined();
  });

  it('guards keys, counts and windows', async () => {
    const notIndexed = await list('?serviceName=ctx&context.customer.email=x');
    expect(notIndexed.statusCode).toBe(400);
    expect(errorCode(notIndexed)).toBe('CONTEXT_KEY_NOT_ALLOWED');
    expect(notIndexed.json().error.details[0].path).toBe('context.customer.email');
    const six = ['customer.id', 'customer.tier', 'cart.items', 'flags.beta', 'region', 'a']
      .map((k) => `context.${k}=1`)
      .join('&');
    expect(errorCode(await list(`?serviceName=ctx&${six}`))).toBe('VALIDATION_ERROR');
    const eleven = Array.from({ length: 11 }, (_, i) => `context.customer.id=c_${i}`).join('&');
    expect(errorCode(await list(`?serviceName=ctx&${eleven}`))).toBe('VALIDATION_ERROR');
    const now = Date.now();
    const broad = await call(
      stack.service,
      'GET',
      `/api/executions?context.customer.id=c_1&from=${now - 2 * 86_400_000}`,
      {
        token: owner.session,
      },
    );
    expect(errorCode(broad)).toBe('CONTEXT_QUERY_TOO_BROAD');
    // With serviceName a search may span 7 days.
    expect(
      errorCode(await list(`?serviceName=ctx&context.customer.id=c_1&from=${now - 8 * 86_400_000}`)),
    ).toBe('CONTEXT_QUERY_TOO_BROAD');
    expect(
      (await list(`?serviceName=ctx&context.customer.id=c_1&from=${now - 2 * 86_400_000}`)).statusCode,
    ).toBe(200);
    // Without serviceName the default window is the last 24 hours, which is allowed.
    expect(
      (
        await call(stack.service, 'GET', '/api/executions?context.customer.id=c_1', { token: owner.session })
      ).json().total,
    ).toBe(1);
    // VALIDATION_ERROR outranks CONTEXT_KEY_NOT_ALLOWED.
    expect(errorCode(await list('?serviceName=ctx&context.customer.email=x&pageSize=999'))).toBe(
      'VALIDATION_ERROR',
    );
  });
});

describe('retention', () => {
  it('deletes whole expired date partitions, so the files are gone', async () => {
    await patch({ retentionDays: 30 });
    const old = execution({ service: 'old', startedAt: Date.now() - 40 * 86_400_000 });
    const recent = execution({ service: 'old', startedAt: Date.now() - 20 * 86_400_000 });
    await ingest(stack.service, owner.testKey, { executions: [old, recent] });
    const window = `?serviceName=old&from=${Date.now() - 50 * 86_400_000}`;
    await eventually(
      () => total(window),
      (n) => n === 2,
    );
    const oldDate = new Date(old.startedAt as number).toISOString().slice(0, 10);
    const oldDir = path.join(
      stack.config.dataDir,
      'executions',
      `ws=${owner.workspaceId}`,
      'mode=test',
      `date=${oldDate}`,
    );
    await expect(fs.access(oldDir)).resolves.toBeUndefined();
    const r = await applyRetention(
      stack.config.dataDir,
      (ws) => stack.service.control.settingsOf(ws).retentionDays,
    );
    expect(r.removedPartitions).toBeGreaterThanOrEqual(1);
    await expect(fs.access(oldDir)).rejects.toThrow();
    expect(await total(window)).toBe(1);
  });
});

describe('indexing', () => {
  it('makes a key searchable for executions ingested after it was added', async () => {
    const before = execution({ service: 'late', context: { late: { key: 'v' }, long: 'x'.repeat(300) } });
    await ingest(stack.service, owner.testKey, { executions: [before] });
    await eventually(
      () => total('?serviceName=late'),
      (n) => n === 1,
    );
    const current = (
      await call(stack.service, 'GET', '/api/workspace/settings', { token: owner.session })
    ).json();
    await patch({ indexedContextKeys: [...current.indexedContextKeys, 'late.key', 'long'] });
    // No file has the new key's columns yet: the search is valid and matches nothing.
    expect(await total('?serviceName=late&context.late.key=v')).toBe(0);
    const after = execution({ service: 'late', context: { late: { key: 'v' }, long: 'x'.repeat(300) } });
    await ingest(stack.service, owner.testKey, { executions: [after] });
    await eventually(
      () => total('?serviceName=late'),
      (n) => n === 2,
    );
    const res = await list('?serviceName=late&context.late.key=v');
    expect(res.json().data.map((e: { executionId: string }) => e.executionId)).toEqual([after.executionId]);
    // A string over 256 characters is not indexed, so it never matches.
    expect(await total(`?serviceName=late&context.long=${'x'.repeat(300)}`)).toBe(0);
  });
});
