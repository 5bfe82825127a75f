import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LogItem } from '../../query/logs.js';
import type { RejectionItem } from '../../query/rejections.js';
import { LOG_LEVELS, type LogLevel } from '../../schemas/records.js';
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
import { call, errorCode, signup } from '../support/http.js';

interface ListAnswer<T> {
  data: T[];
  page: number;
  pageSize: number;
  hasMore: boolean;
  total: number;
}

interface ErrorAnswer {
  error: { code: string; message: string; details: { path: string; message: string }[]; requestId: string };
}

let stack: TestStack;

beforeAll(async () => {
  stack = await startStack('logs', { MAX_EXECUTIONS_PER_REQUEST: '20' });
});
afterAll(async () => {
  await stack?.close();
});

const read = async <T>(key: string, url: string): Promise<ListAnswer<T>> => {
  const res = await get(stack.service, key, url);
  expect(res.statusCode, res.body).toBe(200);
  return json<ListAnswer<T>>(res);
};
const logs = (key: string, query: string) => read<LogItem>(key, `/api/logs${query}`);
const rejections = (key: string, query = '') => read<RejectionItem>(key, `/api/ingest/rejections${query}`);
const validate = (key: string, body: unknown, headers: Record<string, string> = {}) =>
  stack.service.app!.inject({
    method: 'POST',
    url: '/api/ingest/validate',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  });
const details = (res: LightMyRequestResponse) => json<ErrorAnswer>(res).error.details;
const unique = (tag: string) => `${tag}-${process.pid}-${Date.now().toString(36)}`;

