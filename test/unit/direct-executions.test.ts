import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { scanEnvelope } from '../../api/json-envelope.js';
import { buildTemplate, stampBody } from '../../bench/traffic.js';
import { processIngestBody } from '../../pipeline/ingest-body.js';
import { compileOutcomeRules } from '../../pipeline/outcome-rules.js';
import { type ProcessContext, type ProcessOptions, processPayload } from '../../pipeline/process-payload.js';
import { toChunks } from '../../pipeline/to-columns.js';
import { encodeJsonCuts } from '../../schemas/broker-messages.js';
import { INGEST_ITEM_LIMITS } from '../../schemas/ingest-items.js';
import type { ExecutionRecord, ProcessedPayload } from '../../schemas/records.js';
import {
  type Arb,
  build,
  duration,
  executionId,
  expectSame,
  keyName,
  longJson,
  manyLeaves,
  nested,
  type Obj,
  payload,
  rfc3339,
  scalar,
  someString,
} from '../support/ingest-arbitraries.js';

/*
 * The direct lane (pipeline/direct-executions.ts) must give, for every body, exactly what parsing it whole and
 * processing it (process-payload.ts) gives: the same records, rejections and issues, and byte for byte the same
 * column chunks. Each generated body is written out in a spelling of its own (whitespace, escapes, number forms,
 * the odd repeated key), and cut into groups as the API cuts it, so that both the items the lane takes and those
 * it declines are compared.
 */

const CTX: ProcessContext = {
  mode: 'test',
  requestId: 'req_direct',
  receivedAt: Date.UTC(2026, 10, 29, 1, 0),
  workspaceId: 'ws_direct',
};
const META = { requestId: CTX.requestId, receivedAt: CTX.receivedAt, seq: 7 };
const INDEXED = ['customer.id', 'customer.tier', 'region', 'flags.beta', 'a', 'k1.k2.k3'];

/** A small xorshift generator: one spelling per seed. */
function random(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
}

/**
 * JSON text of `value` (what JSON.stringify writes, up to spelling): whitespace between tokens, \u escapes and
 * `\/`, numbers with trailing zeros, exponents or as `-0`/`1e400`, and now and then a key written twice (the
 * first one with another value, which JSON.parse then replaces).
 */
function spell(value: unknown, seed: number, plainness: number): string {
  const rand = random(seed);
  const odd = (p: number) => rand() < p * (1 - plainness);
  const ws = () => (odd(0.08) ? [' ', '\n', '\t', '\r\n  '][Math.floor(rand() * 4)]! : '');
  const str = (text: string): string => {
    let out = '"';
    for (let k = 0; k < text.length; k++) {
      const c = text.charCodeAt(k);
      const ch = text[k]!;
      const pair = c >= 0xd800 && c <= 0xdbff && (text.charCodeAt(k + 1) & 0xfc00) === 0xdc00;
      if (pair && !odd(0.5)) {
        out += text.slice(k, k + 2);
        k++;
      } else if (c >= 0xd800 && c <= 0xdfff) out += `\\u${c.toString(16).padStart(4, '0')}`;
      else if (odd(0.03))
        out += `\\u${odd(0.5) ? c.toString(16).padStart(4, '0') : c.toString(16).padStart(4, '0').toUpperCase()}`;
      else if (ch === '/' && odd(0.5)) out += '\\/';
      else out += JSON.stringify(ch).slice(1, -1);
    }
    return `${out}"`;
  };
  const num = (n: number): string => {
    if (!Number.isFinite(n)) return 'null';
    if (odd(0.01)) return n < 0 ? '-1e400' : '1e400';
    const base = JSON.stringify(n);
    if (!odd(0.15)) return base;
    switch (Math.floor(rand() * 5)) {
      case 4:
        return expanded(base);
      case 0:
        return base.includes('e') ? base : base.includes('.') ? `${base}0` : `${base}.0`;
      case 1:
        return n.toExponential().replace('e', odd(0.5) ? 'E' : 'e');
      case 2:
        return n === 0 ? '-0' : base;
      default:
        return base.includes('e') ? base : `${base}e0`;
    }
  };
  const write = (v: unknown): string => {
    if (v === null || v === undefined) return 'null';
    if (typeof v === 'string') return str(v);
    if (typeof v === 'number') return num(v);
    if (typeof v === 'boolean') return String(v);
    if (Array.isArray(v)) return `[${ws()}${v.map((x) => `${write(x)}${ws()}`).join(`,${ws()}`)}]`;
    const o = v as Obj;
    const entries = Object.keys(o)
      .filter((key) => o[key] !== undefined)
      .map((key) => {
        const entry = `${ws()}${str(key)}${ws()}:${ws()}${write(o[key])}${ws()}`;
        return odd(0.02) ? `${str(key)}:${write(rand() < 0.5 ? 1 : 'x')},${entry}` : entry;
      });
    return `{${entries.join(',')}${entries.length === 0 ? ws() : ''}}`;
  };
  return write(value);
}

