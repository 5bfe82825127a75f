import zlib from 'node:zlib';
import fc from 'fast-check';

/**
 * Bad requests, generated: for the fuzz test (test/integration/fuzz.int.test.ts, a short run) and the fuzz benchmark
 * (bench/fuzz.ts, the long one). Every route, with odd ids, odd query parameters, bodies that are invalid or
 * truncated JSON, wrong types at every level of the ingest envelope, deep nesting, huge strings, NUL and invalid
 * UTF-8, invalid gzip and gzip bombs, wrong content types, and odd headers and cookies. What a run checks: no
 * answer ≥ 500, no connection reset, and the service still ready after.
 */

export interface FuzzRequest {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
}

/** Every route the service has (api/routes), `:x` standing for an id. */
export const ROUTES: [FuzzRequest['method'], string][] = [
  ['DELETE', '/api/keys/:x'],
  ['DELETE', '/api/workspace/members/:x'],
  ['GET', '/api/auth/me'],
  ['GET', '/api/executions'],
  ['GET', '/api/executions/:x'],
  ['GET', '/api/executions/:x/logs'],
  ['GET', '/api/ingest/rejections'],
  ['GET', '/api/issues'],
  ['GET', '/api/issues/:x'],
  ['GET', '/api/issues/:x/activity'],
  ['GET', '/api/issues/:x/comments'],
  ['GET', '/api/keys'],
  ['GET', '/api/limits'],
  ['GET', '/api/logs'],
  ['GET', '/api/metrics/endpoints'],
  ['GET', '/api/metrics/names'],
  ['GET', '/api/metrics/overview'],
  ['GET', '/api/metrics/series'],
  ['GET', '/api/metrics/timeseries'],
  ['GET', '/api/openapi.json'],
  ['GET', '/api/workspace'],
  ['GET', '/api/workspace/members'],
  ['GET', '/api/workspace/settings'],
  ['GET', '/healthz'],
  ['GET', '/metrics'],
  ['GET', '/readyz'],
  ['PATCH', '/api/issues/:x'],
  ['PATCH', '/api/workspace/settings'],
  ['POST', '/api/auth/login'],
  ['POST', '/api/auth/logout'],
  ['POST', '/api/auth/signup'],
  ['POST', '/api/ingest'],
  ['POST', '/api/ingest/validate'],
  ['POST', '/api/issues/:x/comments'],
  ['POST', '/api/keys'],
  ['POST', '/api/workspace/members'],
  ['POST', '/v1/logs'],
  ['POST', '/v1/metrics'],
  ['POST', '/v1/traces'],
];

/** Query parameter names the routes take, and some they do not. */
const PARAMS = [
  'mode',
  'from',
  'to',
  'serviceName',
  'environment',
  'status',
  'endpoint',
  'method',
  'statusCode',
  'q',
  'sort',
  'page',
  'pageSize',
  'cursor',
  'issueId',
  'traceId',
  'metric',
  'interval',
  'groupBy',
  'compare',
  'limit',
  'name',
  'agg',
  'tags.region',
  'context.customer.id',
  'includeMatchedContext',
  'level',
  'assignee',
  'bogus',
  '',
];