describe('GET /api/logs', () => {
  let tenant: TestTenant;
  const service = unique('logs');
  const base = Date.now() - 10 * 60_000;
  const execId = unique('ex-logs');
  const T1 = 'a1'.repeat(16);
  const T2 = 'b2'.repeat(16);

  /** Every log of `service` as the list must answer it, so each filter's expectation is computed from it. */
  interface Sent {
    message: string;
    level: LogLevel;
    at: number;
    environment: string;
    traceId: string | null;
    executionId: string | null;
  }
  const top = (
    message: string,
    level: LogLevel,
    offset: number,
    extra: { environment?: string; traceId?: string; executionId?: string } = {},
  ): Sent => ({
    message,
    level,
    at: base + offset,
    environment: extra.environment ?? 'production',
    traceId: extra.traceId ?? null,
    executionId: extra.executionId ?? null,
  });
  const topLevel: Sent[] = [
    top('Cache warm-up started', 'trace', 0),
    top('cache MISS for user:42', 'debug', 1000, { environment: 'staging' }),
    top('Order placed, 100% paid', 'info', 2000, { traceId: T1 }),
    top('Order placed, 100 items', 'info', 3000),
    top('retry a_b scheduled', 'warn', 4000),
    top('retry axb scheduled', 'warn', 5000),
    top('payment FAILED', 'error', 6000, { traceId: T1 }),
    top('process exiting', 'fatal', 7000),
    top('sent apart from its execution', 'info', 9000, { executionId: execId }),
  ];
  const inline: Sent[] = [
    top('handling request', 'debug', 7600, { traceId: T2, executionId: execId }),
    top('upstream said C:\\path\\to\\thing', 'error', 8000, { traceId: T2, executionId: execId }),
  ];
  const all = [...topLevel, ...inline];
  const newestFirst = (filter: (s: Sent) => boolean) =>
    all
      .filter(filter)
      .sort((a, b) => b.at - a.at)
      .map((s) => s.message);
  const messages = (a: ListAnswer<LogItem>) => a.data.map((l) => l.message);
  let key: string;

  beforeAll(async () => {
    tenant = await createTenant(stack.service);
    key = tenant.keys.test!;
    const payment = topLevel[6]!;
    const res = await ingest(stack.service, key, {
      resource: { service, environment: 'production' },
      executions: [
        execution({
          executionId: execId,
          service,
          traceId: T2,
          startedAt: base + 7500,
          durationMs: 1000,
          logs: inline.map((s) => ({ timestamp: s.at, level: s.level, message: s.message })),
        }),
      ],
      logs: [
        ...topLevel.map((s) => ({
          timestamp: new Date(s.at).toISOString(),
          level: s.level,
          message: s.message,
          environment: s.environment,
          traceId: s.traceId ?? undefined,
          executionId: s.executionId ?? undefined,
          ...(s === payment
            ? {
                spanId: 'span-1',
                logger: 'billing',
                attributes: { orderId: 'o-1', attempt: 2 },
                exception: { type: 'CardError', message: 'declined' },
              }
            : {}),
        })),
        { timestamp: base + 2500, level: 'info', message: 'cache elsewhere', service: `${service}-other` },
      ],
    });
    expect(res.statusCode, res.body).toBe(202);
    await eventually(
      () => logs(key, ''),
      (l) => l.total === all.length + 1,
    );
  });

  it('lists top-level and inline logs, newest first, each item whole', async () => {
    const list = await logs(key, `?serviceName=${service}`);
    expect(messages(list)).toEqual(newestFirst(() => true));
    expect(list).toMatchObject({ page: 1, pageSize: 50, hasMore: false, total: all.length });
    expect(list.data.find((l) => l.message === 'payment FAILED')).toEqual({
      timestamp: new Date(base + 6000).toISOString(),
      level: 'error',
      message: 'payment FAILED',
      service,
      environment: 'production',
      executionId: null,
      traceId: T1,
      spanId: 'span-1',
      logger: 'billing',
      attributes: { orderId: 'o-1', attempt: 2 },
      exception: { type: 'CardError', message: 'declined' },
      truncated: false,
    });
    // Inline logs inherit the execution's ids, service and environment.
    expect(list.data.find((l) => l.message === 'handling request')).toMatchObject({
      timestamp: new Date(base + 7600).toISOString(),
      level: 'debug',
      service,
      environment: 'production',
      executionId: execId,
      traceId: T2,
      spanId: null,
      logger: null,
      attributes: null,
      exception: null,
    });
    // Without serviceName the other service's log is there too.
    expect(messages(await logs(key, ''))).toContain('cache elsewhere');
  });

  it('filters by service and environment', async () => {
    expect(messages(await logs(key, `?serviceName=${service}-other`))).toEqual(['cache elsewhere']);
    expect(messages(await logs(key, '?serviceName=nobody'))).toEqual([]);
    expect(messages(await logs(key, `?serviceName=${service}&environment=staging`))).toEqual(
      newestFirst((s) => s.environment === 'staging'),
    );
    expect((await logs(key, `?serviceName=${service}&environment=production`)).total).toBe(all.length - 1);
  });

  it('level is a minimum', async () => {
    for (const [i, level] of LOG_LEVELS.entries()) {
      const expected = newestFirst((s) => LOG_LEVELS.indexOf(s.level) >= i);
      expect(expected.length).toBeGreaterThan(0);
      const list = await logs(key, `?serviceName=${service}&level=${level}`);
      expect(messages(list), level).toEqual(expected);
      expect(list.total, level).toBe(expected.length);
    }
    expect(messages(await logs(key, `?serviceName=${service}&level=error`))).toEqual([
      'upstream said C:\\path\\to\\thing',
      'process exiting',
      'payment FAILED',
    ]);
  });

  it('filters by executionId and traceId', async () => {
    expect(messages(await logs(key, `?executionId=${execId}`))).toEqual([
      'sent apart from its execution',
      'upstream said C:\\path\\to\\thing',
      'handling request',
    ]);
    expect(messages(await logs(key, `?traceId=${T1}`))).toEqual([
      'payment FAILED',
      'Order placed, 100% paid',
    ]);
    expect(messages(await logs(key, `?traceId=${T2}`))).toEqual(newestFirst((s) => s.traceId === T2));
    expect((await logs(key, `?executionId=${execId}-other`)).total).toBe(0);
  });

  it('search is a case-insensitive, literal substring of the message', async () => {
    const search = async (needle: string) =>
      messages(await logs(key, `?serviceName=${service}&search=${encodeURIComponent(needle)}`));
    expect(await search('cache')).toEqual(['cache MISS for user:42', 'Cache warm-up started']);
    expect(await search('CACHE')).toEqual(['cache MISS for user:42', 'Cache warm-up started']);
    expect(await search('failed')).toEqual(['payment FAILED']);
    // As a LIKE pattern `100%` would also match "100 items", and `a_b` "axb".
    expect(await search('100%')).toEqual(['Order placed, 100% paid']);
    expect(await search('a_b')).toEqual(['retry a_b scheduled']);
    expect(await search('\\path\\')).toEqual(['upstream said C:\\path\\to\\thing']);
    expect(await search('%')).toEqual(['Order placed, 100% paid']);
    expect(await search('no such words')).toEqual([]);
  });

  it('from is inclusive, to exclusive, both as epoch ms or RFC 3339', async () => {
    const window = await logs(
      key,
      `?serviceName=${service}&from=${base + 1000}&to=${new Date(base + 3000).toISOString()}`,
    );
    expect(messages(window)).toEqual(['Order placed, 100% paid', 'cache MISS for user:42']);
    expect((await logs(key, `?serviceName=${service}&to=${base}`)).total).toBe(0);
    expect((await logs(key, `?serviceName=${service}&from=${base + 9001}`)).total).toBe(0);
    // The default window is the last 7 days: a from 8 days back finds the same logs.
    expect((await logs(key, `?serviceName=${service}&from=${Date.now() - 8 * 86_400_000}`)).total).toBe(
      all.length,
    );
  });

  it('sorts both ways and pages with total and hasMore', async () => {
    const oldestFirst = [...newestFirst(() => true)].reverse();
    expect(messages(await logs(key, `?serviceName=${service}&sort=timestamp`))).toEqual(oldestFirst);
    expect(messages(await logs(key, `?serviceName=${service}&sort=-timestamp`))).toEqual(
      newestFirst(() => true),
    );
    const pages = [];
    for (let page = 1; page <= 3; page++) {
      pages.push(await logs(key, `?serviceName=${service}&sort=timestamp&pageSize=4&page=${page}`));
    }
    expect(pages.map((p) => [p.page, p.pageSize, p.data.length, p.hasMore, p.total])).toEqual([
      [1, 4, 4, true, all.length],
      [2, 4, 4, true, all.length],
      [3, 4, 3, false, all.length],
    ]);
    expect(pages.flatMap(messages)).toEqual(oldestFirst);
    const beyond = await logs(key, `?serviceName=${service}&pageSize=4&page=4`);
    expect(beyond).toEqual({ data: [], page: 4, pageSize: 4, hasMore: false, total: all.length });
  });

  it('other workspaces and the other mode see none of them', async () => {
    const other = await createTenant(stack.service);
    expect((await logs(other.keys.test!, '')).total).toBe(0);
    expect((await logs(tenant.keys.live!, '')).total).toBe(0);
    const forbidden = await get(stack.service, key, '/api/logs?mode=live');
    expect(forbidden.statusCode).toBe(403);
    expect(errorCode(forbidden)).toBe('FORBIDDEN');
  });
});