/** A number JSON.stringify writes with an exponent, written out in full (`1e-7` as `0.0000001`). */
function expanded(base: string): string {
  const m = /^(-?)(\d)(?:\.(\d+))?e([+-]\d+)$/.exec(base);
  if (!m) return base;
  const [, sign, first, rest = '', exp] = m;
  const digits = first! + rest;
  const e = Number(exp);
  return e < 0 ? `${sign}0.${'0'.repeat(-e - 1)}${digits}` : `${sign}${digits}${'0'.repeat(e - rest.length)}`;
}

/** The body's cuts as the API writes them, with groups of `group` bytes (the API's are 32 KiB). */
function cutsOf(bytes: Buffer, group: number): string | undefined {
  const scan = scanEnvelope(bytes, group);
  if (!scan.ok) return undefined;
  const { shape } = scan;
  const lists = { executions: shape.executionCount, logs: shape.logCount, metrics: shape.metricCount };
  return encodeJsonCuts(shape.cuts, lists) || undefined;
}

/** Records without the context in the two forms only the chunks read (compared there, as cells). */
function comparable(out: ProcessedPayload): ProcessedPayload {
  const strip = ({ contextTree: _t, indexedContext: _c, ...r }: ExecutionRecord) => r as ExecutionRecord;
  return { ...out, executions: out.executions.map(strip) };
}

function chunkBytes(
  out: ProcessedPayload,
): { dataset: string; hour: number; bytes: Buffer; layout: number[] }[] {
  return toChunks(out, META, INDEXED)
    .finish()
    .map((c) => ({ dataset: c.dataset, hour: c.hour, bytes: Buffer.from(c.buffer), layout: [...c.layout] }));
}

/** Both ways over the same bytes (`text` as UTF-8, or bytes as they are); answers how many the lane took. */
function agree(text: string | Buffer, group: number, options: ProcessOptions = {}): number {
  const bytes = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
  const cuts = cutsOf(bytes, group);
  // As the pipeline reads a body whole: invalid UTF-8 decoded to U+FFFD.
  const want = processPayload(JSON.parse(bytes.toString('utf8')), CTX, options);
  const got = processIngestBody(bytes, cuts, CTX, options, INDEXED);
  expectSame(comparable(got.out), comparable(want));
  expect(chunkBytes(got.out)).toEqual(chunkBytes(want));
  return got.direct;
}

// ---- bodies of the shapes the lane takes, with what makes it decline mixed in ----

const pick = <T = unknown>(...values: T[]) => fc.constantFrom(...values);
/** `good` mostly; `bad` (what the lane declines or the schemas refuse) one time in thirty. */
const rarely = (good: Arb, ...bad: Arb[]): Arb => fc.oneof({ arbitrary: good, weight: 29 }, ...bad);
const optional = (arb: Arb) => fc.option(arb, { nil: undefined, freq: 3 });

