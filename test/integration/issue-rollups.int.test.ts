import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpointTemplate } from '../../pipeline/fingerprint.js';
import { QueryEngine } from '../../storage/duckdb.js';
import { listSidecarsAndFiles } from '../../storage/layout.js';
import { DENSE_VALUES, endpointTemplateSql } from '../../storage/rollup.js';
import { eventually, execution, ingest, startStack, type TestStack, tempDir } from '../support/env.js';
import { call, type SignedUp, signup } from '../support/http.js';

let stack: TestStack;
let engineDir: string;
let engine: QueryEngine;

beforeAll(async () => {
  // Compaction runs when the test asks for it (the timer's period is never reached).
  stack = await startStack('rollups', { COMPACTION_INTERVAL_MS: '3600000', COMPACTION_GRACE_MS: '0' });
  engineDir = await tempDir('rollups-engine');
  engine = await QueryEngine.open(engineDir, 1);
});
afterAll(async () => {
  engine?.close();
  await stack?.close();
  if (engineDir) await fs.rm(engineDir, { recursive: true, force: true });
});

const HOUR = 3_600_000;

interface Factor {
  field: string;
  value: unknown;
  issueShare: number;
  baselineShare: number;
}
interface Detail {
  id: string;
  occurrences: { total: number };
  commonFactors: Factor[];
  hypothesis: { text: string; facts: string[] };
}

const send = async (u: SignedUp, executions: unknown[]) => {
  const res = await ingest(stack.service, u.testKey, { executions });
  expect(res.statusCode, res.body).toBe(202);
  await stack.service.pipeline!.drained();
};

const detailOf = async (u: SignedUp, id: string) => {
  const res = await call(stack.service, 'GET', `/api/issues/${id}`, { token: u.session });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as Detail;
};

const byName = (d: Detail) =>
  Object.fromEntries(d.commonFactors.map((f) => [`${f.field}=${String(f.value)}`, f]));

