import { describe, expect, it } from 'vitest';
import { CumulativeSeries } from '../../pipeline/otlp/cumulative.js';
import { checkOtlp } from '../../pipeline/otlp/decode.js';
import { levelOf, mapLogs, readLogsJson, readLogsProtobuf } from '../../pipeline/otlp/logs.js';
import { mapMetrics, metricName, readMetricsJson, readMetricsProtobuf } from '../../pipeline/otlp/metrics.js';
import { processOtlp } from '../../pipeline/otlp/process.js';
import { requestType } from '../../pipeline/otlp/proto.js';
import { logItemSchema, metricPointSchema } from '../../schemas/ingest-items.js';
import type { MetricRecord } from '../../schemas/records.js';

const T0 = 1_795_560_000_000;
const ns = (ms: number) => (BigInt(Math.round(ms * 1000)) * 1000n).toString();
const kv = (key: string, value: Record<string, unknown>) => ({ key, value });
const resource = {
  attributes: [
    kv('service.name', { stringValue: 'billing' }),
    kv('deployment.environment', { stringValue: 'prod' }),
    kv('host.name', { stringValue: 'b-1' }),
  ],
};
const TRACE = '5b8efff798038103d269b633813fc60c';

/** A JSON body encoded as protobuf by the vendored definitions (ids from hex to bytes). */
function toProtobuf(signal: 'logs' | 'metrics', body: unknown): Uint8Array {
  const copy = JSON.parse(JSON.stringify(body), (k, v) =>
    (k === 'traceId' || k === 'spanId') && typeof v === 'string' ? Buffer.from(v, 'hex') : v,
  );
  const type = requestType(signal);
  return type.encode(type.fromObject(copy)).finish();
}

const logsBody = {
  resourceLogs: [
    {
      resource,
      scopeLogs: [
        {
          scope: { name: 'payments' },
          logRecords: [
            {
              timeUnixNano: ns(T0),
              severityNumber: 17,
              body: { stringValue: 'card declined' },
              attributes: [
                kv('order.id', { intValue: '42' }),
                kv('exception.type', { stringValue: 'CardError' }),
                kv('exception.message', { stringValue: 'declined' }),
              ],
              traceId: TRACE,
              spanId: '0102030405060708',
            },
            {
              timeUnixNano: '0',
              observedTimeUnixNano: ns(T0 + 5),
              severityText: 'Warning',
              body: { kvlistValue: { values: [kv('a', { intValue: 1 })] } },
            },
            { severityNumber: 9, body: { stringValue: 'no time at all' } },
          ],
        },
      ],
    },
  ],
};

describe('OTLP logs', () => {
  const mapped = mapLogs(readLogsProtobuf(toProtobuf('logs', logsBody)));

  it('maps records as CONTRACT §12 says, protobuf and JSON alike', () => {
    expect(mapped.logs.map((l) => l.index)).toEqual([0, 1]);
    expect(mapped.logs[0]!.item).toEqual({
      timestamp: T0,
      level: 'error',
      message: 'card declined',
      service: 'billing',
      environment: 'prod',
      executionId: '0102030405060708',
      traceId: TRACE,
      spanId: '0102030405060708',
      logger: 'payments',
      attributes: { 'order.id': 42, resource: { 'host.name': 'b-1' } },
      exception: { type: 'CardError', message: 'declined', stack: null },
    });
    // The observed time when the time is 0; a structured body as JSON text; the level from the text.
    expect(mapped.logs[1]!.item).toMatchObject({
      timestamp: T0 + 5,
      level: 'warn',
      message: '{"a":1}',
      traceId: null,
      executionId: null,
    });
    expect(mapLogs(readLogsJson(logsBody))).toEqual(mapped);
    for (const l of mapped.logs) expect(logItemSchema.safeParse(l.item).success).toBe(true);
  });

  it('rejects a record with no time, by its index', () => {
    expect(mapped.rejected).toEqual([
      { index: 2, message: 'the log record has neither a time nor an observed time' },
    ]);
  });

  it('takes severity numbers by range and unknown texts as info', () => {
    expect([1, 4, 5, 9, 13, 17, 21, 24].map((n) => levelOf(n, ''))).toEqual([
      'trace',
      'trace',
      'debug',
      'info',
      'warn',
      'error',
      'fatal',
      'fatal',
    ]);
    expect(levelOf(0, 'CRITICAL')).toBe('fatal');
    expect(levelOf(99, 'whatever')).toBe('info');
  });
});