describe('GET /api/executions/{executionId}/logs', () => {
  it('pages through all of an execution’s logs in time order', async () => {
    const tenant = await createTenant(stack.service);
    const key = tenant.keys.test!;
    const startedAt = Date.now() - 5 * 60_000;
    const ex = execution({
      startedAt,
      durationMs: 500,
      logs: Array.from({ length: 7 }, (_, i) => ({
        timestamp: startedAt + 10 + i * 10,
        level: 'info',
        message: `inline ${i}`,
      })),
    });
    const neighbour = execution({ startedAt });
    const res = await ingest(stack.service, key, {
      executions: [ex, neighbour],
      logs: [
        // Sent out of order, and one before the execution started: the list is in time order all the same.
        {
          timestamp: startedAt + 400,
          level: 'warn',
          message: 'late 2',
          service: 'checkout',
          environment: 'production',
          executionId: ex.executionId,
        },
        {
          timestamp: startedAt - 5,
          level: 'debug',
          message: 'early',
          service: 'checkout',
          environment: 'production',
          executionId: ex.executionId,
        },
        {
          timestamp: startedAt + 300,
          level: 'info',
          message: 'neighbour',
          service: 'checkout',
          environment: 'production',
          executionId: neighbour.executionId,
        },
      ],
    });
    expect(res.statusCode, res.body).toBe(202);
    const url = `/api/executions/${ex.executionId}/logs`;
    const expected = ['early', ...Array.from({ length: 7 }, (_, i) => `inline ${i}`), 'late 2'];
    const first = await eventually(
      () => get(stack.service, key, url),
      (r) => r.statusCode === 200 && json<ListAnswer<LogItem>>(r).total === expected.length,
    );
    expect(json<ListAnswer<LogItem>>(first)).toMatchObject({ page: 1, pageSize: 50, hasMore: false });

    const pages = [];
    for (let page = 1; page <= 3; page++)
      pages.push(await read<LogItem>(key, `${url}?pageSize=4&page=${page}`));
    expect(pages.map((p) => [p.page, p.pageSize, p.data.length, p.hasMore, p.total])).toEqual([
      [1, 4, 4, true, 9],
      [2, 4, 4, true, 9],
      [3, 4, 1, false, 9],
    ]);
    const paged = pages.flatMap((p) => p.data);
    expect(paged.map((l) => l.message)).toEqual(expected);
    expect(paged.every((l) => l.executionId === ex.executionId)).toBe(true);
    const times = paged.map((l) => Date.parse(l.timestamp));
    expect(times).toEqual([...times].sort((a, b) => a - b));
    // The same logs, in the same order, as the detail's first 1,000.
    const detail = await get(stack.service, key, `/api/executions/${ex.executionId}`);
    expect(detail.statusCode).toBe(200);
    expect(json<{ logs: LogItem[] }>(detail).logs).toEqual(paged);
    expect((await read<LogItem>(key, `/api/executions/${neighbour.executionId}/logs`)).data).toEqual([
      expect.objectContaining({ message: 'neighbour', executionId: neighbour.executionId }),
    ]);
    // An execution without logs exists: an empty list, not a 404.
    const quiet = execution();
    expect((await ingest(stack.service, key, { executions: [quiet] })).statusCode).toBe(202);
    const empty = await eventually(
      () => get(stack.service, key, `/api/executions/${quiet.executionId}/logs`),
      (r) => r.statusCode === 200,
    );
    expect(json(empty)).toEqual({ data: [], page: 1, pageSize: 50, hasMore: false, total: 0 });

    // Not found: an unknown id, another workspace's execution, the other mode's.
    const other = await createTenant(stack.service);
    for (const [who, path] of [
      [key, `/api/executions/${ex.executionId}-nope/logs`],
      [other.keys.test!, url],
      [tenant.keys.live!, url],
    ] as const) {
      const missing = await get(stack.service, who, path);
      expect(missing.statusCode, path).toBe(404);
      expect(errorCode(missing)).toBe('NOT_FOUND');
    }
    // FORBIDDEN before VALIDATION_ERROR before NOT_FOUND.
    const forbidden = await get(stack.service, key, `${url}?mode=live&bogus=1`);
    expect(forbidden.statusCode).toBe(403);
    const invalid = await get(stack.service, key, `/api/executions/${ex.executionId}-nope/logs?bogus=1`);
    expect(invalid.statusCode).toBe(400);
    expect(details(invalid)).toEqual([{ path: 'bogus', message: 'unknown parameter' }]);
    for (const [query, path] of [
      ['?pageSize=0', 'pageSize'],
      ['?pageSize=201', 'pageSize'],
      ['?page=51&pageSize=200', 'page'],
      ['?sort=timestamp', 'sort'],
    ] as const) {
      const bad = await get(stack.service, key, `${url}${query}`);
      expect(bad.statusCode, query).toBe(400);
      expect(errorCode(bad)).toBe('VALIDATION_ERROR');
      expect(details(bad).map((d) => d.path)).toEqual([path]);
    }
    const badId = await get(stack.service, key, '/api/executions/bad!id/logs');
    expect(badId.statusCode).toBe(400);
    expect(details(badId).map((d) => d.path)).toEqual(['executionId']);
  });
});

