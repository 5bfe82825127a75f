import { createHash } from 'node:crypto';
import { decodeTime, isValid } from 'ulid';
import { describe, expect, it } from 'vitest';
import type { ClassifyRules } from '../../pipeline/classify.js';
import { type ProcessContext, processPayload } from '../../pipeline/process-payload.js';
import type { ExecutionRecord, ProcessedPayload } from '../../schemas/records.js';

const CTX: ProcessContext = { mode: 'test', requestId: 'req_01', receivedAt: Date.UTC(2026, 10, 21, 10, 5) };
const T0 = Date.UTC(2026, 10, 21, 10, 0, 0, 123);
const LIVE_KEY = 'svc_live_AbCdEfGhIjKlMnOpQrStUvWxYz012345';
const TEST_KEY = 'svc_test_ZyXwVuTsRqPoNmLkJiHgFeDcBa987654';
const SESSION = 'svc_sess_0123456789abcdefABCDEF';

type Obj = Record<string, unknown>;

function exec(overrides: Obj = {}): Obj {
  return { service: 'checkout', endpoint: '/pay', startedAt: T0, durationMs: 12.5, ...overrides };
}

function run(body: unknown, ctx: ProcessContext = CTX): ProcessedPayload {
  return processPayload(body, ctx);
}

/** One valid execution; fails the test when it is rejected. */
function one(overrides: Obj = {}): ExecutionRecord {
  const out = run({ executions: [exec(overrides)] });
  expect(out.rejections).toEqual([]);
  expect(out.executions).toHaveLength(1);
  return out.executions[0]!;
}

function rejectionOf(overrides: Obj) {
  const out = run({ executions: [exec(overrides)] });
  expect(out.executions).toHaveLength(0);
  expect(out.rejections).toHaveLength(1);
  return out.rejections[0]!;
}

function nested(depth: number): Obj {
  let node: Obj = { leaf: 1 };
  for (let i = 1; i < depth; i++) node = { [`l${i}`]: node };
  return node;
}

describe('processPayload: a valid execution', () => {
  it('maps every field of a full execution to its record', () => {
    const record = one({
      executionId: 'exec-1',
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: '00f067aa0ba902b7',
      parentSpanId: 'a3ce929d0e0e4736',
      environment: 'production',
      source: 'worker',
      method: 'post',
      startedAt: '2026-11-21T12:00:00.123+02:00',
      statusCode: 201,
      request: { route: '/pay/:id', headers: { accept: 'application/json' }, query: { page: '2' } },
      response: { headers: { 'content-type': 'application/json' }, fields: { data: { id: 7 } } },
      context: { tenant: { plan: 'pro' }, beta: true },
      fingerprint: ['{{default}}', 'pay'],
      unknownField: 'ignored',
    });
    expect(record).toEqual({
      executionId: 'exec-1',
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: '00f067aa0ba902b7',
      parentSpanId: 'a3ce929d0e0e4736',
      service: 'checkout',
      environment: 'production',
      source: 'worker',
      endpoint: '/pay',
      method: 'POST',
      startedAt: T0,
      durationMs: 12.5,
      statusCode: 201,
      outcome: 'success',
      outcomeReason: 'status',
      exceptionType: null,
      exceptionMessage: null,
      context: JSON.stringify({ tenant: { plan: 'pro' }, beta: true }),
      contextTree: { tenant: { plan: 'pro' }, beta: true },
      request: JSON.stringify({
        route: '/pay/:id',
        headers: { accept: 'application/json' },
        query: { page: '2' },
      }),
      response: JSON.stringify({ headers: { 'content-type': 'application/json' }, fields: { 'data.id': 7 } }),
      exception: null,
      outcomeEvidence: null,
      // No workspace, no fingerprint stage (and only failures are grouped into issues).
      fingerprint: null,
      issueId: null,
      failureType: null,
      endpointTemplate: null,
      truncated: false,
    });
  });

  it('fingerprints a failed execution, and with a workspace gives it an issue and the payload a summary per issue', () => {
    const failed = (endpoint: string, message: string, startedAt: number, id: string) =>
      exec({
        executionId: id,
        endpoint,
        method: 'post',
        startedAt,
        statusCode: 500,
        exception: { type: 'NotFoundError', message },
      });
    const body = {
      executions: [
        failed('/orders/12', 'order 123 not found', T0 + 5, 'a'),
        failed('/orders/99', 'order 456 not found', T0, 'b'),
        exec({ endpoint: '/orders/7', statusCode: 200 }),
      ],
    };
    // Without a workspace (POST /api/ingest/validate, or the stage turned off) there is no fingerprint stage.
    const withoutWs = run(body);
    expect(withoutWs.executions[0]).toMatchObject({
      failureType: null,
      fingerprint: null,
      endpointTemplate: null,
      issueId: null,
    });
    expect(withoutWs.issues).toEqual([]);
    const out = run(body, { ...CTX, workspaceId: 'ws_abc' });
    expect(out.executions[0]).toMatchObject({
      failureType: 'exception',
      fingerprint: JSON.stringify([
        'checkout',
        '/orders/:id',
        'exception',
        'NotFoundError',
        'order <num> not found',
        '',
      ]),
      endpointTemplate: '/orders/:id',
    });
    const [a, b, ok] = out.executions;
    expect(a!.issueId).toMatch(/^iss_[0-9a-f]{16}$/);
    expect(b!.issueId).toBe(a!.issueId);
    expect(ok!.issueId).toBeNull();
    expect(ok!.endpointTemplate).toBeNull(); // only failures are templated
    expect(out.issues).toEqual([
      {
        issueId: a!.issueId,
        fingerprintParts: [
          'checkout',
          '/orders/:id',
          'exception',
          'NotFoundError',
          'order <num> not found',
          '',
        ],
        title: 'NotFoundError in POST /orders/:id',
        service: 'checkout',
        endpoint: '/orders/:id',
        method: 'POST',
        failureType: 'exception',
        exceptionType: 'NotFoundError',
        environments: ['default'],
        count: 2,
        firstStartedAt: T0,
        lastStartedAt: T0 + 5,
        lastExecutionId: 'a',
      },
    ]);
  });

  it('fills defaults: source http, environment default, nulls for absent optional fields', () => {
    const record = one({ traceId: null, method: null });
    expect(record.source).toBe('http');
    expect(record.environment).toBe('default');
    expect(record.traceId).toBeNull();
    expect(record.method).toBeNull();
    expect(record.statusCode).toBeNull();
    expect(record.context).toBeNull();
    expect(record.request).toBeNull();
  });

  it('converts RFC 3339 timestamps with Z or an offset, and keeps epoch milliseconds', () => {
    expect(one({ startedAt: '2026-11-21T10:00:00.123Z' }).startedAt).toBe(T0);
    expect(one({ startedAt: '2026-11-21T05:30:00.123-04:30' }).startedAt).toBe(T0);
    expect(one({ startedAt: '2026-11-21T10:00:00.123456789Z' }).startedAt).toBe(T0);
    expect(one({ startedAt: T0 + 0.7 }).startedAt).toBe(T0);
  });
});