const point = (over: Record<string, unknown>) => ({
  timeUnixNano: ns(T0),
  startTimeUnixNano: ns(T0 - 60_000),
  ...over,
});
const metricsBody = {
  resourceMetrics: [
    {
      resource,
      scopeMetrics: [
        {
          scope: { name: 'app' },
          metrics: [
            {
              name: 'http.server.request-count',
              unit: '{request}',
              sum: {
                aggregationTemporality: 2,
                isMonotonic: true,
                dataPoints: [
                  point({
                    asInt: '7',
                    attributes: [kv('route', { stringValue: '/a' }), kv('code', { intValue: 200 })],
                  }),
                ],
              },
            },
            {
              name: 'queue.size',
              sum: { aggregationTemporality: 2, isMonotonic: false, dataPoints: [point({ asDouble: 3.5 })] },
            },
            {
              name: 'temp',
              gauge: { dataPoints: [point({ asDouble: 21 }), point({ asDouble: 1, flags: 1 })] },
            },
            {
              name: 'db.latency',
              histogram: {
                aggregationTemporality: 1,
                dataPoints: [
                  point({ count: '4', sum: 40, min: 2, max: 20, bucketCounts: ['4'], explicitBounds: [] }),
                  point({ count: '2', sum: 10 }),
                ],
              },
            },
            { name: 'old.summary', summary: { dataPoints: [point({ count: '1', sum: 1 })] } },
            { name: '9lives', gauge: { dataPoints: [point({ asDouble: 1, timeUnixNano: '0' })] } },
          ],
        },
      ],
    },
  ],
};

describe('OTLP metrics', () => {
  const mapped = mapMetrics(readMetricsProtobuf(toProtobuf('metrics', metricsBody)));

  it('maps each data kind as CONTRACT §12 says, protobuf and JSON alike', () => {
    const items = mapped.metrics.map((m) => [
      m.index,
      m.item.name,
      m.item.type,
      m.item.value,
      m.cumulative !== null,
    ]);
    expect(items).toEqual([
      [0, 'http.server.request_count', 'counter', 7, true],
      [1, 'queue.size', 'gauge', 3.5, false],
      [2, 'temp', 'gauge', 21, false],
      // Index 3 had no recorded value: skipped, not rejected.
      [4, 'db.latency', 'histogram', { count: 4, sum: 40, min: 2, max: 20 }, false],
      // No min or max: the mean for both.
      [5, 'db.latency', 'histogram', { count: 2, sum: 10, min: 5, max: 5 }, false],
    ]);
    expect(mapped.metrics[0]!.item).toMatchObject({
      service: 'billing',
      environment: 'prod',
      unit: '{request}',
      timestamp: T0,
      tags: { route: '/a', code: '200' },
    });
    expect(mapMetrics(readMetricsJson(metricsBody))).toEqual(mapped);
    for (const m of mapped.metrics) expect(metricPointSchema.safeParse(m.item).success).toBe(true);
  });

  it('rejects summaries and points without a time, by their index', () => {
    expect(mapped.rejected).toEqual([
      { index: 6, message: 'Summary points are not supported (send a histogram)' },
      { index: 7, message: 'the data point has no time' },
    ]);
  });

  it('cleans names to the ingest pattern, 200 characters at most', () => {
    expect(metricName('9lives/per-sec')).toBe('_lives_per_sec');
    expect(metricName('x'.repeat(300))).toHaveLength(200);
  });

  it('keeps the first 20 attributes as tags', () => {
    const attrs = Array.from({ length: 25 }, (_, i) => kv(`k${i}`, { intValue: i }));
    const body = {
      resourceMetrics: [
        {
          resource,
          scopeMetrics: [
            { metrics: [{ name: 'g', gauge: { dataPoints: [point({ asDouble: 1, attributes: attrs })] } }] },
          ],
        },
      ],
    };
    const tags = mapMetrics(readMetricsJson(body)).metrics[0]!.item.tags as Record<string, string>;
    expect(Object.keys(tags)).toHaveLength(20);
    expect(tags.k19).toBe('19');
  });
});

