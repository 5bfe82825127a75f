import { describe, expect, it } from 'vitest';
import { requestType } from '../../pipeline/otlp/proto.js';
import { mapSpans, readTracesJson, readTracesProtobuf } from '../../pipeline/otlp/traces.js';
import { executionItemSchema } from '../../schemas/ingest-items.js';

const TRACE = '5b8efff798038103d269b633813fc60c';
const T0 = 1_795_560_000_000; // ms
/** Nanoseconds since the epoch, exact (ms * 1e6 as a double would not be). */
const ns = (ms: number) => (BigInt(Math.round(ms * 1000)) * 1000n).toString();

/** The spans of one request, as an OTLP/JSON body (ids in hex, 64-bit numbers as strings). */
const kv = (key: string, value: Record<string, unknown>) => ({ key, value });
const jsonBody = {
  resourceSpans: [
    {
      resource: {
        attributes: [
          kv('service.name', { stringValue: 'checkout' }),
          kv('deployment.environment.name', { stringValue: 'production' }),
          kv('host.name', { stringValue: 'web-1' }),
        ],
      },
      scopeSpans: [
        {
          spans: [
            {
              traceId: TRACE,
              spanId: 'eee19b7ec3c1b174',
              name: 'GET /orders/:id',
              kind: 2,
              startTimeUnixNano: ns(T0),
              endTimeUnixNano: ns(T0 + 12.5),
              attributes: [
                kv('http.request.method', { stringValue: 'GET' }),
                kv('http.route', { stringValue: '/orders/:id' }),
                kv('url.path', { stringValue: '/orders/42' }),
                kv('http.response.status_code', { intValue: '500' }),
                kv('customer.tier', { stringValue: 'gold' }),
                kv('cart.items', { intValue: 3 }),
                kv('flags', { arrayValue: { values: [{ stringValue: 'a' }, { boolValue: true }] } }),
              ],
              events: [
                {
                  name: 'exception',
                  attributes: [
                    kv('exception.type', { stringValue: 'TypeError' }),
                    kv('exception.message', { stringValue: 'x is undefined' }),
                    kv('exception.stacktrace', {
                      stringValue: 'TypeError: x is undefined\n    at f (a.js:1:1)',
                    }),
                  ],
                },
              ],
              status: { code: 2, message: 'boom' },
            },
            {
              traceId: TRACE,
              spanId: '0102030405060708',
              parentSpanId: 'eee19b7ec3c1b174',
              name: 'SELECT orders',
              kind: 3,
              startTimeUnixNano: ns(T0 + 1),
              endTimeUnixNano: ns(T0 + 4.25),
              attributes: [kv('db.system', { stringValue: 'postgresql' })],
            },
            {
              traceId: TRACE,
              spanId: '1112131415161718',
              name: 'orders.created process',
              kind: 5,
              startTimeUnixNano: ns(T0 + 20),
              endTimeUnixNano: ns(T0 + 21),
              attributes: [kv('messaging.destination.name', { stringValue: 'orders.created' })],
            },
            {
              traceId: '00000000000000000000000000000000',
              spanId: '2122232425262728',
              name: 'no trace',
              kind: 2,
              startTimeUnixNano: ns(T0),
              endTimeUnixNano: ns(T0 + 1),
            },
            {
              traceId: TRACE,
              spanId: '3132333435363738',
              name: 'backwards',
              kind: 2,
              startTimeUnixNano: ns(T0 + 5),
              endTimeUnixNano: ns(T0 + 1),
            },
            {
              traceId: TRACE,
              spanId: '4142434445464748',
              name: 'GET',
              kind: 2,
              startTimeUnixNano: ns(T0 + 30),
              endTimeUnixNano: ns(T0 + 31),
              attributes: [
                kv('http.method', { stringValue: 'get' }),
                kv('http.target', { stringValue: '/users/12345/cart?x=1' }),
                kv('http.status_code', { intValue: 200 }),
              ],
            },
          ],
        },
      ],
    },
  ],
};

/** The same request as protobuf, encoded by protobufjs from the vendored definitions. */
function protobufBody(): Uint8Array {
  const bytes = (hex: unknown) => (typeof hex === 'string' ? Buffer.from(hex, 'hex') : hex);
  const copy = structuredClone(jsonBody) as typeof jsonBody;
  for (const rs of copy.resourceSpans)
    for (const ss of rs.scopeSpans)
      for (const s of ss.spans as Record<string, unknown>[])
        for (const k of ['traceId', 'spanId', 'parentSpanId']) if (k in s) s[k] = bytes(s[k]);
  const type = requestType('traces');
  return type.encode(type.fromObject(copy)).finish();
}