describe('processPayload: resource defaults and mode', () => {
  it('fills service and environment from the resource where the item omits them', () => {
    const out = run({
      resource: { service: 'billing', environment: 'staging' },
      executions: [
        { endpoint: '/a', startedAt: T0, durationMs: 1 },
        exec({ service: 'own', environment: 'prod' }),
        { endpoint: '/c', startedAt: T0, durationMs: 1, service: null },
      ],
      logs: [{ timestamp: T0, level: 'info', message: 'hi' }],
      metrics: [{ name: 'req', type: 'counter', value: 1, timestamp: T0 }],
    });
    expect(out.rejections).toEqual([]);
    expect(out.executions.map((e) => [e.service, e.environment])).toEqual([
      ['billing', 'staging'],
      ['own', 'prod'],
      ['billing', 'staging'],
    ]);
    expect([out.logs[0]!.service, out.logs[0]!.environment]).toEqual(['billing', 'staging']);
    expect([out.metrics[0]!.service, out.metrics[0]!.environment]).toEqual(['billing', 'staging']);
  });

  it('defaults environment to "default" for logs and metrics too', () => {
    const out = run({
      logs: [{ timestamp: T0, level: 'info', message: 'hi', service: 's' }],
      metrics: [{ name: 'req', type: 'gauge', value: 3, timestamp: T0, service: 's' }],
    });
    expect(out.logs[0]!.environment).toBe('default');
    expect(out.metrics[0]!.environment).toBe('default');
  });

  it('rejects a missing service when the resource has none either', () => {
    const rejection = rejectionOf({ service: undefined });
    expect(rejection.code).toBe('VALIDATION_ERROR');
    expect(rejection.details.map((d) => d.path)).toEqual(['service']);
  });

  it('reports a bad resource value under the item field it fills', () => {
    const out = run({
      resource: { service: 42 },
      executions: [{ endpoint: '/a', startedAt: T0, durationMs: 1 }],
    });
    expect(out.rejections).toEqual([
      {
        kind: 'executions',
        index: 0,
        code: 'VALIDATION_ERROR',
        details: [expect.objectContaining({ path: 'service' })],
      },
    ]);
  });

  it('rejects an item of the other mode with FORBIDDEN, keeping the others', () => {
    const out = run({
      executions: [exec({ mode: 'live' }), exec({ mode: 'test' }), exec()],
      logs: [{ timestamp: T0, level: 'info', message: 'x', service: 's', mode: 'live' }],
      metrics: [{ name: 'm', type: 'counter', value: 1, timestamp: T0, service: 's', mode: 'live' }],
    });
    expect(out.executions).toHaveLength(2);
    expect(out.logs).toHaveLength(0);
    expect(out.metrics).toHaveLength(0);
    expect(out.rejections).toEqual([
      {
        kind: 'executions',
        index: 0,
        code: 'FORBIDDEN',
        details: [expect.objectContaining({ path: 'mode' })],
      },
      { kind: 'logs', index: 0, code: 'FORBIDDEN', details: [expect.objectContaining({ path: 'mode' })] },
      { kind: 'metrics', index: 0, code: 'FORBIDDEN', details: [expect.objectContaining({ path: 'mode' })] },
    ]);
  });

  it('applies the resource mode to every item that names none', () => {
    const out = run({ resource: { mode: 'live' }, executions: [exec(), exec({ mode: 'test' })] });
    expect(out.executions).toHaveLength(1);
    expect(out.rejections).toEqual([
      {
        kind: 'executions',
        index: 0,
        code: 'FORBIDDEN',
        details: [expect.objectContaining({ path: 'mode' })],
      },
    ]);
    expect(run({ executions: [exec({ mode: 'live' })] }, { ...CTX, mode: 'live' }).executions).toHaveLength(
      1,
    );
  });

  it('treats a mode that is neither test nor live as a validation error', () => {
    const rejection = rejectionOf({ mode: 'staging' });
    expect(rejection.code).toBe('VALIDATION_ERROR');
    expect(rejection.details[0]!.path).toBe('mode');
  });
});

