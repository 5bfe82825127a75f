import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkEnvelope, checkEnvelopeBytes, type ItemCounts } from '../../api/ingest-envelope.js';
import { type EnvelopeShape, scanEnvelope } from '../../api/json-envelope.js';
import { parseIngestJson } from '../../pipeline/grouped-json.js';
import { encodeJsonCuts } from '../../schemas/broker-messages.js';
import { ServiceError } from '../../schemas/errors.js';

const limits = { executions: 3, logs: 4, metrics: 2 };
const bytes = (text: string) => Buffer.from(text, 'utf8');

function parses(buf: Buffer): boolean {
  try {
    JSON.parse(buf.toString('utf8'));
    return true;
  } catch {
    return false;
  }
}

function shape(text: string | Buffer): EnvelopeShape {
  const scan = scanEnvelope(typeof text === 'string' ? bytes(text) : text);
  if (!scan.ok) throw new Error(`expected valid JSON: ${scan.message}`);
  return scan.shape;
}

function syntaxError(text: string | Buffer): { offset: number; message: string } {
  const scan = scanEnvelope(typeof text === 'string' ? bytes(text) : text);
  if (scan.ok) throw new Error('expected a syntax error');
  return { offset: scan.offset, message: scan.message };
}

type Outcome = ItemCounts | { code: string; message: string; details: unknown };

function outcome(check: () => ItemCounts): Outcome {
  try {
    return check();
  } catch (err) {
    if (!(err instanceof ServiceError)) throw err;
    return { code: err.code, message: err.message, details: err.details };
  }
}

/**
 * What POST /api/ingest answered before the scan: parse, then check. A syntax error's detail quotes V8's
 * message (UTF-16 positions), which the scan words with byte offsets, so details of syntax errors are compared
 * by path only.
 */
function reference(buf: Buffer, mode: 'test' | 'live'): Outcome {
  let body: unknown;
  try {
    body = JSON.parse(buf.toString('utf8'));
  } catch {
    return { code: 'VALIDATION_ERROR', message: 'the body is not valid JSON', details: [{ path: '' }] };
  }
  return outcome(() => checkEnvelope(body, mode, limits));
}

function scanned(buf: Buffer, mode: 'test' | 'live'): Outcome {
  const o = outcome(() => checkEnvelopeBytes(buf, mode, limits));
  if ('code' in o && o.message === 'the body is not valid JSON') {
    const details = o.details as { path: string; message: string }[];
    expect(details).toHaveLength(1);
    expect(details[0]!.message).toMatch(/ at byte \d+$/);
    return { ...o, details: [{ path: details[0]!.path }] };
  }
  return o;
}