describe('GET /api/ingest/rejections', () => {
  it('lists what the pipeline refused, newest request first, per workspace and mode', async () => {
    const tenant = await createTenant(stack.service);
    const key = tenant.keys.test!;
    const before = Date.now();
    const now = Date.now();
    const first = {
      resource: { service: 'rej', environment: 'production' },
      executions: [
        execution(),
        { endpoint: '/x', startedAt: 'yesterday', durationMs: -1 },
        execution({ mode: 'live' }),
        execution({ logs: [{ timestamp: now, level: 'loud', message: 'x' }] }),
      ],
      logs: [
        { timestamp: now, level: 'info', message: 'fine' },
        { level: 'info', message: 'no time' },
      ],
      metrics: [{ name: '9bad', type: 'gauge', value: 1, timestamp: now }],
    };
    const r1 = await ingest(stack.service, key, first);
    expect(r1.statusCode, r1.body).toBe(202);
    const rid1 = json(r1).requestId as string;
    await eventually(
      () => rejections(key),
      (l) => l.total === 5,
    );
    const second = { logs: [{ timestamp: now, level: 'info', message: 'no service' }] };
    const r2 = await ingest(stack.service, key, second);
    expect(r2.statusCode).toBe(202);
    const rid2 = json(r2).requestId as string;
    const live = await ingest(stack.service, tenant.keys.live!, {
      resource: { service: 'rej', environment: 'production', mode: 'live' },
      metrics: [{ name: 'ok', type: 'gauge', value: 'not a number', timestamp: now }],
    });
    expect(live.statusCode).toBe(202);
    const ridLive = json(live).requestId as string;
    const list = await eventually(
      () => rejections(key),
      (l) => l.total === 6,
    );
    await stack.service.pipeline!.drained();
    const after = Date.now();

    expect(list.data.map((r) => [r.requestId, r.kind, r.index, r.code])).toEqual([
      [rid2, 'logs', 0, 'VALIDATION_ERROR'],
      [rid1, 'executions', 1, 'VALIDATION_ERROR'],
      [rid1, 'executions', 2, 'FORBIDDEN'],
      [rid1, 'executions', 3, 'VALIDATION_ERROR'],
      [rid1, 'logs', 1, 'VALIDATION_ERROR'],
      [rid1, 'metrics', 0, 'VALIDATION_ERROR'],
    ]);
    const paths = list.data.map((r) => r.details.map((d) => d.path));
    expect(paths[0]).toEqual(['service']);
    expect(paths[1]).toEqual(expect.arrayContaining(['startedAt', 'durationMs']));
    expect(list.data[2]!.details).toEqual([
      { path: 'mode', message: 'mode "live" is not the mode of the key ("test")' },
    ]);
    expect(paths[3]).toEqual(['logs.0.level']);
    expect(paths[4]).toEqual(['timestamp']);
    expect(paths[5]).toEqual(['name']);
    for (const r of list.data) {
      expect(r.receivedAt).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      expect(Date.parse(r.receivedAt)).toBeGreaterThanOrEqual(before);
      expect(Date.parse(r.receivedAt)).toBeLessThanOrEqual(after);
      expect(r.details.every((d) => typeof d.message === 'string' && d.message.length > 0)).toBe(true);
    }
    // What was stored is exactly what the dry run answers for the same body.
    const dry = await validate(key, first);
    expect(dry.statusCode).toBe(200);
    expect(json<{ rejected: unknown[] }>(dry).rejected).toEqual(
      list.data
        .filter((r) => r.requestId === rid1)
        .map(({ kind, index, code, details }) => ({ kind, index, code, details })),
    );

    // Paging.
    const pages = [1, 2, 3].map((page) => rejections(key, `?pageSize=2&page=${page}`));
    const answered = await Promise.all(pages);
    expect(answered.map((p) => [p.data.length, p.hasMore, p.total])).toEqual([
      [2, true, 6],
      [2, true, 6],
      [2, false, 6],
    ]);
    expect(answered.flatMap((p) => p.data)).toEqual(list.data);

    // The other mode, and another workspace.
    const liveList = await rejections(tenant.keys.live!);
    expect(liveList.data.map((r) => [r.requestId, r.kind, r.index, r.code])).toEqual([
      [ridLive, 'metrics', 0, 'VALIDATION_ERROR'],
    ]);
    expect((await rejections(key, '?mode=test')).total).toBe(6);
    expect((await get(stack.service, key, '/api/ingest/rejections?mode=live')).statusCode).toBe(403);
    const other = await createTenant(stack.service);
    expect((await rejections(other.keys.test!)).total).toBe(0);
    expect((await rejections(other.keys.live!)).total).toBe(0);

    // The time window is the time the request was received.
    expect((await rejections(key, `?to=${before}`)).total).toBe(0);
    expect((await rejections(key, `?from=${after + 1}`)).total).toBe(0);
    expect((await rejections(key, `?from=${before}&to=${new Date(after + 1).toISOString()}`)).total).toBe(6);
  });
});