describe('processPayload: duration', () => {
  it('accepts duration as an alias of durationMs, in milliseconds', () => {
    expect(one({ durationMs: undefined, duration: 42 }).durationMs).toBe(42);
  });

  it('prefers durationMs when both are given', () => {
    expect(one({ durationMs: 5, duration: 42 }).durationMs).toBe(5);
  });

  it('rejects an execution with neither, pointing at durationMs, along with other errors', () => {
    const rejection = rejectionOf({ durationMs: undefined, statusCode: 99 });
    expect(rejection.details.map((d) => d.path).sort()).toEqual(['durationMs', 'statusCode']);
  });

  it('bounds both to 0 – 86,400,000', () => {
    expect(one({ durationMs: 86_400_000 }).durationMs).toBe(86_400_000);
    expect(rejectionOf({ durationMs: -1 }).details[0]!.path).toBe('durationMs');
    expect(rejectionOf({ durationMs: undefined, duration: 86_400_001 }).details[0]!.path).toBe('duration');
  });
});

describe('processPayload: validation rejections', () => {
  it('lists each invalid field by dotted path, with the index in its array', () => {
    const out = run({
      executions: [
        exec(),
        exec({
          statusCode: 700,
          executionId: 'has space',
          exception: { type: 'E', message: 'm', frames: [{ line: 3 }, { line: 'x' }] },
          source: 'cron',
        }),
      ],
    });
    expect(out.executions).toHaveLength(1);
    expect(out.rejections).toHaveLength(1);
    const rejection = out.rejections[0]!;
    expect(rejection).toMatchObject({ kind: 'executions', index: 1, code: 'VALIDATION_ERROR' });
    expect(rejection.details.map((d) => d.path).sort()).toEqual([
      'exception.frames.1.line',
      'executionId',
      'source',
      'statusCode',
    ]);
    for (const detail of rejection.details) expect(detail.message.length).toBeGreaterThan(0);
  });

  it('rejects a non-object item at the empty path', () => {
    const out = run({ executions: [null, 3, exec()], logs: ['x'], metrics: [[]] });
    expect(out.executions).toHaveLength(1);
    expect(out.rejections).toEqual([
      {
        kind: 'executions',
        index: 0,
        code: 'VALIDATION_ERROR',
        details: [{ path: '', message: 'expected an object' }],
      },
      {
        kind: 'executions',
        index: 1,
        code: 'VALIDATION_ERROR',
        details: [{ path: '', message: 'expected an object' }],
      },
      {
        kind: 'logs',
        index: 0,
        code: 'VALIDATION_ERROR',
        details: [{ path: '', message: 'expected an object' }],
      },
      {
        kind: 'metrics',
        index: 0,
        code: 'VALIDATION_ERROR',
        details: [{ path: '', message: 'expected an object' }],
      },
    ]);
  });

  it.each<[unknown, string]>([
    ['2026-11-21T10:00:00', 'no time zone'],
    ['2026-13-01T00:00:00Z', 'month 13'],
    ['2026-02-29T00:00:00Z', 'not a leap year'],
    ['21 Nov 2026 10:00:00 GMT', 'not RFC 3339'],
    [-1, 'before the epoch'],
    [true, 'not a string or number'],
  ])('rejects startedAt %j (%s)', (startedAt) => {
    expect(rejectionOf({ startedAt }).details.map((d) => d.path)).toEqual(['startedAt']);
  });

  it('enforces the string bounds of service, environment, endpoint and ids', () => {
    expect(rejectionOf({ service: 'x'.repeat(129) }).details[0]!.path).toBe('service');
    expect(rejectionOf({ environment: 'x'.repeat(65) }).details[0]!.path).toBe('environment');
    expect(rejectionOf({ endpoint: '' }).details[0]!.path).toBe('endpoint');
    expect(rejectionOf({ endpoint: '/'.repeat(513) }).details[0]!.path).toBe('endpoint');
    expect(rejectionOf({ traceId: 't'.repeat(129) }).details[0]!.path).toBe('traceId');
    expect(rejectionOf({ executionId: 'e'.repeat(129) }).details[0]!.path).toBe('executionId');
    expect(one({ executionId: 'a.B_c:d-9' }).executionId).toBe('a.B_c:d-9');
  });

  it('rejects a status code outside 100–599 or not an integer', () => {
    expect(rejectionOf({ statusCode: 99 }).details[0]!.path).toBe('statusCode');
    expect(rejectionOf({ statusCode: 600 }).details[0]!.path).toBe('statusCode');
    expect(rejectionOf({ statusCode: 200.5 }).details[0]!.path).toBe('statusCode');
  });
});

