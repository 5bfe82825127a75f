import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMPRESS_FROM_BYTES } from '../../broker/ingest-publisher.js';
import { QueryEngine } from '../../storage/duckdb.js';
import { listPartitionFiles } from '../../storage/layout.js';
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

type ListAnswer = {
  data: {
    executionId: string;
    outcome: string;
    durationMs: number;
    startedAt: string;
    service: string;
    method: string;
  }[];
  total: number;
  hasMore: boolean;
  page: number;
  pageSize: number;
};

let stack: TestStack;
let tenant: TestTenant;

beforeAll(async () => {
  stack = await startStack('ingest', {
    BODY_MAX_BYTES: '65536',
    BODY_MAX_DECODED_BYTES: '262144',
    MAX_EXECUTIONS_PER_REQUEST: '50',
  });
  tenant = await createTenant(stack.service, { ingestOnly: { mode: 'test', permissions: ['ingest'] } });
});
afterAll(async () => {
  await stack?.close();
});

const list = async (query: string, key = tenant.keys.test!) => {
  const res = await get(stack.service, key, `/api/executions${query}`);
  expect(res.statusCode, res.body).toBe(200);
  return json<ListAnswer>(res);
};

describe('ingest → executions', () => {
  it('an accepted execution is listed and opens in detail with its logs', async () => {
    const ex = execution({
      endpoint: '/orders/7',
      method: 'post',
      statusCode: 502,
      traceId: 'a'.repeat(32),
      context: { customer: { id: 'c_9', tier: 'gold' } },
      logs: [{ timestamp: Date.now() - 900, level: 'error', message: 'upstream failed' }],
    });
    const res = await ingest(
      stack.service,
      tenant.keys.test!,
      { executions: [ex] },
      { 'x-request-id': 'client-req-1' },
    );
    expect(res.statusCode).toBe(202);
    expect(res.headers['x-request-id']).toBe('client-req-1');
    expect(res.headers['api-version']).toBe('2026-11-beta');
    expect(json(res)).toEqual({
      accepted: { executions: 1, logs: 1, metrics: 0 },
      duplicate: false,
      requestId: 'client-req-1',
    });

    const found = await eventually(
      () => list(`?executionId=${ex.executionId}`),
      (l) => l.total === 1,
    );
    expect(found.data[0]).toMatchObject({
      executionId: ex.executionId,
      outcome: 'failed',
      method: 'POST',
      service: 'checkout',
    });

    const detail = await get(stack.service, tenant.keys.test!, `/api/executions/${ex.executionId}`);
    expect(detail.statusCode).toBe(200);
    const d = json(detail);
    expect(d).toMatchObject({
      executionId: ex.executionId,
      traceId: 'a'.repeat(32),
      outcome: 'failed',
      outcomeReason: 'status_5xx',
      statusCode: 502,
      context: { customer: { id: 'c_9', tier: 'gold' } },
      // A 502: grouped into an issue (CONTRACT §9).
      issue: {
        id: expect.stringMatching(/^iss_[0-9a-f]{16}$/),
        title: 'HTTP 5xx in POST /orders/:id',
        status: 'open',
      },
      logsTruncated: false,
    });
    expect(d.logs).toEqual([
      expect.objectContaining({ level: 'error', message: 'upstream failed', executionId: ex.executionId }),
    ]);
  });

  it('filters, sorts and pages the list', async () => {
    const service = `svc-${Date.now()}`;
    const base = Date.now() - 60_000;
    const items = Array.from({ length: 7 }, (_, i) =>
      execution({
        service,
        endpoint: i < 4 ? `/api/users/${i}` : '/health',
        method: i % 2 ? 'POST' : 'GET',
        statusCode: i === 6 ? 500 : 200,
        durationMs: (i + 1) * 10,
        startedAt: base + i * 1000,
      }),
    );
    expect((await ingest(stack.service, tenant.keys.test!, { executions: items })).statusCode).toBe(202);
    const all = await eventually(
      () => list(`?serviceName=${service}`),
      (l) => l.total === 7,
    );
    // Default sort: newest first.
    expect(all.data.map((e) => e.executionId)).toEqual(items.map((e) => e.executionId).reverse());
    expect((await list(`?serviceName=${service}&status=failed`)).data.map((e) => e.executionId)).toEqual([
      items[6]!.executionId,
    ]);
    expect((await list(`?serviceName=${service}&status=success,failed`)).total).toBe(7);
    expect((await list(`?serviceName=${service}&method=post`)).total).toBe(3);
    expect((await list(`?serviceName=${service}&endpoint=/api/users/*`)).total).toBe(4);
    expect((await list(`?serviceName=${service}&endpoint=/health`)).total).toBe(3);
    expect((await list(`?serviceName=${service}&minDurationMs=20&maxDurationMs=40`)).total).toBe(3);
    const byDuration = await list(`?serviceName=${service}&sort=-durationMs&pageSize=2&page=2`);
    expect(byDuration.data.map((e) => e.durationMs)).toEqual([50, 40]);
    expect(byDuration).toMatchObject({ total: 7, hasMore: true, page: 2, pageSize: 2 });
    const lastPage = await list(`?serviceName=${service}&sort=startedAt&pageSize=3&page=3`);
    expect(lastPage.data.map((e) => e.executionId)).toEqual([items[6]!.executionId]);
    expect(lastPage.hasMore).toBe(false);
    // from inclusive, to exclusive.
    const window = await list(
      `?serviceName=${service}&from=${base + 1000}&to=${new Date(base + 3000).toISOString()}`,
    );
    expect(window.data.map((e) => e.executionId).sort()).toEqual(
      [items[1]!.executionId, items[2]!.executionId].sort(),
    );
  });

  it('the same request twice is stored once; an idempotency key dedupes a different body', async () => {
    const ex = execution();
    const body = JSON.stringify({ executions: [ex] });
    const first = await ingest(stack.service, tenant.keys.test!, body);
    // Processed payloads leave the stream (work-queue retention), yet a resend is still recognized.
    await stack.service.pipeline!.drained();
    expect((await stack.service.broker.jsm.streams.info('SVC_INGEST')).state.messages).toBe(0);
    const second = await ingest(stack.service, tenant.keys.test!, body);
    expect(json(first).duplicate).toBe(false);
    expect(json(second).duplicate).toBe(true);
    expect(second.statusCode).toBe(202);

    // A body the stream holds compressed (broker/ingest-publisher.ts) is known by the bytes sent as well.
    const many = Array.from({ length: 20 }, () => execution({ context: { note: 'n'.repeat(300) } }));
    const large = JSON.stringify({ executions: many });
    expect(large.length).toBeGreaterThan(COMPRESS_FROM_BYTES);
    const l1 = await ingest(stack.service, tenant.keys.test!, large);
    await stack.service.pipeline!.drained();
    const l2 = await ingest(stack.service, tenant.keys.test!, large);
    expect([json(l1).duplicate, json(l2).duplicate]).toEqual([false, true]);
    expect((await list(`?executionId=${many[7]!.executionId}`)).total).toBe(1);

    const a = execution();
    const b = execution();
    const k1 = await ingest(
      stack.service,
      tenant.keys.test!,
      { executions: [a] },
      { 'idempotency-key': 'batch-123' },
    );
    const k2 = await ingest(
      stack.service,
      tenant.keys.test!,
      { executions: [b] },
      { 'idempotency-key': 'batch-123' },
    );
    expect([json(k1).duplicate, json(k2).duplicate]).toEqual([false, true]);

    await eventually(
      () => list(`?executionId=${a.executionId}`),
      (l) => l.total === 1,
    );
    await stack.service.pipeline!.drained();
    expect((await list(`?executionId=${ex.executionId}`)).total).toBe(1);
    expect((await list(`?executionId=${b.executionId}`)).total).toBe(0);
  });

  it('a burst of small requests is stored whole, with no message failing in the pipeline', async () => {
    // Small messages arrive several to one socket read, sharing one buffer: each must be copied before its
    // bytes move to a worker thread, or the others' data is detached.
    const service = `burst-${Date.now()}`;
    const before = stack.service.pipeline!.stats().failed;
    const responses = await Promise.all(
      Array.from({ length: 200 }, () =>
        ingest(stack.service, tenant.keys.test!, {
          executions: [execution({ service }), execution({ service })],
        }),
      ),
    );
    expect(responses.every((r) => r.statusCode === 202)).toBe(true);
    await eventually(
      () => list(`?serviceName=${service}&pageSize=1`),
      (l) => l.total === 400,
      10_000,
    );
    expect(stack.service.pipeline!.stats().failed - before).toBe(0);
  });

  it('accepts gzip bodies', async () => {
    const ex = execution();
    const res = await ingest(
      stack.service,
      tenant.keys.test!,
      zlib.gzipSync(JSON.stringify({ executions: [ex] })),
      {
        'content-encoding': 'gzip',
      },
    );
    expect(res.statusCode).toBe(202);
    await eventually(
      () => list(`?executionId=${ex.executionId}`),
      (l) => l.total === 1,
    );
  });

  it('a large body is parsed in groups of items by the cuts the API found, every item as sent', async () => {
    const service = `grouped-${Date.now()}`;
    const executions = Array.from({ length: 50 }, (_, i) =>
      execution({
        service,
        durationMs: 1000 + i,
        context: { customer: { id: `c-${i}`, note: 'é "quoted", [bracketed] {braced}'.repeat(4) } },
        logs: Array.from({ length: 3 }, (_, k) => ({
          timestamp: Date.now() - 1000,
          level: 'info',
          message: `e${i} l${k}`,
        })),
      }),
    );
    const logs = Array.from({ length: 1200 }, (_, k) => ({
      timestamp: Date.now() - 2000,
      level: 'warn',
      message: `top-level ${k}, with "quotes" and ] brackets [`,
      service,
      environment: 'production',
    }));
    const text = JSON.stringify({ resource: { service }, executions, logs });
    expect(text.length).toBeGreaterThan(2 * 32 * 1024);
    const before = stack.service.pipeline!.stats().groupedParses;
    const res = await ingest(stack.service, tenant.keys.test!, zlib.gzipSync(text), {
      'content-encoding': 'gzip',
    });
    expect(res.statusCode, res.body).toBe(202);
    await eventually(
      () => list(`?serviceName=${service}&pageSize=100&sort=durationMs`),
      (l) => l.total === 50,
    );
    const listed = await list(`?serviceName=${service}&pageSize=100&sort=durationMs`);
    expect(listed.data.map((e) => e.durationMs)).toEqual(executions.map((e) => e.durationMs));
    expect(stack.service.pipeline!.stats().groupedParses - before).toBe(1);
    const detail = json<{ context: unknown; logs: { message: string }[] }>(
      await get(stack.service, tenant.keys.test!, `/api/executions/${executions[37]!.executionId}`),
    );
    expect(detail.context).toEqual(executions[37]!.context);
    expect(detail.logs.map((l) => l.message)).toEqual(['e37 l0', 'e37 l1', 'e37 l2']);
    const logPage = await get(
      stack.service,
      tenant.keys.test!,
      `/api/logs?serviceName=${service}&level=warn&from=${Date.now() - 3_600_000}&pageSize=1`,
    );
    expect(json<{ total: number }>(logPage).total).toBe(1200);
  });

  it('test and live data never mix', async () => {
    const t = execution({ service: 'mix' });
    const l = execution({ service: 'mix', mode: 'live' });
    expect((await ingest(stack.service, tenant.keys.test!, { executions: [t] })).statusCode).toBe(202);
    expect(
      (await ingest(stack.service, tenant.keys.live!, { resource: { mode: 'live' }, executions: [l] }))
        .statusCode,
    ).toBe(202);
    await eventually(
      () => list('?serviceName=mix', tenant.keys.live!),
      (r) => r.total === 1,
    );
    await eventually(
      () => list('?serviceName=mix'),
      (r) => r.total === 1,
    );
    expect((await list('?serviceName=mix')).data[0]!.executionId).toBe(t.executionId);
    expect((await list('?serviceName=mix', tenant.keys.live!)).data[0]!.executionId).toBe(l.executionId);
    expect((await get(stack.service, tenant.keys.test!, `/api/executions/${l.executionId}`)).statusCode).toBe(
      404,
    );
    expect((await get(stack.service, tenant.keys.test!, '/api/executions?mode=live')).statusCode).toBe(403);
    expect(
      (await get(stack.service, tenant.keys.live!, `/api/executions/${t.executionId}?mode=test`)).statusCode,
    ).toBe(403);
    // A live item under a test key is refused; a live resource under a test key refuses the request.
    const refused = await ingest(stack.service, tenant.keys.test!, {
      resource: { mode: 'live' },
      executions: [execution()],
    });
    expect(refused.statusCode).toBe(403);
    expect(json<{ error: { code: string } }>(refused).error.code).toBe('FORBIDDEN');
  });

  it('another workspace sees none of it', async () => {
    const other = await createTenant(stack.service);
    const ex = execution({ service: 'private' });
    await ingest(stack.service, tenant.keys.test!, { executions: [ex] });
    await eventually(
      () => list(`?executionId=${ex.executionId}`),
      (l) => l.total === 1,
    );
    expect((await list(`?executionId=${ex.executionId}`, other.keys.test!)).total).toBe(0);
    expect((await get(stack.service, other.keys.test!, `/api/executions/${ex.executionId}`)).statusCode).toBe(
      404,
    );
  });

  it('scrubbed headers and redacted values are absent from the stored files', async () => {
    const secretHeader = 'Bearer sk-header-secret-123';
    const secretContext = 'hunter2-context-secret';
    const secretKey = `svc_live_${'Z'.repeat(32)}`;
    const ex = execution({
      request: { headers: { authorization: secretHeader, 'x-ok': 'visible-header' } },
      context: { user: { password: secretContext, name: 'visible-name' } },
      exception: { type: 'Error', message: `bad key ${secretKey}`, handled: true },
    });
    expect((await ingest(stack.service, tenant.keys.test!, { executions: [ex] })).statusCode).toBe(202);
    await eventually(
      () => list(`?executionId=${ex.executionId}`),
      (l) => l.total === 1,
    );
    const files = await listPartitionFiles(
      stack.config.dataDir,
      'executions',
      tenant.workspaceId,
      'test',
      0,
      Date.now() + 3_600_000,
    );
    expect(files.length).toBeGreaterThan(0);
    const engine = await QueryEngine.open(stack.dir);
    try {
      const rows = await engine.all('SELECT * FROM read_parquet($files, union_by_name = true)', { files });
      const text = JSON.stringify(rows, (_k, v) => (typeof v === 'bigint' ? Number(v) : v));
      expect(text).toContain('visible-header');
      expect(text).toContain('visible-name');
      expect(text).toContain('[redacted]');
      expect(text).not.toContain('sk-header-secret-123');
      expect(text).not.toContain(secretContext);
      expect(text).not.toContain(secretKey);
    } finally {
      engine.close();
    }
  });

  it('invalid items are recorded as rejections, valid ones in the same request are stored', async () => {
    const good = execution();
    const res = await ingest(stack.service, tenant.keys.test!, {
      executions: [good, { service: 'x', endpoint: '/y', startedAt: 'yesterday', durationMs: -1 }],
      metrics: [
        { name: '9bad', type: 'gauge', value: 1, timestamp: Date.now(), service: 's', environment: 'e' },
      ],
    });
    expect(res.statusCode).toBe(202);
    const requestId = json(res).requestId as string;
    await eventually(
      () => list(`?executionId=${good.executionId}`),
      (l) => l.total === 1,
    );
    await stack.service.pipeline!.drained();
    const files = await listPartitionFiles(
      stack.config.dataDir,
      'rejections',
      tenant.workspaceId,
      'test',
      0,
      Date.now() + 3_600_000,
    );
    const engine = await QueryEngine.open(stack.dir);
    try {
      const rows = await engine.all(
        'SELECT kind, item_index, code, details FROM read_parquet($files) WHERE request_id = $rid ORDER BY kind',
        { files, rid: requestId },
      );
      expect(rows.map((r) => [r.kind, r.item_index, r.code])).toEqual([
        ['executions', 1, 'VALIDATION_ERROR'],
        ['metrics', 0, 'VALIDATION_ERROR'],
      ]);
      const paths = (JSON.parse(rows[0]!.details as string) as { path: string }[]).map((d) => d.path);
      expect(paths).toEqual(expect.arrayContaining(['startedAt', 'durationMs']));
    } finally {
      engine.close();
    }
  });
});