describe('scanEnvelope: JSON syntax as JSON.parse takes it', () => {
  const cases = [
    // accepted
    '{}',
    '[]',
    ' \t\r\n{ } \n',
    '0',
    '-0',
    '-0.0e-0',
    '1E+10',
    '123.456e789',
    '"a\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\uD83D\\uDE00\\udc00"',
    'true',
    'false',
    'null',
    '[1,[2,{"a":[{}]}],"x",null,true]',
    '{"a":{"b":{"c":[]}}, "d" : 1 }',
    '"é😀"',
    // refused
    '',
    ' \n',
    '{',
    '}',
    '[1,]',
    '[,1]',
    '[1 2]',
    '{"a":1,}',
    '{,}',
    '{"a" 1}',
    '{"a":}',
    '{a:1}',
    "{'a':1}",
    '{"a":1 "b":2}',
    '{"a":1]',
    '[1}',
    '01',
    '-01',
    '-',
    '-a',
    '+1',
    '.5',
    '1.',
    '1.e5',
    '1e',
    '1e+',
    '0x10',
    'NaN',
    'Infinity',
    'tru',
    'truex',
    'nul',
    'True',
    '"abc',
    '"\\x"',
    '"\\u12"',
    '"\\u12G4"',
    '"\\',
    '"\t"',
    '"\n"',
    '"\u001f"',
    '"\u007f"',
    '{} {}',
    '1 2',
    '[]]',
    '\u00a0{}',
    '{}\u2028',
    '\f{}',
    '\v{}',
  ];
  it.each(cases)('%j', (text) => {
    const buf = bytes(text);
    expect(scanEnvelope(buf).ok).toBe(parses(buf));
  });

  it('refuses a UTF-8 BOM, as JSON.parse(buf.toString()) does', () => {
    const buf = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), bytes('{}')]);
    expect(parses(buf)).toBe(false);
    expect(syntaxError(buf).offset).toBe(0);
  });

  it('takes invalid UTF-8 inside strings and refuses any byte ≥ 0x80 outside them', () => {
    for (const bad of [[0xc0], [0xff], [0xe2, 0x82], [0xf0, 0x9f], [0xed, 0xa0, 0x80], [0x80, 0x80]]) {
      const inside = Buffer.concat([bytes('{"a":"x'), Buffer.from(bad), bytes('"}')]);
      expect(parses(inside)).toBe(true);
      expect(scanEnvelope(inside).ok).toBe(true);
      const outside = Buffer.concat([bytes('{"a":1'), Buffer.from(bad), bytes('}')]);
      expect(parses(outside)).toBe(false);
      expect(syntaxError(outside).offset).toBe(6);
    }
    // A bad sequence never swallows the closing quote.
    const cut = Buffer.concat([bytes('["'), Buffer.from([0xe2]), bytes('"]')]);
    expect(parses(cut)).toBe(true);
    expect(scanEnvelope(cut).ok).toBe(true);
  });

  it('handles nesting as deep as JSON.parse does, without recursion', () => {
    const depth = 200_000;
    const arrays = `${'['.repeat(depth)}${']'.repeat(depth)}`;
    const objects = `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
    const inEnvelope = `{"executions":[{"logs":[1,${arrays}],"x":${objects}}],"resource":{"m":${arrays}}}`;
    for (const text of [arrays, objects, inEnvelope]) {
      expect(parses(bytes(text))).toBe(true);
      expect(scanEnvelope(bytes(text)).ok).toBe(true);
    }
    expect(shape(inEnvelope)).toMatchObject({ executionCount: 1, inlineLogs: 2 });
    expect(scanEnvelope(bytes(arrays.slice(1))).ok).toBe(false);
    expect(scanEnvelope(bytes(`${arrays}]`)).ok).toBe(false);
    expect(scanEnvelope(bytes(objects.replace('1', ''))).ok).toBe(false);
  });

  it('reports the byte offset and a short message', () => {
    expect(syntaxError('')).toEqual({ offset: 0, message: 'Unexpected end of JSON input at byte 0' });
    expect(syntaxError('{"a":tru}').offset).toBe(8);
    expect(syntaxError('{"é":x}')).toEqual({ offset: 6, message: "Unexpected token 'x' at byte 6" });
    expect(syntaxError('[1,]').message).toBe("Unexpected token ']' at byte 3");
    expect(syntaxError('{"a":1,}').message).toBe('Expected double-quoted property name in JSON at byte 7');
    expect(syntaxError('"\t"').message).toBe('Bad control character in string literal in JSON at byte 1');
    expect(syntaxError('{} x').message).toBe('Unexpected non-whitespace character after JSON at byte 3');
    expect(syntaxError(Buffer.from([0xef, 0xbb, 0xbf])).message).toBe('Unexpected token byte 0xef at byte 0');
  });
});

describe('scanEnvelope: the envelope fields', () => {
  it('reports kinds, counts and inline logs', () => {
    expect(shape('[1]')).toMatchObject({ top: 'array', executions: undefined, resource: undefined });
    expect(shape('"x"').top).toBe('string');
    expect(shape('{}')).toEqual({
      top: 'object',
      executions: undefined,
      executionCount: 0,
      inlineLogs: 0,
      logs: undefined,
      logCount: 0,
      metrics: undefined,
      metricCount: 0,
      resource: undefined,
      mode: undefined,
      modeValue: undefined,
      cuts: {},
    });
    const s = shape(
      '{"sdk":{"executions":[1],"logs":[1]},"executions":[{"logs":[{},{}]},[{"logs":[1]}],{"logs":{}},{"a":{"logs":[1]}},3,{"logs":[7]}],' +
        '"logs":[{"logs":[1,2]}],"metrics":[[],[]],"resource":{"service":"x","mode":"live"}}',
    );
    expect(s).toMatchObject({ executionCount: 6, inlineLogs: 3, logCount: 1, metricCount: 2 });
    expect(s).toMatchObject({ resource: 'object', mode: 'string', modeValue: 'live' });
    expect(shape('{"executions":{},"logs":"x","metrics":null,"resource":[]}')).toMatchObject({
      executions: 'object',
      logs: 'string',
      metrics: 'null',
      resource: 'array',
      mode: undefined,
    });
    expect(shape('{"resource":{"mode":1}}')).toMatchObject({ mode: 'number', modeValue: undefined });
    expect(shape('{"resource":{"mode":false}}').mode).toBe('boolean');
  });

  it('keeps the last of duplicate keys, as JSON.parse does', () => {
    expect(shape('{"executions":[1,2],"executions":5}')).toMatchObject({
      executions: 'number',
      executionCount: 0,
    });
    expect(shape('{"executions":[{"logs":[1,2]}],"executions":[{},{}]}')).toMatchObject({
      executionCount: 2,
      inlineLogs: 0,
    });
    expect(shape('{"executions":[{"logs":[1,2],"logs":3},{"logs":1,"logs":[1]}]}').inlineLogs).toBe(1);
    expect(shape('{"logs":[1],"logs":[1,2,3]}').logCount).toBe(3);
    expect(shape('{"resource":{"mode":"live","mode":"test"}}').modeValue).toBe('test');
    expect(shape('{"resource":{"mode":"live"},"resource":{}}').mode).toBeUndefined();
    expect(shape('{"resource":{"mode":"live"},"resource":1}')).toMatchObject({
      resource: 'number',
      mode: undefined,
    });
  });

  it('compares keys after decoding escapes', () => {
    expect(shape('{"\\u0065xecutions":[1,2]}').executionCount).toBe(2);
    expect(shape('{"executions":[{"lo\\u0067s":[1,2,3]}]}').inlineLogs).toBe(3);
    expect(shape('{"\\u006Detrics":[1],"l\\u006fgs":[1]}')).toMatchObject({ metricCount: 1, logCount: 1 });
    expect(shape('{"resource":{"\\u006dode":"t\\u0065st"}}').modeValue).toBe('test');
    expect(shape('{"r\\u0065source":{"mode":"\\u00e9"}}').modeValue).toBe('é');
    expect(shape('{"executions\\n":[1],"\\"logs":[1],"logs\\u0000":[1]}')).toMatchObject({
      executions: undefined,
      logs: undefined,
    });
    // A non-ASCII key never equals an ASCII one, whatever its bytes.
    expect(shape(Buffer.concat([bytes('{"log'), Buffer.from([0xf3]), bytes('":[1]}')])).logs).toBeUndefined();
  });
});

describe('checkEnvelopeBytes answers as parseJson + checkEnvelope', () => {
  const bodies = [
    '{}',
    '[]',
    '"x"',
    'null',
    '{"resource":"checkout"}',
    '{"resource":null}',
    '{"resource":{"mode":"live"}}',
    '{"resource":{"mode":"prod"}}',
    '{"resource":{"mode":null}}',
    '{"resource":{"mode":"test"},"executions":{},"metrics":1}',
    '{"executions":[{},{},{},{}]}',
    '{"executions":[{"logs":[1,2,3]}],"logs":[1,2]}',
    '{"metrics":[1,2,3],"logs":[1,2,3,4,5]}',
    '{"executions":[{"logs":[1,2]},{}],"logs":[1],"metrics":[1]}',
    '{"executions":[1,2],"executions":5}',
    '{"executions":[],"logs":"x"}',
    '{"executions":[} ',
  ];
  it.each(bodies)('%j', (text) => {
    for (const mode of ['test', 'live'] as const) {
      expect(scanned(bytes(text), mode)).toEqual(reference(bytes(text), mode));
    }
  });

  it('a syntax error keeps parseJson’s answer', () => {
    try {
      checkEnvelopeBytes(bytes('{"a":1,}'), 'test', limits);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ServiceError);
      expect((err as ServiceError).status).toBe(400);
      expect((err as ServiceError).code).toBe('VALIDATION_ERROR');
      expect((err as ServiceError).message).toBe('the body is not valid JSON');
      expect((err as ServiceError).details).toEqual([
        { path: '', message: 'Expected double-quoted property name in JSON at byte 7' },
      ]);
    }
  });
});

// ---- property tests ----

/** A JSON text built by hand, so that keys can repeat and be escaped and whitespace can vary. */
type Doc = { obj: [string, Doc][] } | { arr: Doc[] } | { raw: unknown };

const KEYS = ['executions', 'logs', 'metrics', 'resource', 'mode', 'sdk', 'é', ''];
const keyArb = fc.oneof(
  { arbitrary: fc.constantFrom(...KEYS), weight: 4 },
  { arbitrary: fc.string({ unit: 'binary', maxLength: 6 }), weight: 1 },
);
const rawArb = fc.oneof(
  fc.constantFrom<unknown>('test', 'live', 'prod', 'Test', 0, -1.5e-7, 1e21, true, false, null),
  fc.jsonValue({ maxDepth: 2, stringUnit: 'binary' }),
);
const { doc: docArb } = fc.letrec<{ doc: Doc }>((tie) => ({
  doc: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    { arbitrary: rawArb.map((raw) => ({ raw })), weight: 2 },
    { arbitrary: fc.array(tie('doc'), { maxLength: 5 }).map((arr) => ({ arr })), weight: 2 },
    {
      arbitrary: fc.array(fc.tuple(keyArb, tie('doc')), { maxLength: 5 }).map((obj) => ({ obj })),
      weight: 3,
    },
  ),
}));
/** Mostly envelopes: an object whose entries are biased to the fields the check reads. */
const envelopeArb = fc.oneof(
  { arbitrary: fc.array(fc.tuple(keyArb, docArb), { maxLength: 6 }).map((obj): Doc => ({ obj })), weight: 4 },
  { arbitrary: docArb, weight: 1 },
);
const styleArb = fc.record({
  ws: fc.array(fc.constantFrom('', '', '', ' ', '\n', '\t', '\r\n  '), { minLength: 1, maxLength: 8 }),
  escapes: fc.integer({ min: 0, max: 0xffff }),
});

/** A string with some of its characters written as \uXXXX escapes, chosen by the bits of `escapes`. */
function encodeKey(key: string, escapes: number): string {
  let out = '"';
  for (let i = 0; i < key.length; i++) {
    const ch = key[i]!;
    if ((escapes >> (i % 16)) & 1) {
      const hex = ch.charCodeAt(0).toString(16).padStart(4, '0');
      out += `\\u${i % 2 ? hex.toUpperCase() : hex}`;
    } else out += JSON.stringify(ch).slice(1, -1);
  }
  return `${out}"`;
}

