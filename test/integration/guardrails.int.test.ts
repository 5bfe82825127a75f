import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, startService } from '../../main.js';
import { ERROR_STATUS, type ErrorCode } from '../../schemas/errors.js';
import { eventually, execution, ingest, startStack, type TestStack, testConfig } from '../support/env.js';
import { call, errorCode, signup, uniqueEmail } from '../support/http.js';

describe('revocation across API processes', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startStack('two-apis');
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('a revoked key and an ended session fail on another process as soon as it hears of the change', async () => {
    // A second API process on the same NATS: it shares nothing with the first but the buckets.
    const second = await startService(testConfig(stack.config.dataDir, stack.nats.url), { role: 'api' });
    try {
      const owner = await signup(stack.service);
      const created = await call(stack.service, 'POST', '/api/keys', {
        token: owner.session,
        body: { name: 'both', mode: 'test', permissions: ['read'] },
      });
      const key = created.json().key as string;
      // Created on the first, usable at once on the second.
      expect((await call(second, 'GET', '/api/executions', { token: key })).statusCode).toBe(200);
      expect((await call(second, 'GET', '/api/auth/me', { token: owner.session })).statusCode).toBe(200);

      // The second process learns of a change by its bucket watch (a push from the broker, within milliseconds:
      // bench/ measures it). What the test holds it to is that nothing else delays it: not one request is served
      // on stale credentials once the change has reached it.
      const sha = (s: string) => crypto.createHash('sha256').update(s).digest('hex');
      let keyRevoked = false;
      let sessionEnded = false;
      second.control.onKeyChange((hash, record) => {
        if (hash === sha(key) && record?.revokedAt) keyRevoked = true;
      });
      second.control.onSessionChange((hash, record) => {
        if (hash === sha(owner.session) && record === null) sessionEnded = true;
      });
      /** Polls until `expected`; counts the other answers given after the change had reached the process. */
      const staleAnswers = async (ask: () => Promise<number>, heard: () => boolean, expected: number) => {
        let stale = 0;
        await eventually(
          async () => {
            const knew = heard();
            const status = await ask();
            if (knew && status !== expected) stale++;
            return status;
          },
          (status) => status === expected,
          5000,
        );
        return stale;
      };

      expect(
        (await call(stack.service, 'DELETE', `/api/keys/${created.json().id}`, { token: owner.session }))
          .statusCode,
      ).toBe(204);
      const keyStale = await staleAnswers(
        async () => (await call(second, 'GET', '/api/executions', { token: key })).statusCode,
        () => keyRevoked,
        401,
      );
      expect(
        (await call(stack.service, 'POST', '/api/auth/logout', { token: owner.session })).statusCode,
      ).toBe(204);
      const sessionStale = await staleAnswers(
        async () => (await call(second, 'GET', '/api/auth/me', { token: owner.session })).statusCode,
        () => sessionEnded,
        401,
      );
      expect({ keyRevoked, sessionEnded, keyStale, sessionStale }).toEqual({
        keyRevoked: true,
        sessionEnded: true,
        keyStale: 0,
        sessionStale: 0,
      });
    } finally {
      await second.stop();
    }
  });
});