describe('processPayload: context limits', () => {
  it('accepts depth 8 and rejects depth 9, at the path of the offending object', () => {
    expect(one({ context: nested(8) }).context).toBe(JSON.stringify(nested(8)));
    const rejection = rejectionOf({ context: nested(9) });
    expect(rejection.details).toEqual([
      { path: 'context.l8.l7.l6.l5.l4.l3.l2.l1', message: 'nested deeper than 8 levels' },
    ]);
  });

  it('accepts 256 leaves and rejects 257', () => {
    const leaves = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, i]));
    expect(one({ context: leaves(256) }).context).not.toBeNull();
    expect(rejectionOf({ context: leaves(257) }).details).toEqual([
      { path: 'context', message: 'at most 256 leaves, got 257' },
    ]);
  });

  it('accepts exactly 64 KiB of JSON and rejects one character more', () => {
    // Several strings, since one longer than 8192 characters would be truncated after validation.
    const context: Record<string, string> = {};
    for (let i = 0; i < 8; i++) context[`k${i}`] = 'x'.repeat(8000);
    context.z = '';
    context.z = 'x'.repeat(65_536 - JSON.stringify(context).length);
    expect(one({ context }).context).toHaveLength(65_536);
    context.z += 'x';
    expect(rejectionOf({ context }).details).toEqual([
      { path: 'context', message: 'at most 65536 characters of JSON' },
    ]);
  });

  it('counts escaping in the serialized size', () => {
    // 20,000 quotes are 40,000 characters once escaped.
    expect(rejectionOf({ context: { a: '"'.repeat(20_000), b: '"'.repeat(20_000) } }).details[0]!.path).toBe(
      'context',
    );
  });

  it('rejects arrays anywhere in the context, and a context that is not an object', () => {
    expect(rejectionOf({ context: { user: { roles: ['a'] } } }).details).toEqual([
      { path: 'context.user.roles', message: 'arrays are not allowed: use an object or a scalar' },
    ]);
    expect(rejectionOf({ context: ['a'] }).details[0]!.path).toBe('context');
    expect(rejectionOf({ context: 'text' }).details[0]!.path).toBe('context');
  });

  it('accepts null, boolean, number and string leaves', () => {
    const context = { a: null, b: false, c: 1.5, d: 's', e: { f: {} } };
    expect(one({ context }).context).toBe(JSON.stringify(context));
  });
});