const oddString = fc.oneof(
  { weight: 5, arbitrary: fc.string({ maxLength: 40 }) },
  { weight: 5, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  {
    weight: 5,
    arbitrary: fc.constantFrom(
      '',
      ' ',
      '..',
      '../../etc/passwd',
      '%00',
      '\u0000',
      '\uFFFF',
      '\uD800',
      'null',
      'undefined',
      '-1',
      '1e309',
      'NaN',
      '0x10',
      '9'.repeat(400),
      '[]',
      '{}',
      'ws_../x',
      'iss_zzzz',
      '2026-13-45T99:99:99Z',
      '*',
      '%',
      '%E0%A4%A',
    ),
  },
  { weight: 3, arbitrary: fc.integer().map(String) },
  // Past the server's header limits (414, 431): rarely, or they would hide every other case.
  { weight: 1, arbitrary: fc.constantFrom(2_000, 20_000).map((n) => 'x'.repeat(n)) },
);

/** Any JSON value, sometimes a huge string. */
const jsonValue = fc.oneof(
  { weight: 5, arbitrary: fc.jsonValue({ maxDepth: 4 }) },
  { weight: 1, arbitrary: fc.constantFrom(1_000, 100_000).map((n) => 'y'.repeat(n)) },
);

/** JSON text nested `depth` deep (as text: the generator's own JSON.stringify would overflow its stack). */
const deepText = (depth: number) => {
  let open = '';
  let close = '';
  for (let i = 0; i < depth; i++) {
    open += i % 2 === 0 ? '[' : '{"a":';
    close = (i % 2 === 0 ? ']' : '}') + close;
  }
  return `${open}1${close}`;
};

/** Deep nesting where the envelope's fields are. */
const deepBody = fc
  .tuple(fc.integer({ min: 10, max: 20_000 }), fc.constantFrom('executions', 'context', 'logs', 'resource'))
  .map(([depth, at]) =>
    Buffer.from(
      at === 'executions'
        ? `{"executions":${deepText(depth)}}`
        : at === 'resource'
          ? `{"resource":${deepText(depth)},"executions":[]}`
          : `{"executions":[{"service":"s","durationMs":1,"startedAt":"2026-11-24T00:00:00Z","${at}":${deepText(depth)}}]}`,
    ),
  );

/** An ingest envelope with a wrong type or value somewhere (each level's fields). */
const badEnvelope = fc
  .record(
    {
      executions: fc.oneof(
        jsonValue,
        fc.array(
          fc.record(
            {
              executionId: jsonValue,
              service: fc.oneof(fc.string(), jsonValue),
              startedAt: fc.oneof(fc.string(), fc.integer(), jsonValue),
              durationMs: fc.oneof(fc.double(), jsonValue),
              statusCode: fc.oneof(fc.integer({ min: -10, max: 1000 }), jsonValue),
              context: jsonValue,
              logs: jsonValue,
              spans: jsonValue,
            },
            { requiredKeys: [] },
          ),
          { maxLength: 5 },
        ),
      ),
      logs: jsonValue,
      metrics: jsonValue,
      resource: jsonValue,
    },
    { requiredKeys: [] },
  )
  .map((o) => Buffer.from(JSON.stringify(o)));

const invalidJson = fc.oneof(
  fc.string({ maxLength: 200 }).map((s) => Buffer.from(s)),
  fc
    .constantFrom('{', '{"executions":[', '[1,2', '{"a":}', 'nul', '"\\u12"', '{"a":1}}', '\u0000{}')
    .map((s) => Buffer.from(s)),
  // Invalid UTF-8 inside a string, and bare bytes.
  fc
    .uint8Array({ maxLength: 200 })
    .map((b) => Buffer.concat([Buffer.from('{"executions":[{"service":"'), b, Buffer.from('"}]}')])),
  // A valid envelope cut short.
  fc
    .integer({ min: 1, max: 60 })
    .map((n) => Buffer.from(JSON.stringify({ executions: [{ service: 'a', durationMs: 1 }] }).slice(0, n))),
);

const validish = fc
  .record({ service: fc.string({ maxLength: 20 }), durationMs: fc.double({ min: 0, max: 1e6, noNaN: true }) })
  .map((e) => Buffer.from(JSON.stringify({ executions: [{ ...e, startedAt: new Date().toISOString() }] })));

type Body = { body: Buffer; headers: Record<string, string> };

const json = (b: Buffer): Body => ({ body: b, headers: { 'content-type': 'application/json' } });

const bodies: fc.Arbitrary<Body> = fc.oneof(
  { weight: 4, arbitrary: badEnvelope.map(json) },
  { weight: 3, arbitrary: invalidJson.map(json) },
  { weight: 1, arbitrary: jsonValue.map((v) => json(Buffer.from(JSON.stringify(v) ?? 'null'))) },
  { weight: 2, arbitrary: deepBody.map(json) },
  // Gzip: valid, invalid, truncated, and a bomb (a few KB that inflate past the decoded limit).
  {
    weight: 1,
    arbitrary: validish.map((b) => ({
      body: zlib.gzipSync(b),
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    })),
  },
  {
    weight: 1,
    arbitrary: fc.uint8Array({ maxLength: 100 }).map((b) => ({
      body: Buffer.from(b),
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    })),
  },
  {
    weight: 1,
    arbitrary: validish.map((b) => ({
      body: zlib.gzipSync(b).subarray(0, 12),
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    })),
  },
  {
    weight: 1,
    arbitrary: fc.constant(0).map(() => ({
      body: BOMB,
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    })),
  },
  // Wrong content types and encodings.
  {
    weight: 1,
    arbitrary: fc
      .tuple(
        validish,
        fc.constantFrom(
          'text/plain',
          'application/xml',
          'multipart/form-data; boundary=x',
          '',
          'application/json; charset=latin1',
          'application/x-protobuf',
        ),
        fc.constantFrom('identity', 'br', 'deflate', 'gzip, gzip', 'x'),
      )
      .map(([b, type, enc]) => ({ body: b, headers: { 'content-type': type, 'content-encoding': enc } })),
  },
);

const BOMB = zlib.gzipSync(Buffer.alloc(64 * 2 ** 20, 32));

/** Credentials a request carries: the run's valid ones, or odd ones. */
export interface FuzzCredentials {
  key: string;
  session: string;
}

const headerValue = fc.oneof(
  fc.string({ maxLength: 60 }).filter((s) => /^[\t\x20-\x7e]*$/.test(s)),
  fc.constantFrom(
    'Bearer ',
    'Bearer svc_test_',
    'Basic dXNlcjpwYXNz',
    'Bearer ' + 'a'.repeat(5000),
    'svc_sess_%ZZ',
  ),
);

function auth(creds: FuzzCredentials): fc.Arbitrary<Record<string, string>> {
  return fc.oneof(
    // Mostly valid, so that the requests reach the routes' own checks.
    { weight: 10, arbitrary: fc.constant({ authorization: `Bearer ${creds.session}` }) },
    { weight: 6, arbitrary: fc.constant({ 'x-api-key': creds.key }) },
    { weight: 1, arbitrary: fc.constant({}) },
    { weight: 1, arbitrary: headerValue.map((v) => ({ authorization: v })) },
    { weight: 1, arbitrary: headerValue.map((v) => ({ cookie: `svc_session=${v}; other=${v}` })) },
    { weight: 1, arbitrary: fc.constant({ cookie: 'svc_session=%E0%A4%A' }) },
  );
}

/** Percent-encoded UTF-8 (a lone surrogate becomes U+FFFD, where encodeURIComponent would throw). */
const pct = (s: string) =>
  Array.from(Buffer.from(s, 'utf8'), (b) =>
    /[A-Za-z0-9._~-]/.test(String.fromCharCode(b))
      ? String.fromCharCode(b)
      : `%${b.toString(16).toUpperCase().padStart(2, '0')}`,
  ).join('');

/** Sent as they are: malformed percent-encoding and odd separators. */
const RAW = ['%', '%E0%A4%A', '%zz', '%00', '&&', '==', '%C0%AF', '+', '%2', ';'];

const query = fc
  .array(
    fc.tuple(
      fc.constantFrom(...PARAMS),
      fc.oneof(
        { weight: 4, arbitrary: oddString.map(pct) },
        { weight: 1, arbitrary: fc.constantFrom(...RAW) },
      ),
    ),
    { maxLength: 6 },
  )
  .map((pairs) => (pairs.length === 0 ? '' : `?${pairs.map(([k, v]) => `${pct(k)}=${v}`).join('&')}`));

/** Generated bad requests against `creds`' workspace. */
export function fuzzRequests(creds: FuzzCredentials): fc.Arbitrary<FuzzRequest> {
  return fc
    .tuple(
      fc.constantFrom(...ROUTES),
      oddString,
      query,
      auth(creds),
      bodies,
      fc.record(
        { 'x-request-id': headerValue, 'idempotency-key': headerValue, accept: headerValue },
        { requiredKeys: [] },
      ),
      fc.boolean(),
    )
    .map(([[method, route], id, q, a, b, extra, withBody]) => {
      const path = route.replace(':x', pct(id) || 'x') + q;
      const send = withBody || method === 'POST' || method === 'PATCH';
      // A log-out with the run's session would end it, and every later request would stop at 401.
      const credentials =
        route === '/api/auth/logout' && a.authorization === `Bearer ${creds.session}` ? {} : a;
      return {
        method,
        path,
        headers: { ...extra, ...credentials, ...(send ? b.headers : {}) },
        ...(send ? { body: b.body } : {}),
      };
    });
}