const laneKey = <fc.Arbitrary<string>>(
  rarely(
    pick('customer', 'id', 'tier', 'region', 'flags', 'beta', 'a', 'k1', 'k2', 'k3', 'x-b3', 'user-agent'),
    keyName,
    pick('api_key', 'ApiKey', 'X-Api-Key', 'api-key', 'Cookie', 'session_token', 'client_Secret', 'PASSWD'),
    pick(
      'Password',
      'AUTHORIZATION',
      'svc_live_AbCdEfGhIjKlMnOp',
      '7',
      '__proto__',
      'a b',
      'apiKEY',
      'api_ke',
    ),
  )
);
const laneString: Arb = rarely(
  fc.stringMatching(/^[A-Za-z0-9 ._:/-]{0,12}$/),
  someString,
  pick('svc_test_AbCdEfGhIjKlMnOpQrSt', 'x'.repeat(8193), 'x'.repeat(257), 'a"b', 'é'),
);
const laneNumber: Arb = rarely(
  fc.oneof(fc.integer({ min: -1000, max: 100_000 }), fc.double({ min: -1e6, max: 1e6, noNaN: true })),
  pick(0, -0, 0.000001, 0.0000001, 1e21, 123456789012345, 1234567890123456, 0.1, 2.5e-7),
);
const laneScalar: Arb = rarely(fc.oneof(laneString, laneNumber, fc.boolean(), fc.constant(null)), scalar);

const laneTree: fc.Arbitrary<Obj> = fc.letrec<{ tree: Obj; node: unknown }>((tie) => ({
  tree: fc.array(fc.tuple(laneKey, tie('node')), { maxLength: 4 }).map(build),
  node: fc.oneof(
    { depthSize: 'small' },
    { arbitrary: laneScalar, weight: 12 },
    { arbitrary: tie('tree'), weight: 6 },
    pick<unknown>([1], {}),
  ),
})).tree;

const laneRequest = fc
  .record(
    {
      route: optional(rarely(laneString, fc.constant(null))),
      headers: optional(
        rarely(
          fc.array(fc.tuple(laneKey, rarely(laneString, fc.array(laneString, { maxLength: 2 }))), {
            maxLength: 3,
          }),
          fc.constant(null),
        ),
      ),
      query: optional(
        fc.array(fc.tuple(laneKey, rarely(laneScalar, fc.array(laneScalar))), { maxLength: 3 }),
      ),
    },
    { requiredKeys: [] },
  )
  .chain((r) => {
    const entries = Object.entries(r)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => [k, Array.isArray(v) ? build(v) : v] as const);
    // Mostly in the schema's order, which the lane needs; sometimes not.
    return rarely(
      fc.constant(entries),
      fc.shuffledSubarray(entries, { minLength: entries.length }),
    ) as fc.Arbitrary<(readonly [string, unknown])[]>;
  })
  .map((entries) => build(entries as [string, unknown][]));

const laneLog = fc
  .record(
    {
      timestamp: rarely(fc.oneof(fc.integer({ min: 0, max: 2 ** 42 }), rfc3339), pick<unknown>(-1, 'x')),
      level: rarely(pick('info', 'warn', 'ERROR', 'Debug'), pick('warning', '', 'İnfo')),
      message: laneString,
      logger: optional(rarely(laneString, fc.constant(null))),
      mode: optional(rarely(pick('test', null), pick('live'))),
      attributes: optional(rarely(fc.constant(null), laneTree)),
      service: optional(rarely(fc.constant(undefined), laneString)),
    },
    { requiredKeys: [] },
  )
  .map((r) => build(Object.entries(r).filter(([, v]) => v !== undefined)));

