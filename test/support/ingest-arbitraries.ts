import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { expect } from 'vitest';
import { INGEST_ITEM_LIMITS, INGEST_STRING_LIMITS } from '../../schemas/ingest-items.js';
import { EXECUTION_SOURCES, LOG_LEVELS, OUTCOMES } from '../../schemas/records.js';

/*
 * Generated ingest items and payloads: valid ones of every shape and near-valid ones with one thing wrong, with
 * boundary values mixed in freely. The properties that use them (test/unit/fast-items.test.ts,
 * direct-executions.test.ts) only need the reference path's verdict, not the generators' own idea of validity.
 */

export type Obj = Record<string, unknown>;
export type Arb = fc.Arbitrary<unknown>;

export const MAX_EPOCH_MS = 253_402_300_799_999;
export const L = INGEST_STRING_LIMITS;

/** An object with these own keys in this order; `__proto__` becomes an own key, as JSON.parse makes it. */
export function build(entries: readonly (readonly [string, unknown])[]): Obj {
  const o: Obj = {};
  for (const [key, value] of entries) {
    Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
  }
  return o;
}

/** A deep copy that keeps own `__proto__` keys, `undefined` values and non-finite numbers. */
export function clone<T>(value: T): T {
  if (Array.isArray(value)) return value.map(clone) as T;
  if (typeof value !== 'object' || value === null) return value;
  const source = value as Obj;
  return build(Object.keys(source).map((key) => [key, clone(source[key])] as const)) as T;
}

export function withEntry(o: Obj, key: string, value: unknown): Obj {
  const entries = Object.keys(o).map((k) => [k, k === key ? value : o[k]] as const);
  return build(Object.hasOwn(o, key) ? entries : [...entries, [key, value]]);
}

export const without = (o: Obj, key: string): Obj =>
  build(Object.keys(o).flatMap((k) => (k === key ? [] : [[k, o[k]] as const])));

/**
 * Every detail of a value as text: key order, own `__proto__` keys, `undefined` values, -0, NaN and each
 * object's prototype. Stricter than toStrictEqual plus JSON.stringify, and unlike toStrictEqual it is not
 * misled by an own key named "constructor" (which its type check reads).
 */
export function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const proto = Object.getPrototypeOf(value) === Object.prototype ? '' : '<not a plain object>';
    const source = value as Obj;
    return `${proto}{${Object.keys(source)
      .map((key) => `${JSON.stringify(key)}:${canonical(source[key])}`)
      .join(',')}}`;
  }
  if (typeof value === 'number') return Object.is(value, -0) ? '-0' : String(value);
  return value === undefined ? 'undefined' : JSON.stringify(value);
}

export function expectSame(got: unknown, want: unknown): void {
  expect(isDeepStrictEqual(got, want)).toBe(true);
  expect(canonical(got)).toBe(canonical(want));
  // What a column stores: several of these objects are written as JSON text.
  expect(JSON.stringify(got)).toBe(JSON.stringify(want));
}

// ---- values ----

/** Strings of UTF-16 length around a limit, ending in a one- or two-unit character. */
export function aroundLength(limit: number, fill = 'a'): fc.Arbitrary<string> {
  return fc
    .tuple(
      fc.integer({ min: Math.max(0, limit - 2), max: limit + 1 }),
      fc.constantFrom(fill, 'é', '😀', '\u0000', '\ud800', 'ß'),
    )
    .map(([n, last]) => (n < last.length ? fill.repeat(n) : fill.repeat(n - last.length) + last));
}

export const someString = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.string({ unit: 'grapheme', maxLength: 6 }),
  fc.string({ unit: 'binary', maxLength: 6 }),
  fc.constantFrom('', ' ', 'svc_live_AbCdEfGhIjKlMnOpQrStUvWxYz012345', '\ud83d', 'İ'),
);

/** Mostly `valid`; `edge` (boundary values, often invalid) one time in ten. */
export const mostly = (valid: Arb, ...edge: Arb[]): Arb =>
  fc.oneof({ arbitrary: valid, weight: 9 }, fc.oneof(...edge));

export const lenString = (min: number, max: number) =>
  mostly(
    fc.string({ minLength: min, maxLength: Math.min(max, 12) }),
    someString,
    aroundLength(min),
    aroundLength(max),
  );

/** Finite mostly; NaN, infinities and -0 sometimes. */
export const number: Arb = fc.oneof(
  { arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }), weight: 4 },
  { arbitrary: fc.integer(), weight: 4 },
  fc.double(),
);

/** Wrong in some way for nearly every field (null is right for the nullish ones: zod decides). */
export const WRONG: Arb = fc.constantFrom(
  undefined,
  null,
  0,
  -0,
  -1,
  1.5,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  Number.NEGATIVE_INFINITY,
  2 ** 53,
  '',
  'x',
  'ÄÖ😀',
  true,
  false,
  [],
  ['a'],
  {},
  { a: 1 },
);