describe('processPayload: classification', () => {
  it('uses the SDK outcome first (sdk), over exceptions and status codes', () => {
    const record = one({ outcome: 'success', statusCode: 500, exception: { type: 'E', message: 'm' } });
    expect([record.outcome, record.outcomeReason]).toEqual(['success', 'sdk']);
    const unknown = one({ outcome: 'unknown', statusCode: 200 });
    expect([unknown.outcome, unknown.outcomeReason]).toEqual(['unknown', 'sdk']);
  });

  it('fails an unhandled exception (exception), copying its type and message', () => {
    const record = one({ statusCode: 200, exception: { type: 'TypeError', message: 'x is undefined' } });
    expect(record).toMatchObject({
      outcome: 'failed',
      outcomeReason: 'exception',
      exceptionType: 'TypeError',
      exceptionMessage: 'x is undefined',
    });
    expect(one({ exception: { type: 'E', message: 'm', handled: false } }).outcomeReason).toBe('exception');
  });

  it('does not fail on a handled exception alone', () => {
    const record = one({ statusCode: 200, exception: { type: 'E', message: 'm', handled: true } });
    expect([record.outcome, record.outcomeReason]).toEqual(['success', 'status']);
    expect(record.exceptionType).toBe('E');
  });

  it('fails a 5xx status (status_5xx)', () => {
    const record = one({ statusCode: 503, outcomeEvidence: [{ kind: 'grpc', verdict: 'failed' }] });
    expect([record.outcome, record.outcomeReason]).toEqual(['failed', 'status_5xx']);
  });

  it('fails on the first failing evidence (evidence:<kind>), before response fields', () => {
    const record = one({
      statusCode: 200,
      outcomeEvidence: [
        { kind: 'http', verdict: 'success' },
        { kind: 'grpc', detail: 'UNAVAILABLE', verdict: 'failed' },
        { kind: 'db', verdict: 'failed' },
      ],
      response: { fields: { ok: false } },
    });
    expect([record.outcome, record.outcomeReason]).toEqual(['failed', 'evidence:grpc']);
  });

  it.each([
    [{ ok: false }, 'field:ok'],
    [{ success: false }, 'field:success'],
    [{ data: { result: { success: false } } }, 'field:data.result.success'],
    [{ error: 'card declined' }, 'field:error'],
    [{ errors: 2 }, 'field:errors'],
    [{ meta: { count: 1 }, a: { error: 'first' }, ok: false }, 'field:a.error'],
  ])('fails a 200 whose response fields %j say so (%s)', (fields, reason) => {
    const record = one({ statusCode: 200, response: { fields } });
    expect([record.outcome, record.outcomeReason]).toEqual(['failed', reason]);
  });

  it.each([
    [{ ok: true, success: 'false' }],
    [{ error: '' }],
    [{ error: null }],
    [{ errors: 0 }],
    [{ okay: false, notsuccess: false }],
    [{ 'ok.detail': false }],
  ])('does not fail on fields %j', (fields) => {
    const record = one({ statusCode: 200, response: { fields } });
    expect([record.outcome, record.outcomeReason]).toEqual(['success', 'status']);
  });

  it('succeeds a 1xx–4xx status (status)', () => {
    for (const statusCode of [101, 200, 302, 404, 499]) {
      const record = one({ statusCode });
      expect([record.outcome, record.outcomeReason]).toEqual(['success', 'status']);
    }
  });

  it('is unknown without evidence (no_evidence)', () => {
    const record = one({
      outcomeEvidence: [{ kind: 'http', verdict: 'success' }],
      response: { fields: { ok: true } },
    });
    expect([record.outcome, record.outcomeReason]).toEqual(['unknown', 'no_evidence']);
  });

  it('lets workspace rules decide first, on the normalized execution', () => {
    const seen: unknown[] = [];
    const rules: ClassifyRules = (execution) => {
      seen.push([execution.method, execution.response?.fields, execution.executionId]);
      return execution.endpoint === '/health' ? { outcome: 'success', reason: 'rule:0' } : null;
    };
    const out = processPayload(
      {
        executions: [
          exec({
            endpoint: '/health',
            method: 'get',
            outcome: 'failed',
            response: { fields: { a: { b: 1 } } },
          }),
          exec({ statusCode: 500 }),
        ],
      },
      CTX,
      { classifyRules: rules },
    );
    expect(out.executions.map((e) => [e.outcome, e.outcomeReason])).toEqual([
      ['success', 'rule:0'],
      ['failed', 'status_5xx'],
    ]);
    expect(seen[0]).toEqual(['GET', { 'a.b': 1 }, out.executions[0]!.executionId]);
  });
});