function serialize(doc: Doc, style: { ws: string[]; escapes: number }): string {
  let w = 0;
  const ws = () => style.ws[w++ % style.ws.length]!;
  const write = (d: Doc): string => {
    if ('raw' in d)
      return typeof d.raw === 'string' ? encodeKey(d.raw, style.escapes) : JSON.stringify(d.raw);
    if ('arr' in d) return `[${ws()}${d.arr.map((x) => `${write(x)}${ws()}`).join(`,${ws()}`)}]`;
    return `{${ws()}${d.obj.map(([k, v]) => `${encodeKey(k, style.escapes)}${ws()}:${ws()}${write(v)}${ws()}`).join(`,${ws()}`)}}`;
  };
  return `${ws()}${write(doc)}${ws()}`;
}

const modeArb = fc.constantFrom<'test' | 'live'>('test', 'live');

describe('scanEnvelope: equivalence with JSON.parse + checkEnvelope (properties)', () => {
  it('generated bodies: same counts or the same error', () => {
    fc.assert(
      fc.property(envelopeArb, styleArb, modeArb, (doc, style, mode) => {
        const buf = bytes(serialize(doc, style));
        expect(parses(buf)).toBe(true);
        expect(scanned(buf, mode)).toEqual(reference(buf, mode));
      }),
      { numRuns: 3000 },
    );
  });

  it('JSON.stringify of generated envelopes, indented or not', () => {
    const itemArb = fc.oneof(
      fc.jsonValue({ maxDepth: 2 }),
      fc.record({
        logs: fc.oneof(fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 4 }), fc.jsonValue()),
      }),
    );
    const bodyArb = fc.record(
      {
        executions: fc.oneof(fc.array(itemArb, { maxLength: 5 }), fc.jsonValue({ maxDepth: 1 })),
        logs: fc.oneof(
          fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 5 }),
          fc.jsonValue({ maxDepth: 1 }),
        ),
        metrics: fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 3 }),
        resource: fc.oneof(
          fc.record(
            { mode: fc.constantFrom<unknown>('test', 'live', 'prod', 1, null), service: fc.string() },
            {
              requiredKeys: [],
            },
          ),
          fc.jsonValue({ maxDepth: 1, stringUnit: 'grapheme' }),
        ),
        sdk: fc.jsonValue({ stringUnit: 'binary' }),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(bodyArb, fc.constantFrom(undefined, 0, 2, '\t'), modeArb, (body, indent, mode) => {
        const buf = bytes(JSON.stringify(body, null, indent));
        expect(scanned(buf, mode)).toEqual(reference(buf, mode));
      }),
      { numRuns: 2000 },
    );
  });

  // Bytes a mutation inserts or writes: mostly JSON's own, plus the ones it must refuse or pass through.
  const byteArb = fc.oneof(
    { arbitrary: fc.constantFrom(...bytes('{}[],:"\\/ \t\n\r0123456789-+.eEtrufalsn')), weight: 6 },
    {
      arbitrary: fc.constantFrom(0x00, 0x08, 0x0b, 0x0c, 0x1f, 0x7f, 0x80, 0xbf, 0xc0, 0xe2, 0xef, 0xff),
      weight: 2,
    },
    { arbitrary: fc.integer({ min: 0, max: 255 }), weight: 1 },
  );
  const mutationArb = fc.tuple(fc.constantFrom('insert', 'delete', 'replace'), fc.nat(), byteArb);

  function mutate(buf: Buffer, [op, at, byte]: [string, number, number]): Buffer {
    const i = at % (buf.length + 1);
    if (op === 'insert') return Buffer.concat([buf.subarray(0, i), Buffer.from([byte]), buf.subarray(i)]);
    if (buf.length === 0) return buf;
    const j = at % buf.length;
    if (op === 'delete') return Buffer.concat([buf.subarray(0, j), buf.subarray(j + 1)]);
    const out = Buffer.from(buf);
    out[j] = byte;
    return out;
  }

  it('byte mutations of valid bodies: accepted exactly when JSON.parse accepts, with the same answer', () => {
    fc.assert(
      fc.property(
        envelopeArb,
        styleArb,
        fc.array(mutationArb, { minLength: 1, maxLength: 3 }),
        modeArb,
        (doc, style, mutations, mode) => {
          const buf = mutations.reduce(mutate, bytes(serialize(doc, style)));
          expect(scanEnvelope(buf).ok).toBe(parses(buf));
          expect(scanned(buf, mode)).toEqual(reference(buf, mode));
        },
      ),
      { numRuns: 4000 },
    );
  });

  it('token soup: accepted exactly when JSON.parse accepts', () => {
    const token = fc.constantFrom(
      ...[
        '{',
        '}',
        '[',
        ']',
        ',',
        ':',
        ' ',
        '\n',
        '"a"',
        '"logs"',
        '"\\u0041"',
        '"\\',
        '"',
        '0',
        '-',
        '1',
        '.',
        'e',
      ],
      ...['E', '+', '12', '-0', 'true', 'false', 'null', 'nul', '\\u', '\\n', 'x', '\t', '\u00e9', '\u2028'],
    );
    fc.assert(
      fc.property(fc.array(token, { maxLength: 12 }), (tokens) => {
        const buf = bytes(tokens.join(''));
        expect(scanEnvelope(buf).ok).toBe(parses(buf));
      }),
      { numRuns: 4000 },
    );
  });
});