export const jsonish: Arb = fc.oneof(fc.jsonValue({ maxDepth: 2 }), WRONG);

export const keyName = fc.oneof(
  { arbitrary: fc.string({ maxLength: 8 }), weight: 4 },
  fc.constantFrom(
    '__proto__',
    'constructor',
    'toString',
    '1',
    '0',
    'authorization',
    'Cookie',
    'password',
    'a.b',
    'é',
    '',
  ),
);

export function dict(value: Arb, maxKeys = 5): fc.Arbitrary<Obj> {
  return fc.array(fc.tuple(keyName, value), { maxLength: maxKeys }).map(build);
}

/** An integer in [min, max] mostly, in the wider [lo, hi] sometimes. */
export const inMostly = (min: number, max: number, lo: number, hi: number) =>
  fc.oneof({ arbitrary: fc.integer({ min, max }), weight: 20 }, fc.integer({ min: lo, max: hi }));

export const digits = (n: number, width: number) => String(n).padStart(width, '0');

export const rfc3339 = fc
  .record({
    year: fc.oneof(fc.integer({ min: 1960, max: 2100 }), fc.integer({ min: 0, max: 9999 })),
    month: inMostly(1, 12, 0, 13),
    day: inMostly(1, 28, 0, 32),
    hour: inMostly(0, 23, 0, 25),
    minute: inMostly(0, 59, 0, 60),
    second: inMostly(0, 59, 0, 61),
    fraction: fc.option(fc.string({ unit: fc.constantFrom(...'0123456789'), minLength: 1, maxLength: 7 }), {
      nil: '',
    }),
    sep: fc.constantFrom('T', 't', ' '),
    zone: fc.oneof(
      fc.constantFrom('Z', 'z', 'Z', 'Z', 'Z', 'Z', 'Z', 'Z', ''),
      fc
        .tuple(fc.constantFrom('+', '-'), inMostly(0, 23, 0, 25), inMostly(0, 59, 0, 61))
        .map(([sign, h, m]) => `${sign}${digits(h, 2)}:${digits(m, 2)}`),
    ),
  })
  .map(
    (t) =>
      `${digits(t.year, 4)}-${digits(t.month, 2)}-${digits(t.day, 2)}${t.sep}${digits(t.hour, 2)}:` +
      `${digits(t.minute, 2)}:${digits(t.second, 2)}${t.fraction === '' ? '' : `.${t.fraction}`}${t.zone}`,
  );

export const timestamp: Arb = mostly(
  fc.oneof(fc.integer({ min: 0, max: MAX_EPOCH_MS }), rfc3339, fc.double({ min: 0, max: MAX_EPOCH_MS })),
  fc.double({ min: -10, max: MAX_EPOCH_MS + 10 }),
  fc.constantFrom(
    MAX_EPOCH_MS,
    MAX_EPOCH_MS + 0.5,
    MAX_EPOCH_MS + 1,
    -0.5,
    -0,
    -1,
    '',
    '2026-02-29T00:00:00Z',
  ),
);

export const duration: Arb = mostly(
  fc.oneof(
    fc.double({ min: 0, max: INGEST_ITEM_LIMITS.maxDurationMs, noNaN: true }),
    fc.integer({ min: 0, max: 10_000 }),
  ),
  fc.double({ min: -1, max: INGEST_ITEM_LIMITS.maxDurationMs + 1 }),
  fc.constantFrom(0, -0, INGEST_ITEM_LIMITS.maxDurationMs, INGEST_ITEM_LIMITS.maxDurationMs + 0.001, -1e-9),
);

export const executionId: Arb = mostly(
  fc.stringMatching(/^[A-Za-z0-9._:-]{1,16}$/),
  aroundLength(128, 'x'),
  fc.constantFrom('a b', 'é', 'x/y', ''),
);

/** One of `values` mostly, near misses sometimes. */
export const oneOf = (values: readonly string[], ...near: string[]): Arb =>
  mostly(fc.constantFrom(...values), fc.constantFrom(...near));

export const mode: Arb = oneOf(['test', 'live'], 'TEST', '', 'x');
export const scalar: Arb = fc.oneof(someString, number, fc.boolean(), fc.constant(null));

/** A scalar tree (context, response fields): objects of scalars, sometimes too deep or with an array. */
export const scalarTree: fc.Arbitrary<Obj> = fc.letrec<{ tree: Obj; node: unknown }>((tie) => ({
  tree: dict(tie('node'), 4),
  node: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    { arbitrary: scalar, weight: 6 },
    { arbitrary: tie('tree'), weight: 2 },
    fc.constant([1]),
  ),
})).tree;