describe('processPayload: scrubbing', () => {
  it('drops credential headers in any letter case, keeping the rest', () => {
    const record = one({
      request: {
        headers: {
          Authorization: `Bearer ${LIVE_KEY}`,
          COOKIE: 'sid=abc123secretcookie',
          'X-Api-Key': TEST_KEY,
          'proxy-authorization': 'Basic dXNlcjpwYXNzd29yZA==',
          accept: 'text/html',
        },
      },
      response: { headers: { 'Set-Cookie': ['a=1', 'sid=abc123secretcookie'], 'content-type': 'text/html' } },
    });
    expect(JSON.parse(record.request!)).toEqual({ headers: { accept: 'text/html' } });
    expect(JSON.parse(record.response!)).toEqual({ headers: { 'content-type': 'text/html' } });
    for (const secret of [LIVE_KEY, TEST_KEY, 'abc123secretcookie', 'dXNlcjpwYXNzd29yZA==']) {
      expect(JSON.stringify(record)).not.toContain(secret);
    }
  });

  it('redacts values under sensitive keys in context, headers, query and response fields, whole', () => {
    const record = one({
      context: {
        user: { id: 7, password: 'hunter2hunter2', credentials: { apiKey: 'k-123456' } },
        passwd: 'p4ss',
        db_secret: { host: 'h', pw: 'nested-secret-value' },
        refresh_token: null,
        'api-key': 'dash-key-value',
        api_key: 'underscore-key-value',
        sessionCookie: 'cookie-value',
        Authorization: 'auth-value',
        plan: 'pro',
      },
      request: {
        headers: { 'x-auth-token': 'tok-value' },
        query: { access_token: 'query-token', q: 'shoes' },
      },
      response: {
        headers: { 'x-client-secret': 'resp-secret' },
        fields: { auth: { token: 'field-token' }, ok: true },
      },
    });
    expect(JSON.parse(record.context!)).toEqual({
      user: { id: 7, password: '[redacted]', credentials: { apiKey: '[redacted]' } },
      passwd: '[redacted]',
      db_secret: '[redacted]',
      refresh_token: '[redacted]',
      'api-key': '[redacted]',
      api_key: '[redacted]',
      sessionCookie: '[redacted]',
      Authorization: '[redacted]',
      plan: 'pro',
    });
    expect(JSON.parse(record.request!)).toEqual({
      headers: { 'x-auth-token': '[redacted]' },
      query: { access_token: '[redacted]', q: 'shoes' },
    });
    expect(JSON.parse(record.response!)).toEqual({
      headers: { 'x-client-secret': '[redacted]' },
      fields: { 'auth.token': '[redacted]', ok: true },
    });
    const text = JSON.stringify(record);
    for (const secret of [
      'hunter2hunter2',
      'k-123456',
      'p4ss',
      'nested-secret-value',
      'dash-key-value',
      'underscore-key-value',
      'cookie-value',
      'auth-value',
      'tok-value',
      'query-token',
      'resp-secret',
      'field-token',
    ]) {
      expect(text).not.toContain(secret);
    }
  });

  it('redacts sensitive keys in log attributes, but not in other structures', () => {
    const out = run({
      logs: [
        {
          timestamp: T0,
          level: 'info',
          message: 'login',
          service: 's',
          attributes: { user: 'ann', password: 'hunter2hunter2', nested: [{ secretAnswer: 'blue' }] },
        },
      ],
    });
    expect(JSON.parse(out.logs[0]!.attributes!)).toEqual({
      user: 'ann',
      password: '[redacted]',
      nested: [{ secretAnswer: '[redacted]' }],
    });
    // The exception's own keys are the schema's, not the client's: "message" stays.
    expect(one({ exception: { type: 'TokenError', message: 'bad' } }).exceptionMessage).toBe('bad');
  });

  it('replaces service keys and session tokens in every string of every record', () => {
    const out = run({
      resource: { service: 'checkout' },
      executions: [
        {
          traceId: `t-${TEST_KEY}`,
          endpoint: `/keys/${LIVE_KEY}`,
          method: 'get',
          startedAt: T0,
          durationMs: 1,
          request: {
            route: `/r/${LIVE_KEY}`,
            headers: { 'x-forwarded': [`a ${LIVE_KEY}`, 'b'] },
            query: { k: LIVE_KEY },
          },
          response: { fields: { note: `see ${SESSION}` } },
          context: { deep: { deeper: `key=${LIVE_KEY}&other=${TEST_KEY}` }, [LIVE_KEY]: 1 },
          exception: {
            type: 'AuthError',
            message: `invalid key ${LIVE_KEY}`,
            stack: `at check (${TEST_KEY})`,
            frames: [{ function: `fn_${SESSION}` }],
          },
          outcomeEvidence: [{ kind: 'auth', detail: LIVE_KEY, verdict: 'failed' }],
          fingerprint: [LIVE_KEY],
          logs: [
            { timestamp: T0, level: 'error', message: `rejected ${LIVE_KEY}`, attributes: { k: [TEST_KEY] } },
          ],
        },
      ],
      logs: [{ timestamp: T0, level: 'warn', message: `session ${SESSION}`, logger: LIVE_KEY }],
      metrics: [
        {
          name: 'auth_fail',
          type: 'counter',
          value: 1,
          timestamp: T0,
          tags: { key: LIVE_KEY },
          unit: TEST_KEY,
        },
      ],
    });
    expect(out.rejections).toEqual([]);
    const text = JSON.stringify(out);
    expect(text).not.toMatch(/svc_(test|live|sess)_[A-Za-z0-9]/);
    const record = out.executions[0]!;
    expect(record.endpoint).toBe('/keys/[redacted]');
    expect(record.exceptionMessage).toBe('invalid key [redacted]');
    expect(record.outcomeReason).toBe('exception');
    expect(JSON.parse(record.context!)).toEqual({
      deep: { deeper: 'key=[redacted]&other=[redacted]' },
      '[redacted]': 1,
    });
    expect(out.logs.map((l) => l.message)).toEqual(['rejected [redacted]', 'session [redacted]']);
    expect(out.metrics[0]!.tags).toBe('{"key":"[redacted]"}');
  });

  it('scrubs service keys out of rejection details too', () => {
    const rejection = rejectionOf({ context: { [LIVE_KEY]: ['x'] } });
    expect(rejection.details[0]!.path).toBe('context.[redacted]');
    expect(JSON.stringify(rejection)).not.toContain(LIVE_KEY);
  });

  it('scrubs and truncates copies, never the parsed payload itself', () => {
    const body = {
      executions: [
        exec({
          method: 'get',
          context: { password: 'hunter2', note: LIVE_KEY, long: 'x'.repeat(9000) },
          request: { headers: { Authorization: 'Bearer x' } },
        }),
      ],
    };
    const before = JSON.stringify(body);
    run(body);
    expect(JSON.stringify(body)).toBe(before);
  });
});

describe('processPayload: truncation', () => {
  it('cuts strings over 8192 characters anywhere and flags the record', () => {
    const record = one({
      exception: { type: 'E', message: 'm'.repeat(9000), stack: 's'.repeat(20_000) },
      context: { big: 'c'.repeat(8193) },
    });
    expect(record.truncated).toBe(true);
    expect(record.exceptionMessage).toHaveLength(8192);
    const exception = JSON.parse(record.exception!);
    expect(exception.stack).toBe('s'.repeat(8192));
    expect(JSON.parse(record.context!).big).toBe('c'.repeat(8192));
  });

  it('keeps a string of exactly 8192 characters and does not flag it', () => {
    const record = one({ exception: { type: 'E', message: 'm'.repeat(8192) } });
    expect(record.truncated).toBe(false);
    expect(record.exceptionMessage).toHaveLength(8192);
  });

  it('flags header values and log messages too', () => {
    expect(one({ request: { headers: { 'user-agent': 'u'.repeat(9000) } } }).truncated).toBe(true);
    const out = run({
      logs: [
        { timestamp: T0, level: 'info', message: 'l'.repeat(10_000), service: 's' },
        { timestamp: T0, level: 'info', message: 'short', service: 's' },
      ],
    });
    expect(out.logs.map((l) => [l.message.length, l.truncated])).toEqual([
      [8192, true],
      [5, false],
    ]);
  });

  it('never splits a surrogate pair', () => {
    const message = `${'a'.repeat(8191)}😀${'b'.repeat(100)}`;
    const record = one({ exception: { type: 'E', message } });
    expect(record.exceptionMessage).toBe('a'.repeat(8191));
  });
});