describe('baseline rollups', () => {
  it('templates endpoints in SQL exactly as the pipeline does', async () => {
    const endpoints = [
      '/orders/12',
      '/orders/12?expand=items#top',
      '/orders/deadbeef',
      '/orders/DEADBEEF01/items',
      '/orders/dead',
      '/orders/550e8400-e29b-41d4-a716-446655440000',
      '/orders/12.5',
      '/orders/0x1f',
      '/a//12/',
      'orders/12',
      '/',
      '',
      '?q=1',
      '/v2/users/me',
    ];
    const rows = await engine.all(
      `SELECT e, ${endpointTemplateSql('endpoint')} AS t FROM (SELECT unnest($endpoints) AS e, unnest($endpoints) AS endpoint)`,
      { endpoints },
    );
    expect(Object.fromEntries(rows.map((r) => [r.e, r.t]))).toEqual(
      Object.fromEntries(endpoints.map((e) => [e, endpointTemplate(e)])),
    );
  });

  it('answers the common factors of compacted hours as the scan of their executions did, dense keys included', async () => {
    const u = await signup(stack.service);
    const settings = await call(stack.service, 'PATCH', '/api/workspace/settings', {
      token: u.session,
      body: { indexedContextKeys: ['customer.id', 'customer.tier'] },
    });
    expect(settings.statusCode).toBe(200);
    // An hour that has ended, so compaction merges it whole.
    const hour = Math.floor(Date.now() / HOUR) * HOUR - 2 * HOUR;
    const at = (i: number) => new Date(hour + 60_000 + i * 1000).toISOString();
    // 300 successes over 150 customers (more than DENSE_VALUES: customer.id is a dense key), one in ten gold.
    const customers = 150;
    expect(customers).toBeGreaterThan(DENSE_VALUES);
    const successes = Array.from({ length: 300 }, (_, i) =>
      execution({
        endpoint: `/orders/${1000 + i}`,
        method: 'POST',
        statusCode: 201,
        durationMs: 20 + (i % 50),
        startedAt: at(i),
        context: { customer: { id: `cus_${i % customers}`, tier: i % 10 === 0 ? 'gold' : 'silver' } },
      }),
    );
    // The issue: every failure is customer cus_7's (2 of the successes are theirs), a gold customer.
    const failures = Array.from({ length: 12 }, (_, i) =>
      execution({
        endpoint: `/orders/${5000 + i}`,
        method: 'POST',
        statusCode: 500,
        durationMs: 2500,
        startedAt: at(400 + i),
        exception: { type: 'LockTimeout', message: `row ${i} locked` },
        context: { customer: { id: 'cus_7', tier: 'gold' } },
      }),
    );
    // Not the baseline: another endpoint, and another service.
    const elsewhere = Array.from({ length: 40 }, (_, i) =>
      execution({
        service: i % 2 ? 'billing' : 'checkout',
        endpoint: i % 2 ? '/orders/1' : '/health',
        method: 'POST',
        startedAt: at(500 + i),
        context: { customer: { id: 'cus_7', tier: 'gold' } },
      }),
    );
    // In several requests, so the hour has several files to merge.
    for (let i = 0; i < 4; i++) await send(u, successes.slice(i * 75, (i + 1) * 75));
    await send(u, [...failures, ...elsewhere]);
    const list = await eventually(
      async () =>
        (await call(stack.service, 'GET', '/api/issues', { token: u.session })).json() as {
          data: { id: string; occurrences: { total: number } }[];
        },
      (p) => p.data.length === 1 && p.data[0]!.occurrences.total === 12,
    );
    const id = list.data[0]!.id;

    const scope = [stack.config.dataDir, u.workspaceId, 'test', hour, hour + HOUR] as const;
    expect((await listSidecarsAndFiles('rollups', ...scope)).sidecars).toEqual([]);
    const scanned = await detailOf(u, id);
    expect(byName(scanned)).toMatchObject({
      'context.customer.id=cus_7': { issueShare: 1, baselineShare: 2 / 300 },
      'context.customer.tier=gold': { issueShare: 1, baselineShare: 30 / 300 },
      'statusCode=500': { issueShare: 1, baselineShare: 0 },
    });

    await stack.service.pipeline!.compact();
    const compacted = await listSidecarsAndFiles('rollups', ...scope);
    expect(compacted.sidecars).toHaveLength(1);
    expect(compacted.files).toEqual([]);
    const rolledUp = await detailOf(u, id);
    expect(rolledUp.commonFactors).toEqual(scanned.commonFactors);
    // The hypothesis rests on the same figures, the median durations included.
    expect(rolledUp.hypothesis).toEqual(scanned.hypothesis);

    // customer.id is looked up among the dense values, customer.tier read with the endpoint's other rows.
    const kinds = await engine.all(
      `SELECT field, max(kind)::INTEGER AS kind, sum(count)::INTEGER AS n
       FROM read_parquet($rollups) WHERE service = 'checkout' AND endpoint = '/orders/:id' GROUP BY field ORDER BY field`,
      { rollups: compacted.sidecars },
    );
    expect(Object.fromEntries(kinds.map((r) => [r.field, [r.kind, r.n]]))).toMatchObject({
      '': [0, 300],
      'context.customer.id': [1, 300],
      'context.customer.tier': [0, 300],
      environment: [0, 300],
    });

    // Late successes of the same hour land in a file beside the rolled-up one: both are counted.
    await send(
      u,
      Array.from({ length: 30 }, (_, i) =>
        execution({
          endpoint: `/orders/${7000 + i}`,
          method: 'POST',
          statusCode: 201,
          startedAt: at(600 + i),
          context: { customer: { id: 'cus_7', tier: 'silver' } },
        }),
      ),
    );
    const mixed = await listSidecarsAndFiles('rollups', ...scope);
    expect(mixed.sidecars).toHaveLength(1);
    expect(mixed.files).toHaveLength(1);
    expect(byName(await detailOf(u, id))).toMatchObject({
      'context.customer.id=cus_7': { issueShare: 1, baselineShare: 32 / 330 },
      'context.customer.tier=gold': { issueShare: 1, baselineShare: 30 / 330 },
    });

    // Merged again with the hour: one file, one rollup, the same answer; the replaced rollup is gone.
    await stack.service.pipeline!.compact();
    const again = await listSidecarsAndFiles('rollups', ...scope);
    expect(again.sidecars).toHaveLength(1);
    expect(again.files).toEqual([]);
    expect(byName(await detailOf(u, id))).toMatchObject({
      'context.customer.id=cus_7': { baselineShare: 32 / 330 },
    });
    await stack.service.pipeline!.compact();
    const dir = path.dirname(again.sidecars[0]!);
    expect((await fs.readdir(dir)).filter((n) => n.endsWith('.rollup'))).toEqual([
      path.basename(again.sidecars[0]!),
    ]);
  });
});