describe('OTLP traces', () => {
  const fromProtobuf = mapSpans(readTracesProtobuf(protobufBody()));

  it('maps SERVER and CONSUMER spans to executions as CONTRACT §12 says', () => {
    expect(fromProtobuf.executions.map((e) => e.index)).toEqual([0, 2, 5]);
    const [server, consumer, legacy] = fromProtobuf.executions.map((e) => e.item);
    expect(server).toMatchObject({
      executionId: 'eee19b7ec3c1b174',
      traceId: TRACE,
      spanId: 'eee19b7ec3c1b174',
      parentSpanId: null,
      service: 'checkout',
      environment: 'production',
      source: 'http',
      method: 'GET',
      endpoint: '/orders/:id',
      statusCode: 500,
      startedAt: T0,
      durationMs: 12.5,
      exception: { type: 'TypeError', message: 'x is undefined' },
      outcomeEvidence: [{ kind: 'otel_status', verdict: 'failed', detail: 'boom' }],
      context: {
        customer: { tier: 'gold' },
        cart: { items: 3 },
        flags: '["a",true]',
        resource: { service: { name: 'checkout' }, host: { name: 'web-1' } },
      },
    });
    // The attributes that became fields are not repeated in the context.
    expect(JSON.stringify(server!.context)).not.toContain('status_code');
    expect(consumer).toMatchObject({ source: 'message', endpoint: 'orders.created', method: null });
    // Older attribute names; the path templated (no route), its query dropped.
    expect(legacy).toMatchObject({ method: 'get', endpoint: '/users/:id/cart', statusCode: 200 });
  });

  it('keeps the other spans as child spans of their trace', () => {
    expect(fromProtobuf.spans).toEqual([
      {
        index: 1,
        traceId: TRACE,
        spanId: '0102030405060708',
        parentSpanId: 'eee19b7ec3c1b174',
        name: 'SELECT orders',
        kind: 'client',
        startedAt: T0 + 1,
        durationMs: 3.25,
        status: 'unset',
        attributes: { 'db.system': 'postgresql' },
        service: 'checkout',
        environment: 'production',
      },
    ]);
  });

  it('rejects a span without a trace id and one that ends before it starts, by their index in the body', () => {
    expect(fromProtobuf.rejected).toEqual([
      { index: 3, message: 'the span has no trace id' },
      { index: 4, message: 'the span ends before it starts, or has no start' },
    ]);
  });

  it('reads OTLP/JSON into the same executions and spans as protobuf', () => {
    expect(mapSpans(readTracesJson(jsonBody))).toEqual(fromProtobuf);
  });

  it('gives executions the ingest item schema takes, as /api/ingest would', () => {
    for (const e of fromProtobuf.executions) expect(executionItemSchema.safeParse(e.item).success).toBe(true);
  });

  it('gives an execution the exception a span below it recorded (Express records it on its handler span)', () => {
    const span = (spanId: string, kind: number, parentSpanId: string, events: unknown[] = []) => ({
      traceId: TRACE,
      spanId,
      parentSpanId,
      name: 'x',
      kind,
      startTimeUnixNano: ns(T0),
      endTimeUnixNano: ns(T0 + 1),
      events,
    });
    const error = {
      name: 'exception',
      attributes: [
        kv('exception.type', { stringValue: 'TypeError' }),
        kv('exception.message', { stringValue: 'boom' }),
      ],
    };
    const mapped = mapSpans(
      readTracesJson({
        resourceSpans: [
          {
            resource: { attributes: [] },
            scopeSpans: [
              {
                spans: [
                  span('aaaaaaaaaaaaaaaa', 2, ''),
                  span('bbbbbbbbbbbbbbbb', 1, 'aaaaaaaaaaaaaaaa'),
                  span('cccccccccccccccc', 1, 'bbbbbbbbbbbbbbbb', [error]),
                  // Another execution below the first keeps its own (none), and its children's are its own.
                  span('dddddddddddddddd', 2, 'bbbbbbbbbbbbbbbb'),
                ],
              },
            ],
          },
        ],
      }),
    );
    expect(mapped.executions.map((e) => [e.item.spanId, e.item.exception])).toEqual([
      ['aaaaaaaaaaaaaaaa', { type: 'TypeError', message: 'boom', stack: null }],
      ['dddddddddddddddd', null],
    ]);
  });

  it('refuses a body that is not a request', () => {
    expect(() => readTracesProtobuf(new Uint8Array([0xff, 0xff, 0xff, 0xff]))).toThrow();
    expect(() => readTracesJson([1, 2])).toThrow();
  });
});