describe('processPayload: assigned execution ids', () => {
  const CROCKFORD_ULID = /^[0-7][0-9A-HJKMNP-TV-Z]{25}$/;

  function idsFor(requestId: string, count = 2): string[] {
    const out = processPayload(
      { executions: Array.from({ length: count }, () => exec()) },
      { ...CTX, requestId },
    );
    return out.executions.map((e) => e.executionId);
  }

  it('assigns a ULID whose time part is startedAt', () => {
    const [id] = idsFor('req_01', 1);
    expect(id).toMatch(CROCKFORD_ULID);
    expect(isValid(id!)).toBe(true);
    expect(decodeTime(id!)).toBe(T0);
  });

  it('takes the 80 random bits from sha256(requestId:index)', () => {
    const [, id] = idsFor('req_01');
    const digest = createHash('sha256').update('req_01:1').digest();
    let bits = BigInt(`0x${digest.subarray(0, 10).toString('hex')}`);
    let random = '';
    for (let i = 0; i < 16; i++) {
      random = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'[Number(bits & 31n)] + random;
      bits >>= 5n;
    }
    expect(id!.slice(10)).toBe(random);
  });

  it('gives the same ids when the same request is processed again', () => {
    expect(idsFor('req_01')).toEqual(idsFor('req_01'));
  });

  it('gives the same output when the very same parsed body is processed twice', () => {
    const body = {
      resource: { service: 'billing', environment: 'prod' },
      executions: [exec({ service: undefined, logs: [{ timestamp: T0, level: 'info', message: 'x' }] })],
      logs: [{ timestamp: T0, level: 'info', message: 'y' }],
      metrics: [{ name: 'm', type: 'counter', value: 1, timestamp: T0 }],
    };
    const first = run(body);
    expect(first.rejections).toEqual([]);
    expect(run(body)).toEqual(first);
  });

  it('gives different ids for another request or another index', () => {
    const [a, b] = idsFor('req_01');
    const [c] = idsFor('req_02');
    expect(new Set([a, b, c]).size).toBe(3);
  });

  it('keeps a client executionId', () => {
    expect(one({ executionId: 'client-id' }).executionId).toBe('client-id');
  });
});

describe('processPayload: inline logs', () => {
  it('inherits executionId, traceId, service and environment from the execution', () => {
    const out = run({
      resource: { environment: 'prod' },
      executions: [
        exec({
          traceId: 'trace-1',
          logs: [
            { timestamp: T0, level: 'INFO', message: 'started' },
            {
              timestamp: '2026-11-21T10:00:01Z',
              level: 'warn',
              message: 'own',
              service: 'other',
              traceId: 'trace-2',
            },
          ],
        }),
      ],
    });
    expect(out.rejections).toEqual([]);
    const id = out.executions[0]!.executionId;
    expect(out.logs).toEqual([
      {
        timestamp: T0,
        level: 'info',
        message: 'started',
        service: 'checkout',
        environment: 'prod',
        executionId: id,
        traceId: 'trace-1',
        spanId: null,
        logger: null,
        attributes: null,
        exception: null,
        truncated: false,
      },
      expect.objectContaining({ service: 'other', traceId: 'trace-2', executionId: id, environment: 'prod' }),
    ]);
  });

  it('drops an invalid inline log with a rejection under its execution, keeping the execution', () => {
    const out = run({
      executions: [
        exec(),
        exec({
          logs: [
            { timestamp: T0, level: 'info', message: 'ok' },
            { timestamp: T0, level: 'loud', message: 'bad level' },
            'not a log',
          ],
        }),
      ],
    });
    expect(out.executions).toHaveLength(2);
    expect(out.logs.map((l) => l.message)).toEqual(['ok']);
    expect(out.rejections).toEqual([
      {
        kind: 'executions',
        index: 1,
        code: 'VALIDATION_ERROR',
        details: [{ path: 'logs.1.level', message: expect.any(String) }],
      },
      {
        kind: 'executions',
        index: 1,
        code: 'VALIDATION_ERROR',
        details: [{ path: 'logs.2', message: 'expected an object' }],
      },
    ]);
  });

  it('orders logs: inline logs in execution order, then top-level logs', () => {
    const log = (message: string) => ({ timestamp: T0, level: 'info', message });
    const out = run({
      resource: { service: 's' },
      logs: [log('top-1'), log('top-2')],
      executions: [exec({ logs: [log('e0-a'), log('e0-b')] }), exec(), exec({ logs: [log('e2-a')] })],
    });
    expect(out.logs.map((l) => l.message)).toEqual(['e0-a', 'e0-b', 'e2-a', 'top-1', 'top-2']);
  });
});