export function nested(depth: number, leaf: unknown = 1): Obj {
  let node: Obj = { leaf };
  for (let i = 1; i < depth; i++) node = { [`l${i}`]: node };
  return node;
}

export const manyLeaves = (n: number) => build(Array.from({ length: n }, (_, i) => [`k${i}`, i] as const));
// {"a":"…"} is 8 characters plus the string.
export const longJson = (chars: number) => ({ a: 'x'.repeat(chars - 8) });

export const context: Arb = fc.oneof(
  { arbitrary: scalarTree, weight: 6 },
  fc.constantFrom(
    nested(8),
    nested(9),
    manyLeaves(256),
    manyLeaves(257),
    longJson(INGEST_ITEM_LIMITS.contextMaxChars),
    longJson(INGEST_ITEM_LIMITS.contextMaxChars + 1),
    { a: Number.NaN },
  ),
);

export const attributes: Arb = fc.oneof(
  { arbitrary: dict(fc.jsonValue({ maxDepth: 3 }), 4), weight: 6 },
  fc.constantFrom(nested(15), nested(16), nested(17), { a: [[[]]] }, { a: [nested(16)] }),
);

// ---- objects of a schema's shape, valid and with one thing wrong ----

export interface Field {
  ok: Arb;
  /** Wrong values beyond the generic ones. */
  bad?: Arb;
  required?: boolean;
}

export interface Shaped {
  valid: fc.Arbitrary<Obj>;
  nearValid: fc.Arbitrary<Obj>;
  /** Mostly valid, sometimes near-valid. */
  any: fc.Arbitrary<Obj>;
}

export function shaped(fields: Record<string, Field>): Shaped {
  const names = Object.keys(fields);
  const valid = fc
    .tuple(
      ...names.map((name) => {
        const field = fields[name]!;
        if (field.required) return field.ok.map((v) => [name, v] as const);
        const value = fc.oneof({ arbitrary: field.ok, weight: 4 }, fc.constant(null));
        return fc.option(
          value.map((v) => [name, v] as const),
          { nil: undefined, freq: 2 },
        );
      }),
    )
    .chain((maybe) => {
      const entries = maybe.filter((e) => e !== undefined);
      // Any key order: zod's output follows the schema's, whatever the input's.
      return fc.shuffledSubarray(entries, { minLength: entries.length, maxLength: entries.length });
    })
    .map(build);
  const mutation: fc.Arbitrary<(o: Obj) => Obj> = fc.oneof(
    {
      arbitrary: fc
        .constantFrom(...names)
        .chain((name) =>
          fc.oneof(WRONG, fields[name]!.bad ?? WRONG).map((v) => (o: Obj) => withEntry(o, name, v)),
        ),
      weight: 4,
    },
    fc.constantFrom(...names).map((name) => (o: Obj) => without(o, name)),
    fc.constantFrom(...names).map((name) => (o: Obj) => withEntry(o, name, null)),
    fc.tuple(fc.constantFrom('extra', '__proto__', 'constructor', 'toString', 'Service', ''), jsonish).map(
      ([key, v]) =>
        (o: Obj) =>
          withEntry(o, key, v),
    ),
  );
  const nearValid = fc.tuple(valid, mutation).map(([o, mutate]) => mutate(o));
  return { valid, nearValid, any: fc.oneof({ arbitrary: valid, weight: 3 }, nearValid) };
}

export const headers = dict(mostly(fc.oneof(someString, fc.array(someString, { maxLength: 3 })), WRONG));
export const query = dict(mostly(fc.oneof(scalar, fc.array(scalar, { maxLength: 3 })), WRONG));

export const request = shaped({
  route: { ok: someString },
  headers: { ok: fc.oneof({ arbitrary: headers, weight: 3 }, dict(someString)) },
  query: { ok: query },
});

export const response = shaped({
  headers: { ok: headers },
  fields: {
    ok: fc.oneof(scalarTree, fc.constantFrom(nested(8), nested(9), { ok: false }, { __proto__: 1 })),
  },
});

export const frame = shaped({
  function: { ok: someString },
  file: { ok: someString },
  line: { ok: mostly(fc.nat(), fc.constantFrom(-1, 1.5)) },
  column: { ok: mostly(fc.nat(), number) },
  inApp: { ok: fc.boolean() },
});

export const exception = shaped({
  type: { ok: lenString(1, 8), required: true },
  message: { ok: someString, required: true },
  stack: { ok: someString },
  handled: { ok: fc.boolean() },
  frames: { ok: fc.array(frame.any, { maxLength: 3 }) },
});

export const evidence = shaped({
  kind: { ok: lenString(1, 8), required: true },
  detail: { ok: someString },
  verdict: { ok: oneOf(['failed', 'success'], 'FAILED') },
});