const laneExecution = fc
  .record(
    {
      executionId: optional(
        rarely(fc.stringMatching(/^[A-Za-z0-9._:-]{1,16}$/), executionId, fc.constant(null)),
      ),
      traceId: optional(rarely(fc.stringMatching(/^[0-9a-f]{32}$/), fc.constant(null), laneString)),
      spanId: optional(laneString),
      service: rarely(pick('checkout', 'orders'), laneString, pick(null, 'x'.repeat(129))),
      environment: optional(rarely(pick('production', 'staging'), laneString, fc.constant(null))),
      mode: optional(rarely(pick('test', null), pick('live', 'x'))),
      source: optional(rarely(pick('http', 'job', null), pick('HTTP'))),
      endpoint: rarely(pick('/api/v1/orders/1', '/'), laneString),
      method: optional(rarely(pick('GET', 'post', null), pick('ß', ''), laneString)),
      startedAt: rarely(
        fc.integer({ min: 1.7e12, max: 1.8e12 }),
        rfc3339,
        fc.double(),
        pick<unknown>(null, ''),
      ),
      durationMs: rarely(duration, fc.constant(null), fc.constant(undefined)),
      duration: optional(duration),
      statusCode: optional(rarely(pick(200, 201, 404, 499, null), pick(500, 503, 99, 200.5))),
      outcome: optional(rarely(pick('success', 'unknown', null), pick('failed', 'SUCCESS'))),
      request: optional(rarely(laneRequest, pick<unknown>(null, 'x', { route: 1 }))),
      context: optional(
        rarely(
          laneTree,
          pick<unknown>(null, [], nested(8), nested(9), manyLeaves(256), manyLeaves(257)),
          pick(
            longJson(INGEST_ITEM_LIMITS.contextMaxChars),
            longJson(INGEST_ITEM_LIMITS.contextMaxChars + 1),
          ),
        ),
      ),
      logs: optional(rarely(fc.array(laneLog, { maxLength: 3 }), fc.constant(null))),
      response: optional(rarely(fc.constant(null), pick({ headers: {} }))),
      exception: optional(
        fc.oneof(
          fc.constant(null),
          fc
            .record(
              {
                type: rarely(pick('TypeError', 'TimeoutError'), laneString),
                message: laneString,
                stack: optional(rarely(pick('E: m\n    at f (src/a.ts:1:2)', 'é\t"x"'), fc.constant(null))),
                handled: optional(pick(true, false, null)),
              },
              { requiredKeys: ['type', 'message'] },
            )
            .map((e) => build(Object.entries(e).filter(([, v]) => v !== undefined))),
        ),
      ),
      parentSpanId: optional(rarely(laneString, fc.constant(null))),
      fingerprint: optional(rarely(fc.constant(null), pick(['a']))),
      outcomeEvidence: optional(rarely(fc.constant(null), pick([{ kind: 'k', verdict: 'failed' }]))),
    },
    { requiredKeys: ['service', 'endpoint', 'startedAt', 'durationMs'] },
  )
  .chain((r) => {
    const entries = Object.entries(r).filter(([, v]) => v !== undefined);
    return fc.shuffledSubarray(entries, { minLength: entries.length });
  })
  .map(build);

const lanePayload = fc.record(
  {
    resource: optional(
      fc.record(
        {
          service: optional(rarely(laneString, fc.constant(null))),
          environment: optional(rarely(pick('staging'), laneString, fc.constant(null))),
          mode: optional(rarely(pick('test'), pick<unknown>('live', 1))),
        },
        { requiredKeys: [] },
      ),
    ),
    executions: fc.array(laneExecution, { maxLength: 6 }),
    logs: optional(fc.array(laneLog, { maxLength: 2 })),
  },
  { requiredKeys: ['executions'] },
);

/** The bench's kind of execution, written as JSON.stringify writes it: the lane takes it. */
const BASE = {
  executionId: 'exec-1',
  traceId: '1cba2d880359d45c4223cdb7f6eb2585',
  service: 'checkout',
  environment: 'production',
  endpoint: '/api/v1/orders/1',
  method: 'GET',
  startedAt: 1_795_916_235_113,
  durationMs: 18.93,
  statusCode: 200,
  request: { headers: { 'user-agent': 'bench/1.0', 'x-request-id': 'r-0' }, query: { page: '1' } },
  context: { customer: { id: 'cus_1', tier: 'pro' }, region: 'eu-west-1', flags: { beta: false } },
  logs: [{ timestamp: 1_795_916_235_113, level: 'info', message: 'step 0' }],
};
const text = (item: Obj, extra: Obj = {}) => JSON.stringify({ ...extra, executions: [item] });
const withContext = (context: unknown) => text({ ...BASE, context });
const withRequest = (request: unknown) => text({ ...BASE, request });
const withLog = (log: Obj) => text({ ...BASE, logs: [log] });
const withException = (exception: Obj) => text({ ...BASE, exception });
/** 256 leaves in objects of at most 64 keys. */
const nested256 = () => Object.fromEntries(Array.from({ length: 4 }, (_, k) => [`g${k}`, manyLeaves(64)]));
/** `body` with `mark` replaced by bytes that are not UTF-8: a lone surrogate's, a stray continuation byte. */
const notUtf8 = (body: string, mark: string) => {
  const [before, after] = body.split(mark) as [string, string];
  return Buffer.concat([
    Buffer.from(before),
    Buffer.from([0xed, 0xa0, 0x80, 0x41, 0x80]),
    Buffer.from(after),
  ]);
};
const nestedContext = (depth: number) => withContext(nested(depth));
/** A context whose JSON is `chars` long, of strings the scrub keeps whole. */
function sizedContext(chars: number): Obj {
  const o: Obj = {};
  for (let i = 0; i < 9; i++) o[`k${i}`] = 'x'.repeat(7280);
  o.k8 = 'x'.repeat(7280 + chars - JSON.stringify(o).length);
  return o;
}
/** `{"a":<spelling>}` as the context: the spelling is put in the text as it is. */
const numberContext = (spelling: string) =>
  text({ ...BASE, context: { a: 0 } }).replace('"a":0', `"a":${spelling}`);