describe('cumulative series to increments', () => {
  const MS = 1_000_000n;
  const record = (value: number): MetricRecord => ({
    timestamp: 0,
    name: 'n',
    type: 'counter',
    value,
    histCount: null,
    histSum: null,
    histMin: null,
    histMax: null,
    unit: null,
    service: 's',
    environment: 'e',
    tags: null,
  });
  const born = 1_000_000;
  const at = (startMs: number, timeMs: number) => ({
    startNs: BigInt(startMs) * MS,
    timeNs: BigInt(timeMs) * MS,
  });
  const value = (r: MetricRecord | null) => (r === null ? null : r.value);

  it('takes a series’ first point as the baseline, then records differences', () => {
    const c = new CumulativeSeries();
    expect(value(c.increment('a', at(born - 500, born + 10), record(100)))).toBeNull();
    expect(value(c.increment('a', at(born - 500, born + 20), record(130)))).toBe(30);
    expect(value(c.increment('a', at(born - 500, born + 30), record(130)))).toBe(0);
  });

  it('records nothing for a first point, however recently its series started (CONTRACT §12)', () => {
    const c = new CumulativeSeries();
    expect(value(c.increment('b', at(born + 5, born + 10), record(7)))).toBeNull();
    expect(value(c.increment('b', at(born + 5, born + 20), record(9)))).toBe(2);
  });

  it('gives a redelivered point the same increment, and drops a late one', () => {
    const c = new CumulativeSeries();
    c.increment('a', at(born - 500, born + 10), record(100));
    expect(value(c.increment('a', at(born - 500, born + 20), record(130)))).toBe(30);
    expect(value(c.increment('a', at(born - 500, born + 20), record(130)))).toBe(30);
    expect(value(c.increment('a', at(born - 500, born + 15), record(120)))).toBeNull();
  });

  it('treats a restart (new start, or a total that falls) as counting from zero when it began after the last point', () => {
    const c = new CumulativeSeries();
    c.increment('a', at(born - 500, born + 10), record(100));
    expect(value(c.increment('a', at(born + 15, born + 20), record(4)))).toBe(4);
    // A fall without a later start: nothing can be said of what was lost; a new baseline.
    expect(value(c.increment('a', at(born + 15, born + 30), record(2)))).toBeNull();
    expect(value(c.increment('a', at(born + 15, born + 40), record(5)))).toBe(3);
  });

  it('turns histogram counts and sums into increments', () => {
    const c = new CumulativeSeries();
    const hist = (count: number, sum: number): MetricRecord => ({
      ...record(0),
      type: 'histogram',
      value: null,
      histCount: count,
      histSum: sum,
      histMin: 1,
      histMax: 9,
    });
    c.increment('h', at(born - 5, born + 10), hist(4, 40));
    expect(c.increment('h', at(born - 5, born + 20), hist(6, 55))).toMatchObject({
      histCount: 2,
      histSum: 15,
    });
    // No new observation: nothing to record.
    expect(c.increment('h', at(born - 5, born + 30), hist(6, 55))).toBeNull();
  });
});