export const logShape: Record<string, Field> = {
  timestamp: { ok: timestamp, required: true },
  level: {
    ok: mostly(
      fc.constantFrom(...LOG_LEVELS, 'INFO', 'Warn', 'ERROR'),
      fc.constantFrom('WARNING', 'İnfo', ''),
    ),
    required: true,
  },
  message: { ok: someString, required: true },
  service: { ok: lenString(1, L.service), required: true },
  environment: { ok: lenString(1, L.environment) },
  mode: { ok: mode },
  executionId: { ok: executionId },
  traceId: { ok: lenString(1, L.id) },
  spanId: { ok: lenString(1, L.id) },
  logger: { ok: someString },
  attributes: { ok: attributes },
  exception: { ok: exception.any },
};
export const log = shaped(logShape);

/** An inline log: inherits service and the ids, so those are often left out. */
export const inlineLog = shaped({ ...logShape, service: { ok: lenString(1, L.service) } });

export const execution = shaped({
  executionId: { ok: executionId },
  traceId: { ok: lenString(1, L.id) },
  spanId: { ok: lenString(1, L.id) },
  parentSpanId: { ok: lenString(1, L.id) },
  service: { ok: lenString(1, L.service), required: true },
  environment: { ok: lenString(1, L.environment) },
  mode: { ok: mode },
  source: { ok: oneOf(EXECUTION_SOURCES, 'HTTP', 'other') },
  endpoint: { ok: lenString(1, L.endpoint), required: true },
  method: { ok: fc.oneof(fc.constantFrom('get', 'POST', 'Patch', 'ß', 'ﬀ'), lenString(1, L.method)) },
  startedAt: { ok: timestamp, required: true },
  durationMs: { ok: duration, required: true },
  duration: { ok: duration },
  statusCode: {
    ok: mostly(fc.integer({ min: 100, max: 599 }), fc.integer({ min: 90, max: 610 }), fc.constant(200.5)),
  },
  outcome: { ok: oneOf(OUTCOMES, 'SUCCESS') },
  request: { ok: request.any },
  response: { ok: response.any },
  context: { ok: context },
  exception: { ok: exception.any },
  outcomeEvidence: { ok: fc.array(evidence.any, { maxLength: 3 }) },
  fingerprint: { ok: fc.array(someString, { maxLength: 3 }), bad: fc.constant(['a', 1]) },
  logs: { ok: fc.array(fc.oneof(inlineLog.any, WRONG), { maxLength: 3 }) },
});

export const manyTags = (n: number) =>
  build(Array.from({ length: n }, (_, i) => [`t${i}`, String(i)] as const));

export const metricShape: Record<string, Field> = {
  name: {
    ok: fc.oneof(
      { arbitrary: fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_.]{0,12}$/), weight: 4 },
      aroundLength(L.metricName, 'm'),
      fc.constantFrom('1abc', 'a-b', ''),
    ),
    required: true,
  },
  unit: { ok: someString },
  timestamp: { ok: timestamp, required: true },
  service: { ok: lenString(1, L.service), required: true },
  environment: { ok: lenString(1, L.environment) },
  mode: { ok: mode },
  tags: {
    ok: fc.oneof(
      { arbitrary: dict(someString), weight: 3 },
      fc.constantFrom(manyTags(INGEST_ITEM_LIMITS.maxTags), manyTags(INGEST_ITEM_LIMITS.maxTags + 1)),
    ),
  },
};

export const histogram = shaped({
  count: { ok: fc.oneof(fc.nat(), fc.constantFrom(-1, 1.5, 2 ** 53)), required: true },
  sum: { ok: number, required: true },
  min: { ok: number, required: true },
  max: { ok: number, required: true },
});

export const metric = fc.oneof(
  shaped({
    ...metricShape,
    type: { ok: fc.constantFrom('counter', 'gauge'), required: true },
    value: { ok: number, bad: histogram.valid, required: true },
  }).any,
  shaped({
    ...metricShape,
    type: { ok: fc.constant('histogram'), bad: fc.constantFrom('Histogram', 'summary'), required: true },
    value: { ok: histogram.any, bad: fc.double(), required: true },
  }).any,
);

export const resource = shaped({
  service: { ok: lenString(1, L.service) },
  environment: { ok: lenString(1, L.environment) },
  mode: { ok: mode },
});

export const payload = fc.record(
  {
    resource: resource.any,
    executions: fc.array(fc.oneof({ arbitrary: execution.any, weight: 4 }, WRONG), { maxLength: 4 }),
    logs: fc.array(fc.oneof({ arbitrary: log.any, weight: 4 }, WRONG), { maxLength: 3 }),
    metrics: fc.array(fc.oneof({ arbitrary: metric, weight: 4 }, WRONG), { maxLength: 3 }),
  },
  { requiredKeys: ['executions'] },
);