describe('rate limits and operations', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startStack('limits', {
      INGEST_RATE_PER_SEC: '1',
      INGEST_BURST: '2',
      READ_RATE_PER_SEC: '1',
      READ_BURST: '3',
      METRICS_TOKEN: 'metrics-token-0123456789',
    });
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('limits ingest per key with 429, retry-after and ratelimit headers', async () => {
    const owner = await signup(stack.service);
    const answers = [];
    for (let i = 0; i < 3; i++)
      answers.push(await ingest(stack.service, owner.testKey, { executions: [execution()] }));
    expect(answers.map((r) => r.statusCode)).toEqual([202, 202, 429]);
    expect(answers[0]!.headers['ratelimit-limit']).toBe('2');
    expect(answers[0]!.headers['ratelimit-remaining']).toBe('1');
    expect(answers[2]!.headers['ratelimit-remaining']).toBe('0');
    expect(Number(answers[2]!.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(errorCode(answers[2]!)).toBe('RATE_LIMITED');
    // Reads have their own bucket, and each caller its own.
    const other = await signup(stack.service, 'other');
    expect((await ingest(stack.service, other.testKey, { executions: [] })).statusCode).toBe(202);
    const reads = [];
    for (let i = 0; i < 4; i++)
      reads.push((await call(stack.service, 'GET', '/api/executions', { token: owner.session })).statusCode);
    expect(reads).toEqual([200, 200, 200, 429]);
  });

  it('GET /api/limits answers the effective values', async () => {
    const owner = await signup(stack.service);
    const res = await call(stack.service, 'GET', '/api/limits', { token: owner.testKey });
    expect(res.json()).toEqual({
      ingest: { requestsPerSecond: 1, burst: 2 },
      read: { requestsPerSecond: 1, burst: 3 },
      body: { maxBytes: 5 * 1024 * 1024, maxDecodedBytes: 20 * 1024 * 1024 },
      items: { executions: 1000, logs: 5000, metrics: 5000 },
      pageSize: { default: 50, max: 200 },
      maxResultWindow: 10000,
      context: {
        maxIndexedKeys: 50,
        maxKeysPerSearch: 5,
        maxValuesPerKey: 10,
        windowWithoutServiceHours: 24,
        windowWithServiceDays: 7,
      },
      metrics: { maxPoints: 1500 },
      retentionDays: 30,
    });
  });

  it('GET /metrics needs the token when one is set, and reports the service figures', async () => {
    expect((await call(stack.service, 'GET', '/metrics')).statusCode).toBe(401);
    const res = await call(stack.service, 'GET', '/metrics', { token: 'metrics-token-0123456789' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/plain');
    for (const name of [
      'svc_ingest_requests_total{status="202"}',
      'svc_ingest_requests_total{status="429"}',
      'svc_ingest_items_total{kind="executions"}',
      'svc_broker_publish_seconds_bucket',
      'svc_pipeline_lag_messages',
      'svc_pipeline_rows_written_total',
      'svc_rejected_items_total',
      'svc_query_seconds_count{route="/api/executions"}',
      // prom-client's own process figures.
      'svc_process_cpu_user_seconds_total',
      'svc_nodejs_eventloop_lag_seconds',
      'svc_nodejs_heap_size_used_bytes',
    ]) {
      expect(res.body).toContain(name);
    }
  });
});

describe('every error code of the contract, through HTTP', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startStack('codes', { BODY_MAX_BYTES: '2048', PUBLISH_TIMEOUT_MS: '500' });
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('produces each code with its status and the error body', async () => {
    const seen = new Map<ErrorCode, number>();
    const expectCode = async (res: Awaited<ReturnType<typeof call>>, code: ErrorCode) => {
      expect(errorCode(res), res.body).toBe(code);
      expect(res.statusCode).toBe(ERROR_STATUS[code]);
      const body = res.json().error;
      expect(body).toEqual({
        code,
        message: expect.any(String),
        details: expect.any(Array),
        requestId: res.headers['x-request-id'],
      });
      seen.set(code, res.statusCode);
    };
    const s = stack.service;
    const owner = await signup(s);
    await call(s, 'PATCH', '/api/workspace/settings', {
      token: owner.session,
      body: { indexedContextKeys: ['customer.id'] },
    });

    await expectCode(
      await call(s, 'GET', '/api/executions?pageSize=0', { token: owner.testKey }),
      'VALIDATION_ERROR',
    );
    await expectCode(
      await call(s, 'GET', '/api/executions?context.user.id=1', { token: owner.testKey }),
      'CONTEXT_KEY_NOT_ALLOWED',
    );
    await expectCode(
      await call(s, 'GET', `/api/executions?context.customer.id=1&from=${Date.now() - 3 * 86_400_000}`, {
        token: owner.testKey,
      }),
      'CONTEXT_QUERY_TOO_BROAD',
    );
    await expectCode(await call(s, 'GET', '/api/executions'), 'UNAUTHORIZED');
    await expectCode(
      await call(s, 'GET', '/api/executions?mode=live', { token: owner.testKey }),
      'FORBIDDEN',
    );
    // FORBIDDEN outranks VALIDATION_ERROR; UNAUTHORIZED outranks both.
    await expectCode(
      await call(s, 'GET', '/api/executions?mode=live&pageSize=0', { token: owner.testKey }),
      'FORBIDDEN',
    );
    await expectCode(await call(s, 'GET', '/api/executions?mode=live&pageSize=0'), 'UNAUTHORIZED');
    await expectCode(await call(s, 'GET', '/api/executions/nope', { token: owner.testKey }), 'NOT_FOUND');
    await expectCode(
      await call(s, 'POST', '/api/auth/signup', { body: { email: owner.email, password: 'long enough pw' } }),
      'CONFLICT',
    );
    await expectCode(
      await ingest(s, owner.testKey, { executions: [execution({ context: { pad: 'x'.repeat(3000) } })] }),
      'PAYLOAD_TOO_LARGE',
    );
    await expectCode(
      await ingest(s, owner.testKey, 'x', { 'content-type': 'text/plain' }),
      'UNSUPPORTED_MEDIA_TYPE',
    );
    const email = uniqueEmail();
    for (let i = 0; i < 5; i++)
      await call(s, 'POST', '/api/auth/login', { body: { email, password: 'wrong password' } });
    await expectCode(
      await call(s, 'POST', '/api/auth/login', { body: { email, password: 'wrong password' } }),
      'RATE_LIMITED',
    );

    // A damaged Parquet file in the workspace's partition: a fault, answered without internals.
    await ingest(s, owner.testKey, { executions: [execution()] });
    await eventually(
      async () => (await call(s, 'GET', '/api/executions', { token: owner.testKey })).json().total,
      (n) => n === 1,
    );
    const hour = new Date();
    const dir = path.join(
      stack.config.dataDir,
      'executions',
      `ws=${owner.workspaceId}`,
      'mode=test',
      `date=${hour.toISOString().slice(0, 10)}`,
      `hour=${hour.toISOString().slice(11, 13)}`,
    );
    await fs.mkdir(dir, { recursive: true });
    await fs.writeFile(path.join(dir, 'zz-damaged.parquet'), 'this is not parquet');
    const broken = await call(s, 'GET', '/api/executions', { token: owner.testKey });
    await expectCode(broken, 'INTERNAL_ERROR');
    expect(broken.json().error.message).not.toMatch(/parquet|duckdb|zz-damaged/i);
    await fs.rm(path.join(dir, 'zz-damaged.parquet'));

    await stack.nats.stop();
    await eventually(
      async () => s.broker.isConnected(),
      (c) => !c,
    );
    const down = await ingest(s, owner.testKey, { executions: [] });
    await expectCode(down, 'UNAVAILABLE');
    expect(down.headers['retry-after']).toBeDefined();
    await stack.nats.start();

    expect([...seen.keys()].sort()).toEqual(Object.keys(ERROR_STATUS).sort());
  });
});

describe('secrets never reach the log', () => {
  it('a run that signs up, logs in, creates keys and ingests logs no key, token or password', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const base = await startStack('logs', {}, { role: 'api' });
    const config = testConfig(path.join(base.dir, 'data2'), base.nats.url, { LOG_LEVEL: 'trace' });
    const service = await startService(config, { log: createLogger(config, sink) });
    try {
      const owner = await signup(service);
      const login = await call(service, 'POST', '/api/auth/login', {
        body: { email: owner.email, password: owner.password },
      });
      const session = login.json().session.token as string;
      await call(service, 'POST', '/api/auth/login', {
        body: { email: owner.email, password: 'a wrong password here' },
      });
      const live = (
        await call(service, 'POST', '/api/keys', { token: session, body: { name: 'l', mode: 'live' } })
      ).json().key as string;
      await call(service, 'POST', '/api/workspace/members', {
        token: session,
        body: { email: uniqueEmail(), role: 'member', password: 'member secret password' },
      });
      await ingest(service, owner.testKey, {
        executions: [
          execution({
            request: { headers: { authorization: 'Bearer header-secret-value' } },
            context: { password: 'ctx-secret' },
          }),
        ],
      });
      await ingest(service, live, { resource: { mode: 'live' }, executions: [] });
      await call(service, 'GET', '/api/executions', { headers: { cookie: `svc_session=${session}` } });
      await call(service, 'GET', '/api/executions', { headers: { 'x-api-key': owner.testKey } });
      // A key where no key belongs (a path, a query string, a body field): echoed nowhere in the log either.
      const echoed = [
        await call(service, 'DELETE', `/api/keys/${live}`, { token: session }),
        await call(service, 'GET', `/api/executions/${owner.testKey}`, { token: session }),
      ];
      // Nor in the answers, which name the id they did not find.
      for (const res of echoed) {
        expect(res.statusCode).toBe(404);
        expect(res.body).not.toMatch(/svc_(test|live)_[A-Za-z0-9]{32}/);
      }
      await call(service, 'GET', `/api/executions?api_key=${live}&q=${encodeURIComponent(owner.testKey)}`, {
        token: session,
      });
      await call(service, 'PATCH', '/api/workspace/settings', { token: session, body: { note: live } });
      await service.pipeline!.drained();
    } finally {
      await service.stop();
      await base.close();
    }
    const log = lines.join('');
    expect(log).toContain('request completed');
    expect(log.length).toBeGreaterThan(1000);
    for (const secret of [
      /svc_(test|live|sess)_[A-Za-z0-9]{32}/,
      /correct horse battery staple/,
      /a wrong password here/,
      /member secret password/,
      /header-secret-value/,
      /ctx-secret/,
    ]) {
      expect(log).not.toMatch(secret);
    }
  });
});