describe('ingest refusals', () => {
  const code = (res: { json: () => unknown }) => (res.json() as { error: { code: string } }).error.code;

  it('401 without a key or with an unknown one', async () => {
    const none = await stack.service.app!.inject({ method: 'POST', url: '/api/ingest', payload: {} });
    expect(none.statusCode).toBe(401);
    expect(none.headers['www-authenticate']).toBe('Bearer');
    expect(code(none)).toBe('UNAUTHORIZED');
    const bad = await ingest(stack.service, `svc_test_${'x'.repeat(32)}`, { executions: [] });
    expect(bad.statusCode).toBe(401);
    // Credentials are checked before the body is read: a bad body without a key is still 401.
    for (const headers of [
      { 'content-type': 'text/plain' },
      { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    ]) {
      const res = await stack.service.app!.inject({
        method: 'POST',
        url: '/api/ingest',
        headers,
        payload: 'not json, not gzip',
      });
      expect(res.statusCode).toBe(401);
    }
  });

  it('403 for a key without the permission', async () => {
    const res = await get(stack.service, tenant.keys.ingestOnly!, '/api/executions');
    expect(res.statusCode).toBe(403);
    expect(code(res)).toBe('FORBIDDEN');
  });

  it('413 for bodies and item counts over the limits', async () => {
    const big = await ingest(stack.service, tenant.keys.test!, {
      executions: [execution({ context: { blob: 'x'.repeat(70_000) } })],
    });
    expect(big.statusCode).toBe(413);
    expect(code(big)).toBe('PAYLOAD_TOO_LARGE');
    const bomb = zlib.gzipSync(JSON.stringify({ executions: [], pad: ' '.repeat(300_000) }));
    const decoded = await ingest(stack.service, tenant.keys.test!, bomb, { 'content-encoding': 'gzip' });
    expect(decoded.statusCode).toBe(413);
    const many = await ingest(stack.service, tenant.keys.test!, {
      executions: Array.from({ length: 51 }, () => ({})),
    });
    expect(many.statusCode).toBe(413);
    expect(json<{ error: { details: { path: string }[] } }>(many).error.details[0]!.path).toBe('executions');
  });

  it('415 for other media types and encodings', async () => {
    const text = await ingest(stack.service, tenant.keys.test!, 'hello', { 'content-type': 'text/plain' });
    expect(text.statusCode).toBe(415);
    expect(code(text)).toBe('UNSUPPORTED_MEDIA_TYPE');
    const br = await ingest(stack.service, tenant.keys.test!, '{}', { 'content-encoding': 'br' });
    expect(br.statusCode).toBe(415);
  });

  it('400 for bad JSON and bad envelopes, each with details', async () => {
    for (const [payload, path] of [
      ['{"executions": [', ''],
      ['[1,2]', ''],
      ['{"executions": {}}', 'executions'],
      ['{"logs": 3}', 'logs'],
      ['{"resource": {"mode": "prod"}}', 'resource.mode'],
    ] as const) {
      const res = await ingest(stack.service, tenant.keys.test!, payload);
      expect(res.statusCode, payload).toBe(400);
      const body = json<{ error: { code: string; details: { path: string }[]; requestId: string } }>(res);
      expect(body.error.code).toBe('VALIDATION_ERROR');
      expect(body.error.details[0]!.path).toBe(path);
      expect(body.error.requestId).toBe(res.headers['x-request-id']);
    }
    const badGzip = await ingest(stack.service, tenant.keys.test!, 'not gzip', {
      'content-encoding': 'gzip',
    });
    expect(badGzip.statusCode).toBe(400);
  });

  it('list parameters are validated', async () => {
    for (const q of [
      '?pageSize=201',
      '?page=0',
      '?bogus=1',
      '?status=broken',
      '?from=yesterday',
      '?page=101&pageSize=100',
      '?sort=name',
    ]) {
      const res = await get(stack.service, tenant.keys.test!, `/api/executions${q}`);
      expect(res.statusCode, q).toBe(400);
      expect(code(res)).toBe('VALIDATION_ERROR');
    }
    const ctx = await get(stack.service, tenant.keys.test!, '/api/executions?context.customer.id=1');
    expect(ctx.statusCode).toBe(400);
    expect(code(ctx)).toBe('CONTEXT_KEY_NOT_ALLOWED');
  });

  it('unknown routes are NOT_FOUND in the contract shape; health answers', async () => {
    const res = await stack.service.app!.inject({ method: 'GET', url: '/api/nope' });
    expect(res.statusCode).toBe(404);
    expect(code(res)).toBe('NOT_FOUND');
    expect((await stack.service.app!.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    const ready = await stack.service.app!.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(200);
    expect(ready.json()).toMatchObject({ status: 'ready' });
  });
});