describe('POST /api/ingest/validate', () => {
  it('answers counts and rejections with the pipeline’s validation, and stores nothing', async () => {
    const tenant = await createTenant(stack.service);
    const key = tenant.keys.test!;
    const now = Date.now();
    const good = execution({
      logs: [
        { timestamp: now, level: 'INFO', message: 'inline ok' },
        { timestamp: now, level: 'loud', message: 'inline bad' },
      ],
    });
    const body = {
      resource: { service: 'validate', environment: 'production' },
      executions: [good, execution({ endpoint: undefined }), execution({ mode: 'live' })],
      logs: [
        { timestamp: now, level: 'warn', message: 'ok' },
        { timestamp: now, level: 'loud', message: 'bad' },
      ],
      metrics: [
        { name: 'queue.depth', type: 'gauge', value: 3, timestamp: now },
        { name: '9bad', type: 'gauge', value: 1, timestamp: now },
      ],
    };
    const res = await validate(key, body);
    expect(res.statusCode, res.body).toBe(200);
    expect(json(res)).toEqual({
      valid: { executions: 1, logs: 2, metrics: 1 },
      rejected: [
        {
          kind: 'executions',
          index: 0,
          code: 'VALIDATION_ERROR',
          details: [{ path: 'logs.1.level', message: expect.any(String) }],
        },
        {
          kind: 'executions',
          index: 1,
          code: 'VALIDATION_ERROR',
          details: [{ path: 'endpoint', message: expect.any(String) }],
        },
        {
          kind: 'executions',
          index: 2,
          code: 'FORBIDDEN',
          details: [{ path: 'mode', message: 'mode "live" is not the mode of the key ("test")' }],
        },
        {
          kind: 'logs',
          index: 1,
          code: 'VALIDATION_ERROR',
          details: [{ path: 'level', message: expect.any(String) }],
        },
        {
          kind: 'metrics',
          index: 1,
          code: 'VALIDATION_ERROR',
          details: [{ path: 'name', message: expect.any(String) }],
        },
      ],
    });
    const clean = await validate(key, { executions: [execution()] });
    expect(json(clean)).toEqual({ valid: { executions: 1, logs: 0, metrics: 0 }, rejected: [] });

    // Nothing was stored: a real ingest sent after the dry runs is processed, and the dry runs left no trace.
    const sentinel = execution();
    expect((await ingest(stack.service, key, { executions: [sentinel] })).statusCode).toBe(202);
    await eventually(
      () => read(key, `/api/executions?executionId=${sentinel.executionId}`),
      (l) => l.total === 1,
    );
    await stack.service.pipeline!.drained();
    expect((await read(key, `/api/executions?executionId=${good.executionId}`)).total).toBe(0);
    expect((await read(key, '/api/executions')).total).toBe(1);
    expect((await logs(key, '')).total).toBe(0);
    expect((await rejections(key)).total).toBe(0);
  });

  it('makes the envelope checks of ingest', async () => {
    const tenant = await createTenant(stack.service, { readOnly: { mode: 'test', permissions: ['read'] } });
    const key = tenant.keys.test!;
    for (const [payload, path] of [
      ['{"executions": [', ''],
      ['[1,2]', ''],
      ['{"logs": 3}', 'logs'],
      ['{"resource": {"mode": "prod"}}', 'resource.mode'],
    ] as const) {
      const bad = await validate(key, payload);
      expect(bad.statusCode, payload).toBe(400);
      expect(errorCode(bad)).toBe('VALIDATION_ERROR');
      expect(details(bad)[0]!.path).toBe(path);
    }
    const otherMode = await validate(key, { resource: { mode: 'live' }, executions: [] });
    expect(otherMode.statusCode).toBe(403);
    expect(errorCode(otherMode)).toBe('FORBIDDEN');
    const tooMany = await validate(key, { executions: Array.from({ length: 21 }, () => ({})) });
    expect(tooMany.statusCode).toBe(413);
    expect(errorCode(tooMany)).toBe('PAYLOAD_TOO_LARGE');
    const text = await validate(key, 'hello', { 'content-type': 'text/plain' });
    expect(text.statusCode).toBe(415);
    expect((await validate(tenant.keys.readOnly!, { executions: [] })).statusCode).toBe(403);
    const owner = await signup(stack.service, 'validate');
    const bySession = await call(stack.service, 'POST', '/api/ingest/validate', {
      token: owner.session,
      body: { executions: [] },
    });
    expect(bySession.statusCode).toBe(403);
    expect(errorCode(bySession)).toBe('FORBIDDEN');
  });
});