/** Bodies the lane takes (1) or must decline (0); either way the answer must be the whole parse's. */
const CASES: [string, string | Buffer, 0 | 1][] = [
  ['the bench shape', text(BASE), 1],
  ['no optional field', text({ service: 's', endpoint: '/', startedAt: 1, duration: 0 }), 1],
  [
    'RFC 3339 start, null ids and method',
    text({
      ...BASE,
      startedAt: '2026-11-29T01:00:00.5+01:00',
      executionId: null,
      traceId: null,
      method: null,
    }),
    1,
  ],
  ['a lower-case method, a non-ASCII service', text({ ...BASE, method: 'ß', service: 'café' }), 1],
  ['escapes in a top-level string', text({ ...BASE, endpoint: '/a\nb"c' }), 1],
  [
    'the resource fills service, environment and mode',
    text(
      { ...BASE, service: null, environment: undefined },
      { resource: { service: 'r', environment: 'e', mode: 'test' } },
    ),
    1,
  ],
  ['256 leaves', withContext(nested256()), 1],
  ['64 keys in one object', withContext(manyLeaves(64)), 1],
  ['65 keys in one object (declined before a quadratic check of repeats)', withContext(manyLeaves(65)), 0],
  [
    '65 headers',
    withRequest({ headers: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`h${i}`, 'v'])) }),
    0,
  ],
  [
    '100,000 empty objects',
    withContext(Object.fromEntries(Array.from({ length: 100_000 }, (_, i) => [`k${i}`, {}]))),
    0,
  ],
  ['257 leaves', withContext({ ...nested256(), more: 1 }), 0],
  ['depth 8', nestedContext(8), 1],
  ['depth 9', nestedContext(9), 0],
  ['64 KiB of context', withContext(sizedContext(INGEST_ITEM_LIMITS.contextMaxChars)), 1],
  ['64 KiB and one more', withContext(sizedContext(INGEST_ITEM_LIMITS.contextMaxChars + 1)), 0],
  ['an indexed string of 256 characters', withContext({ region: 'r'.repeat(256) }), 1],
  ['an indexed string of 257 characters (stored, not indexed)', withContext({ region: 'r'.repeat(257) }), 1],
  ['an indexed number and boolean', withContext({ region: 12.5, flags: { beta: true }, a: -3 }), 1],
  ['an indexed path through a string', withContext({ customer: 'x', k1: { k2: { k3: null } } }), 1],
  ['1e-6 written out', numberContext('0.000001'), 1],
  ['1e-7 written out', numberContext('0.0000001'), 0],
  ['a trailing zero', numberContext('1.50'), 0],
  ['an exponent', numberContext('1e2'), 0],
  ['-0', numberContext('-0'), 0],
  ['16 digits', numberContext('1234567890123456'), 0],
  ['15 digits', numberContext('123456789012345'), 1],
  ['a repeated key in the context', withContext({ a: 1 }).replace('"a":1', '"a":2,"a":1'), 0],
  [
    'a repeated item key',
    text(BASE).replace('"service":"checkout"', '"service":"x","service":"checkout"'),
    0,
  ],
  ['an integer-like key after another', withContext({ b: 1, 7: 2 }).replace('"7":2,"b":1', '"b":1,"7":2'), 0],
  ['__proto__ in the context', withContext({ a: 1 }).replace('"a":1', '"__proto__":1'), 0],
  ['whitespace in the context', withContext({ a: 1 }).replace('"a":1', '"a": 1'), 0],
  ['an escape in a context string', withContext({ a: 'x\ny"\\\u0001' }), 1],
  ['an escape JSON.stringify would not write', withContext({ a: 'x/' }).replace('x/', 'x\\/'), 0],
  ['a control character in upper-case hex', withContext({ a: 'x\u001b' }).replace('u001b', 'u001B'), 0],
  ['a short escape written long', withContext({ a: 'x\n' }).replace('\\n', '\\u000a'), 0],
  ['non-ASCII in a context string', withContext({ a: 'é😀', region: 'é' }), 1],
  ['bytes that are not UTF-8 in a context string', notUtf8(withContext({ a: 'AB' }), 'AB'), 1],
  ['bytes that are not UTF-8 in a top-level string', notUtf8(text({ ...BASE, endpoint: '/AB' }), 'AB'), 1],
  ['an escape in a context key', withContext({ 'a\n': 1 }), 0],
  ['non-ASCII in a context key', withContext({ é: 1 }), 0],
  ['an array in the context', withContext({ a: [1] }), 0],
  ['svc_ in a context value', withContext({ a: 'svc_live_AbCdEfGhIjKlMnOpQrSt' }), 0],
  ['svc_ in a context key', withContext({ svc_x: 1 }), 0],
  ['svc_ in the endpoint', text({ ...BASE, endpoint: '/svc_x' }), 0],
  ['a context string over 8192', withContext({ a: 'x'.repeat(8193) }), 0],
  ...[
    'Authorization',
    'x-api-key',
    'apikey',
    'client_secret',
    'PASSWD',
    'password',
    'session_token',
    'cookie',
  ].map((key): [string, string, 0 | 1] => [`the sensitive key ${key}`, withContext({ [key]: 'v' }), 0]),
  ['a sensitive header', withRequest({ headers: { Cookie: 'a' } }), 0],
  ['a sensitive query key', withRequest({ query: { api_key: 'a' } }), 0],
  ['request keys out of the schema order', withRequest({ query: { a: '1' }, route: '/r' }), 0],
  [
    'request keys in the schema order',
    withRequest({ route: '/r', headers: { a: ['1', '2'] }, query: { a: [1, null, true] } }),
    1,
  ],
  ['a header of another type', withRequest({ headers: { a: 1 } }), 0],
  ['failed by outcome', text({ ...BASE, outcome: 'failed' }), 1],
  ['failed by status', text({ ...BASE, statusCode: 500 }), 1],
  [
    'failed by status, with a route',
    text({ ...BASE, statusCode: 504, request: { route: '/orders/:id' } }),
    1,
  ],
  [
    'an exception with a stack',
    withException({ type: 'E', message: 'm 12', stack: 'E: m\n    at f (src/a.ts:1:2)' }),
    1,
  ],
  ['a timeout', withException({ type: 'TimeoutError', message: 'ETIMEDOUT' }), 1],
  ['a handled exception', withException({ type: 'E', message: 'm', stack: null, handled: true }), 1],
  ['an exception with null frames', withException({ type: 'E', message: 'm', frames: null }), 1],
  ['an exception with frames', withException({ type: 'E', message: 'm', frames: [{ function: 'f' }] }), 0],
  ['exception keys out of order', withException({ message: 'm', type: 'E' }), 0],
  ['the stack before the message', withException({ type: 'E', stack: 's', message: 'm' }), 0],
  ['an exception without a message', withException({ type: 'E' }), 0],
  ['an exception of an empty type', withException({ type: '', message: 'm' }), 0],
  ['svc_ in an exception', withException({ type: 'E', message: 'svc_live_AbCdEfGhIjKlMnOpQrSt' }), 0],
  ['a custom fingerprint', text({ ...BASE, statusCode: 500, fingerprint: ['a'] }), 0],
  ['success by outcome with status 500', text({ ...BASE, outcome: 'success', statusCode: 500 }), 1],
  ['a response', text({ ...BASE, response: { headers: {} } }), 0],
  ['the other mode', text({ ...BASE, mode: 'live' }), 0],
  ["the resource's other mode", text(BASE, { resource: { mode: 'live' } }), 0],
  ['a log level to lower-case', withLog({ timestamp: 1, level: 'WARN', message: 'm' }), 1],
  ['a log level that is none', withLog({ timestamp: 1, level: 'warning', message: 'm' }), 0],
  ['a log of its own service', withLog({ timestamp: 1, level: 'info', message: 'm', service: 's' }), 0],
  ['a log with attributes', withLog({ timestamp: 1, level: 'info', message: 'm', attributes: { a: 1 } }), 0],
  ['a log message over 8192', withLog({ timestamp: 1, level: 'info', message: 'x'.repeat(8193) }), 0],
  [
    'svc_ in a log message',
    withLog({ timestamp: 1, level: 'info', message: 'svc_test_AbCdEfGhIjKlMnOpQr' }),
    0,
  ],
];