describe('processPayload: logs', () => {
  it('normalizes a top-level log record', () => {
    const out = run({
      logs: [
        {
          timestamp: '2026-11-21T10:00:00.123Z',
          level: 'Error',
          message: 'boom',
          service: 's',
          environment: 'e',
          executionId: 'exec-9',
          traceId: 't',
          spanId: 'sp',
          logger: 'app.pay',
          attributes: { orderId: 5 },
          exception: { type: 'E', message: 'm', handled: true },
        },
      ],
    });
    expect(out.logs).toEqual([
      {
        timestamp: T0,
        level: 'error',
        message: 'boom',
        service: 's',
        environment: 'e',
        executionId: 'exec-9',
        traceId: 't',
        spanId: 'sp',
        logger: 'app.pay',
        attributes: '{"orderId":5}',
        exception: '{"type":"E","message":"m","handled":true}',
        truncated: false,
      },
    ]);
  });

  it('rejects an unknown level, a missing timestamp and non-object attributes', () => {
    const out = run({ logs: [{ level: 'verbose', message: 'm', service: 's', attributes: [1] }] });
    expect(out.rejections[0]!.details.map((d) => d.path).sort()).toEqual([
      'attributes',
      'level',
      'timestamp',
    ]);
  });
});

describe('processPayload: metrics', () => {
  it('stores counters and gauges in value', () => {
    const out = run({
      metrics: [
        {
          name: 'http.requests',
          type: 'counter',
          value: 3,
          timestamp: T0,
          service: 's',
          unit: '1',
          tags: { a: 'b' },
        },
        { name: 'queue_depth', type: 'gauge', value: -2.5, timestamp: T0, service: 's' },
      ],
    });
    expect(out.metrics).toEqual([
      {
        timestamp: T0,
        name: 'http.requests',
        type: 'counter',
        value: 3,
        histCount: null,
        histSum: null,
        histMin: null,
        histMax: null,
        unit: '1',
        service: 's',
        environment: 'default',
        tags: '{"a":"b"}',
      },
      expect.objectContaining({ name: 'queue_depth', type: 'gauge', value: -2.5, unit: null, tags: null }),
    ]);
  });

  it('stores a histogram in the hist columns', () => {
    const out = run({
      metrics: [
        {
          name: 'latency',
          type: 'histogram',
          value: { count: 4, sum: 10, min: 1, max: 4 },
          timestamp: T0,
          service: 's',
          unit: 'ms',
        },
      ],
    });
    expect(out.metrics[0]).toMatchObject({ value: null, histCount: 4, histSum: 10, histMin: 1, histMax: 4 });
  });

  it('rejects a value whose shape does not match the type', () => {
    const base = { name: 'm', timestamp: T0, service: 's' };
    const out = run({
      metrics: [
        { ...base, type: 'histogram', value: 3 },
        { ...base, type: 'counter', value: { count: 1, sum: 1, min: 1, max: 1 } },
        { ...base, type: 'histogram', value: { count: 1, sum: 1 } },
        { ...base, type: 'summary', value: 1 },
      ],
    });
    expect(out.metrics).toHaveLength(0);
    expect(out.rejections.map((r) => [r.index, r.details.map((d) => d.path)])).toEqual([
      [0, ['value']],
      [1, ['value']],
      [2, ['value.min', 'value.max']],
      [3, ['type']],
    ]);
  });

  it('checks the name pattern and length, and at most 20 tags', () => {
    const base = { type: 'counter', value: 1, timestamp: T0, service: 's' };
    const tags = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`t${i}`, 'v']));
    const out = run({
      metrics: [
        { ...base, name: '9lives' },
        { ...base, name: 'a'.repeat(201) },
        { ...base, name: 'ok', tags: tags(21) },
        { ...base, name: 'ok', tags: tags(20) },
        { ...base, name: 'ok', tags: { a: 1 } },
      ],
    });
    expect(out.metrics).toHaveLength(1);
    expect(out.rejections.map((r) => [r.index, r.details[0]!.path])).toEqual([
      [0, 'name'],
      [1, 'name'],
      [2, 'tags'],
      [4, 'tags.a'],
    ]);
  });
});

describe('processPayload: defensive envelope handling', () => {
  it('gives empty output for a body that is not an object', () => {
    for (const body of [null, 'x', 3, [exec()]]) {
      expect(processPayload(body, CTX)).toEqual({
        executions: [],
        logs: [],
        metrics: [],
        rejections: [],
        issues: [],
      });
    }
  });

  it('ignores item lists that are not arrays and a resource that is not an object', () => {
    const out = run({ resource: 'checkout', executions: { 0: exec() }, logs: null, metrics: [] });
    expect(out).toEqual({ executions: [], logs: [], metrics: [], rejections: [], issues: [] });
  });
});