describe('access and parameters', () => {
  it('401 without credentials or with unknown ones, before anything else', async () => {
    for (const url of [
      '/api/logs',
      '/api/executions/x/logs',
      '/api/ingest/rejections',
      '/api/logs?bogus=1',
    ]) {
      const res = await stack.service.app!.inject({ method: 'GET', url });
      expect(res.statusCode, url).toBe(401);
      expect(errorCode(res)).toBe('UNAUTHORIZED');
      expect(res.headers['www-authenticate']).toBe('Bearer');
      expect((await get(stack.service, `svc_test_${'x'.repeat(32)}`, url)).statusCode, url).toBe(401);
    }
    const post = await stack.service.app!.inject({
      method: 'POST',
      url: '/api/ingest/validate',
      headers: { 'content-type': 'application/json' },
      payload: 'not json',
    });
    expect(post.statusCode).toBe(401);
    expect(errorCode(post)).toBe('UNAUTHORIZED');
  });

  it('403 for a key without read; sessions read both modes', async () => {
    const tenant = await createTenant(stack.service, {
      ingestOnly: { mode: 'test', permissions: ['ingest'] },
    });
    for (const url of ['/api/logs', '/api/ingest/rejections', '/api/executions/x/logs']) {
      const res = await get(stack.service, tenant.keys.ingestOnly!, url);
      expect(res.statusCode, url).toBe(403);
      expect(errorCode(res)).toBe('FORBIDDEN');
    }
    const owner = await signup(stack.service, 'reader');
    for (const url of ['/api/logs', '/api/logs?mode=live', '/api/ingest/rejections?mode=live']) {
      const res = await call(stack.service, 'GET', url, { token: owner.session });
      expect(res.statusCode, url).toBe(200);
      expect(json(res)).toEqual({ data: [], page: 1, pageSize: 50, hasMore: false, total: 0 });
    }
  });

  it('VALIDATION_ERROR for unknown parameters and bad values, with details', async () => {
    const tenant = await createTenant(stack.service);
    const key = tenant.keys.test!;
    for (const [url, path] of [
      ['/api/logs?bogus=1', 'bogus'],
      ['/api/logs?service=checkout', 'service'],
      ['/api/logs?mode=prod', 'mode'],
      ['/api/logs?level=verbose', 'level'],
      ['/api/logs?sort=time', 'sort'],
      ['/api/logs?sort=-startedAt', 'sort'],
      ['/api/logs?page=0', 'page'],
      ['/api/logs?page=two', 'page'],
      ['/api/logs?pageSize=201', 'pageSize'],
      ['/api/logs?page=51&pageSize=200', 'page'],
      ['/api/logs?from=yesterday', 'from'],
      ['/api/logs?to=2026-01-01', 'to'],
      ['/api/logs?from=2000&to=1000', 'from'],
      ['/api/logs?executionId=bad!id', 'executionId'],
      ['/api/logs?search=', 'search'],
      [`/api/logs?traceId=${'t'.repeat(129)}`, 'traceId'],
      ['/api/ingest/rejections?bogus=1', 'bogus'],
      ['/api/ingest/rejections?level=warn', 'level'],
      ['/api/ingest/rejections?pageSize=500', 'pageSize'],
      ['/api/ingest/rejections?from=soon', 'from'],
    ] as const) {
      const res = await get(stack.service, key, url);
      expect(res.statusCode, url).toBe(400);
      const body = json<ErrorAnswer>(res);
      expect(body.error.code, url).toBe('VALIDATION_ERROR');
      expect(
        body.error.details.map((d) => d.path),
        url,
      ).toEqual([path]);
      expect(body.error.requestId).toBe(res.headers['x-request-id']);
    }
    // The largest allowed window is fine.
    expect((await logs(key, '?page=50&pageSize=200')).data).toEqual([]);
    // FORBIDDEN wins over VALIDATION_ERROR.
    for (const url of ['/api/logs?mode=live&bogus=1', '/api/ingest/rejections?mode=live&pageSize=0']) {
      const res = await get(stack.service, key, url);
      expect(res.statusCode, url).toBe(403);
    }
  });
});