const RULES = compileOutcomeRules([{ match: { method: 'POST' }, outcome: 'failed' }] as never);

describe('the direct lane', () => {
  it('takes every execution of the benchmark bodies, failed ones included, with the same chunks', () => {
    for (const plain of [true, false]) {
      const template = buildTemplate(3, 'x', 500, { noLogs: plain, metrics: plain ? 0 : undefined });
      const text = stampBody(template, 3).toString('utf8');
      const failed = processPayload(JSON.parse(text), CTX).executions.filter((e) => e.outcome === 'failed');
      expect(failed.length).toBeGreaterThan(0);
      expect(agree(text, 32 * 1024)).toBe(500);
    }
  });

  it('agrees with the whole parse on generated bodies of its shapes, however written', () => {
    let taken = 0;
    let items = 0;
    fc.assert(
      fc.property(
        lanePayload,
        fc.integer(),
        fc.integer({ min: 1, max: 400 }),
        fc.oneof(fc.constant(1), fc.constant(1), fc.double({ min: 0, max: 1 })),
        (body, seed, group, plainness) => {
          items += body.executions.length;
          taken += agree(spell(body, seed, plainness), group);
        },
      ),
      { numRuns: 1500 },
    );
    // Not vacuous: the lane takes a good share, and declines others.
    expect(taken).toBeGreaterThan(items / 10);
    expect(taken).toBeLessThan(items);
  });

  it('agrees with the whole parse on generated bodies of every shape', () => {
    fc.assert(
      fc.property(payload, fc.integer(), fc.integer({ min: 1, max: 400 }), (body, seed, group) => {
        agree(spell(body, seed, 0.5), group);
      }),
      { numRuns: 800 },
    );
  });

  it.each(CASES)('%s', (_name, body, taken) => {
    expect(agree(body, 1)).toBe(taken);
  });

  it('stays out of a workspace with outcome rules', () => {
    const text = stampBody(buildTemplate(4, 'x', 200, { noLogs: true, metrics: 0 }), 4).toString('utf8');
    expect(agree(text, 4096, { classifyRules: RULES })).toBe(0);
  });

  it('falls back to the whole parse when the cuts do not match the bytes', () => {
    const body = { executions: [{ service: 's', endpoint: '/', startedAt: 1.8e12, durationMs: 1 }] };
    const text = JSON.stringify({ ...body, executions: [...body.executions, ...body.executions] });
    const bytes = Buffer.from(text);
    const good = cutsOf(bytes, 1)!;
    // The same list, said to end one byte early or to hold one more item.
    const shifted = good.replace(/(\d+)$/, (m) => String(Number(m) - 1));
    const more = good.replace(/^executions=2/, 'executions=3');
    const want = processPayload(JSON.parse(text), CTX);
    for (const cuts of [shifted, more]) {
      const got = processIngestBody(bytes, cuts, CTX, {}, INDEXED);
      expect(got.direct).toBe(0);
      expectSame(comparable(got.out), comparable(want));
    }
  });
});