describe('an OTLP body through the ingest stages', () => {
  it('names rejections by the body item: kind spans, the span index, for a span the execution schema refuses', () => {
    const body = {
      resourceSpans: [
        {
          resource: { attributes: [kv('service.name', { stringValue: 's'.repeat(200) })] },
          scopeSpans: [
            {
              spans: [
                {
                  traceId: TRACE,
                  spanId: '0000000000000000',
                  kind: 2,
                  startTimeUnixNano: ns(T0),
                  endTimeUnixNano: ns(T0 + 1),
                },
                {
                  traceId: TRACE,
                  spanId: '1111111111111111',
                  kind: 2,
                  startTimeUnixNano: ns(T0),
                  endTimeUnixNano: ns(T0 + 1),
                },
              ],
            },
          ],
        },
      ],
    };
    const bytes = Buffer.from(JSON.stringify(body));
    const out = processOtlp('traces', 'json', bytes, { mode: 'test', requestId: 'r', receivedAt: T0 });
    expect(out.out.executions).toEqual([]);
    expect(out.out.rejections.map((r) => [r.kind, r.index, r.details[0]!.path])).toEqual([
      ['spans', 0, ''],
      ['spans', 1, 'service'],
    ]);
    // The API's check counts only what the mapping itself cannot take.
    expect(checkOtlp('traces', 'json', bytes)).toEqual({
      items: 2,
      rejected: 1,
      message: 'item 0: the span has no span id',
    });
  });

  it('takes hostile attribute names and values as data: __proto__ keys, NaN, deep nesting, secrets inside maps', () => {
    // 5,000 levels, written as text (JSON.stringify itself would overflow the stack on it).
    const deepText = `${'{"kvlistValue":{"values":[{"key":"k","value":'.repeat(5000)}{"stringValue":"bottom"}${'}]}}'.repeat(5000)}`;
    const attrs = [
      kv('__proto__.outcome', { stringValue: 'success' }),
      kv('__proto__', { kvlistValue: { values: [kv('polluted', { boolValue: true })] } }),
      kv('ratio', { doubleValue: 'NaN' }),
      kv('headers', { kvlistValue: { values: [kv('authorization', { stringValue: 'Bearer sekret-abc' })] } }),
      kv('deep', { stringValue: 'DEEP' }),
    ];
    const span = (spanId: string, kind: number) => ({
      traceId: TRACE,
      spanId,
      kind,
      startTimeUnixNano: ns(T0),
      endTimeUnixNano: ns(T0 + 1),
      attributes: attrs,
    });
    const body = {
      resourceSpans: [
        { resource, scopeSpans: [{ spans: [span('3333333333333333', 2), span('4444444444444444', 3)] }] },
      ],
    };
    const text = JSON.stringify(body).replaceAll('{"stringValue":"DEEP"}', deepText);
    const out = processOtlp('traces', 'json', Buffer.from(text), {
      mode: 'test',
      requestId: 'r',
      receivedAt: T0,
    });
    expect(({} as Record<string, unknown>).outcome).toBeUndefined();
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(out.out.rejections).toEqual([]);
    const e = out.out.executions[0]!;
    expect(e.outcome).toBe('unknown');
    const context = JSON.parse(e.context!);
    expect(context.ratio).toBe('NaN');
    expect(context.headers).toBe('{"authorization":"[redacted]"}');
    expect(JSON.stringify(context)).toContain('nested deeper than 8 levels');
    expect(out.spans).toHaveLength(1);
    expect(out.spans[0]!.attributes).not.toContain('sekret');
  });

  it('rejects spans whose ids are not 16 and 8 bytes, or that last over 24 hours', () => {
    const span = (over: Record<string, unknown>) => ({
      traceId: TRACE,
      spanId: '5555555555555555',
      kind: 3,
      startTimeUnixNano: ns(T0),
      endTimeUnixNano: ns(T0 + 1),
      ...over,
    });
    const body = {
      resourceSpans: [
        {
          resource,
          scopeSpans: [
            {
              spans: [
                span({ traceId: 'abc' }),
                span({ spanId: 'x'.repeat(16) }),
                span({ endTimeUnixNano: ns(T0 + 86_400_001) }),
                span({}),
              ],
            },
          ],
        },
      ],
    };
    const bytes = Buffer.from(JSON.stringify(body));
    expect(checkOtlp('traces', 'json', bytes)).toMatchObject({ items: 4, rejected: 3 });
    const out = processOtlp('traces', 'json', bytes, { mode: 'test', requestId: 'r', receivedAt: T0 });
    expect(out.out.rejections.map((r) => [r.index, r.details[0]!.message])).toEqual([
      [0, 'the trace id is not 16 bytes'],
      [1, 'the span id is not 8 bytes'],
      [2, 'the span lasts longer than 24 hours'],
    ]);
    expect(out.spans).toHaveLength(1);
  });

  it('scrubs child spans as it does any item, and stores their start in whole milliseconds', () => {
    const body = {
      resourceSpans: [
        {
          resource,
          scopeSpans: [
            {
              spans: [
                {
                  traceId: TRACE,
                  spanId: '2222222222222222',
                  kind: 3,
                  name: 'POST /login',
                  startTimeUnixNano: ns(T0 + 0.75),
                  endTimeUnixNano: ns(T0 + 1),
                  attributes: [
                    kv('http.request.header.authorization', { stringValue: 'Bearer abc' }),
                    kv('db.password', { stringValue: 'hunter2' }),
                  ],
                },
              ],
            },
          ],
        },
      ],
    };
    const out = processOtlp('traces', 'json', Buffer.from(JSON.stringify(body)), {
      mode: 'test',
      requestId: 'r',
      receivedAt: T0,
    });
    expect(out.spans).toHaveLength(1);
    expect(out.spans[0]!.attributes).not.toContain('hunter2');
    expect(out.spans[0]!.attributes).not.toContain('abc');
    // Timestamps are stored as integer milliseconds (a fraction broke the Parquet encoder).
    expect(out.spans[0]!.startedAt).toBe(T0);
    expect(out.spans[0]!.durationMs).toBe(0.25);
  });
});