describe('grouped parse by the cuts of the scan (pipeline/grouped-json.ts)', () => {
  /** What the pipeline parses for `buf` when the API cut its arrays every `group` bytes. */
  const grouped = (buf: Buffer, group: number) => {
    const scan = scanEnvelope(buf, group);
    if (!scan.ok) throw new Error(scan.message);
    const { cuts, executionCount, logCount, metricCount } = scan.shape;
    const header = encodeJsonCuts(cuts, { executions: executionCount, logs: logCount, metrics: metricCount });
    const parsed = parseIngestJson(buf, header || undefined);
    expect(parsed.grouped).toBe(header !== '');
    return { header, value: parsed.value };
  };
  const groupArb = fc.constantFrom(1, 2, 7, 40, 1 << 20);

  it('generated bodies (repeated and escaped keys, any whitespace, binary strings): the value JSON.parse makes', () => {
    fc.assert(
      fc.property(envelopeArb, styleArb, groupArb, (doc, style, group) => {
        const buf = bytes(serialize(doc, style));
        expect(grouped(buf, group).value).toStrictEqual(JSON.parse(buf.toString('utf8')));
      }),
      { numRuns: 3000 },
    );
  });

  it('item arrays of many items are cut into groups of whole items, each at least the group size', () => {
    const body = {
      resource: { service: 'checkout' },
      executions: Array.from({ length: 300 }, (_, i) => ({
        executionId: `ex-${i}`,
        tags: [i, `é${i}`, { i }],
      })),
      logs: [],
      metrics: Array.from({ length: 50 }, (_, i) => ({ name: 'm', value: i })),
    };
    const buf = bytes(JSON.stringify(body, null, 1));
    const { header, value } = grouped(buf, 512);
    expect(value).toStrictEqual(body);
    const executions = /executions=300:([\d,]+)/.exec(header)![1]!.split(',').map(Number);
    expect(executions.length).toBeGreaterThan(10);
    // Every group but the last reaches the size; the cuts between groups are commas.
    for (let g = 0; g + 2 < executions.length; g++) {
      expect(executions[g + 1]! - executions[g]!).toBeGreaterThanOrEqual(512);
      expect(buf[executions[g + 1]!]).toBe(','.charCodeAt(0));
    }
    expect(buf[executions[0]! - 1]).toBe('['.charCodeAt(0));
    expect(buf[executions.at(-1)!]).toBe(']'.charCodeAt(0));
    expect(header).toMatch(/logs=0:\d+,\d+/);
  });

  it('a header that does not fit the body is not believed: the body is parsed whole', () => {
    const buf = bytes(JSON.stringify({ executions: [{ a: 1 }, { b: 2 }], logs: [{ c: '],[' }] }));
    const whole = JSON.parse(buf.toString('utf8'));
    for (const header of [
      'executions=2:15,20,31',
      'executions=3:15,23,30',
      'logs=1:40,45',
      'executions=2:1,2',
      'nonsense',
      'executions=2:30,15',
    ])
      expect(parseIngestJson(buf, header)).toStrictEqual({ value: whole, grouped: false });
  });
});
