import { spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';
import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { SeverityNumber } from '@opentelemetry/api-logs';
import { OTLPLogExporter } from '@opentelemetry/exporter-logs-otlp-proto';
import { OTLPMetricExporter as OTLPMetricJsonExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-proto';
import { OTLPTraceExporter as OTLPTraceJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { LoggerProvider, SimpleLogRecordProcessor } from '@opentelemetry/sdk-logs';
import { MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requestType, responseType, statusType } from '../../pipeline/otlp/proto.js';
import {
  createTenant,
  eventually,
  get,
  json,
  startStack,
  type TestStack,
  type TestTenant,
} from '../support/env.js';

/**
 * CONTRACT §12 against a running service (listening on a port): the stock OpenTelemetry JS SDK exports spans, logs
 * and metrics with its protobuf and JSON exporters, and they come back as executions with their child spans and
 * logs, and as metric series; raw requests check the OTLP answers and errors.
 */

const fixtures = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures');

let stack: TestStack;
let tenant: TestTenant;
let base: string;

beforeAll(async () => {
  stack = await startStack('otlp', { PORT: '0', HOST: '127.0.0.1' }, { listen: true });
  tenant = await createTenant(stack.service);
  base = stack.service.url!;
});
afterAll(async () => {
  await stack?.close();
});

const unique = (tag: string) => `${tag}-${process.pid}-${Date.now().toString(36)}`;
const headers = () => ({ authorization: `Bearer ${tenant.keys.test}` });

type Detail = Record<string, unknown> & {
  spans: { spanId: string; parentSpanId: string | null; name: string; kind: string; status: string }[];
  logs: { message: string; level: string; spanId: string | null; traceId: string | null }[];
};

async function executionOf(spanId: string): Promise<Detail> {
  return eventually(
    async () => {
      const res = await get(stack.service, tenant.keys.test!, `/api/executions/${spanId}`);
      return res.statusCode === 200 ? json<Detail>(res) : null;
    },
    (d) => d !== null,
  ) as Promise<Detail>;
}

function tracerProvider(service: string, exporter: OTLPTraceExporter | OTLPTraceJsonExporter) {
  return new BasicTracerProvider({
    resource: resourceFromAttributes({
      'service.name': service,
      'deployment.environment.name': 'staging',
      'host.name': 'web-7',
    }),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
}

describe('OTLP from the stock OpenTelemetry SDK', () => {
  it('shows a server span (protobuf exporter) as an execution with its child spans and their logs', async () => {
    const service = unique('orders');
    const provider = tracerProvider(
      service,
      new OTLPTraceExporter({ url: `${base}/v1/traces`, headers: headers() }),
    );
    const logs = new LoggerProvider({
      resource: resourceFromAttributes({ 'service.name': service }),
      processors: [
        new SimpleLogRecordProcessor({
          exporter: new OTLPLogExporter({ url: `${base}/v1/logs`, headers: headers() }),
        }),
      ],
    });
    const tracer = provider.getTracer('test');
    const server = tracer.startSpan('GET /orders/:id', {
      kind: SpanKind.SERVER,
      attributes: {
        'http.request.method': 'GET',
        'http.route': '/orders/:id',
        'url.path': '/orders/42',
        'http.response.status_code': 500,
        'customer.tier': 'gold',
      },
    });
    const inServer = trace.setSpan(context.active(), server);
    const query = tracer.startSpan(
      'SELECT orders',
      { kind: SpanKind.CLIENT, attributes: { 'db.system': 'postgresql' } },
      inServer,
    );
    const inQuery = trace.setSpan(context.active(), query);
    const parse = tracer.startSpan('parse rows', { kind: SpanKind.INTERNAL }, inQuery);
    parse.end();
    logs.getLogger('orders-db').emit({
      severityNumber: SeverityNumber.WARN,
      severityText: 'WARN',
      body: 'slow query',
      attributes: { 'db.rows': 1200 },
      context: inQuery,
    });
    query.end();
    server.recordException(new TypeError('order 42 has no customer'));
    server.setStatus({ code: SpanStatusCode.ERROR, message: 'boom' });
    server.end();
    await provider.forceFlush();
    await logs.forceFlush();
    const { spanId, traceId } = server.spanContext();

    const e = await executionOf(spanId);
    expect(e).toMatchObject({
      executionId: spanId,
      traceId,
      spanId,
      service,
      environment: 'staging',
      source: 'http',
      method: 'GET',
      endpoint: '/orders/:id',
      statusCode: 500,
      outcome: 'failed',
      exceptionType: 'TypeError',
      exception: { type: 'TypeError', message: 'order 42 has no customer' },
      context: { customer: { tier: 'gold' }, resource: { host: { name: 'web-7' } } },
    });
    expect(e.outcomeEvidence).toEqual(
      expect.arrayContaining([expect.objectContaining({ kind: 'otel_status' })]),
    );
    expect(e.issue).not.toBeNull();
    // Each span was exported in a request of its own (SimpleSpanProcessor), so each is committed on its own: the
    // execution may be listed a flush before its descendants are.
    const withSpans = await eventually(
      () => executionOf(spanId),
      (d) => d.spans.length >= 2,
    );
    expect(withSpans.spans.map((s) => [s.name, s.kind, s.parentSpanId])).toEqual([
      ['SELECT orders', 'client', spanId],
      ['parse rows', 'internal', query.spanContext().spanId],
    ]);
    // The log of a child span is the execution's.
    const withLog = await eventually(
      () => executionOf(spanId),
      (d) => d.logs.length > 0,
    );
    expect(withLog.logs).toMatchObject([
      { message: 'slow query', level: 'warn', spanId: query.spanContext().spanId, traceId },
    ]);
    await provider.shutdown();
    await logs.shutdown();
  });

  it('takes the JSON exporter the same way (a CONSUMER span is a message execution)', async () => {
    const service = unique('worker');
    const provider = tracerProvider(
      service,
      new OTLPTraceJsonExporter({ url: `${base}/v1/traces`, headers: headers() }),
    );
    const span = provider.getTracer('test').startSpan('orders.created process', {
      kind: SpanKind.CONSUMER,
      attributes: { 'messaging.destination.name': 'orders.created' },
    });
    span.end();
    await provider.forceFlush();
    const e = await executionOf(span.spanContext().spanId);
    // No HTTP status, no error status: section 5's classification finds no evidence either way.
    expect(e).toMatchObject({ service, source: 'message', endpoint: 'orders.created', outcome: 'unknown' });
    await provider.shutdown();
  });

  it('turns cumulative counters into increments and keeps histograms (protobuf and JSON exporters)', async () => {
    const service = unique('billing');
    const from = Date.now() - 60_000;
    for (const [tag, Exporter] of [
      ['pb', OTLPMetricExporter],
      ['json', OTLPMetricJsonExporter],
    ] as const) {
      const reader = new PeriodicExportingMetricReader({
        exporter: new Exporter({ url: `${base}/v1/metrics`, headers: headers() }),
        exportIntervalMillis: 3_600_000,
      });
      const meters = new MeterProvider({
        resource: resourceFromAttributes({ 'service.name': service }),
        readers: [reader],
      });
      const meter = meters.getMeter('test');
      const invoices = meter.createCounter(`invoices.${tag}`);
      const latency = meter.createHistogram(`invoice-latency.${tag}`, { unit: 'ms' });
      invoices.add(5, { region: 'eu' });
      latency.record(10);
      latency.record(30);
      await meters.forceFlush();
      invoices.add(3, { region: 'eu' });
      latency.record(20);
      await meters.forceFlush();
      invoices.add(4, { region: 'eu' });
      latency.record(40);
      latency.record(50);
      await meters.forceFlush();
      // The exporter sends totals: 5, 8, 12. The first point is the baseline (CONTRACT §12): stored, 3 and 4.
      const to = Date.now() + 60_000;
      const total = await eventually(
        async () => {
          const res = await get(
            stack.service,
            tenant.keys.test!,
            `/api/metrics/series?name=invoices.${tag}&serviceName=${service}&interval=1h&from=${from}&to=${to}`,
          );
          const body = json<{ type: string; series: { points: { value: number | null }[] }[] }>(res);
          return {
            type: body.type,
            sum: body.series.flatMap((s) => s.points).reduce((a, p) => a + (p.value ?? 0), 0),
          };
        },
        (t) => t.sum === 7,
      );
      expect(total.type).toBe('counter');
      const hist = await eventually(
        async () => {
          const res = await get(
            stack.service,
            tenant.keys.test!,
            `/api/metrics/series?name=invoice_latency.${tag}&agg=count&serviceName=${service}&interval=1h&from=${from}&to=${to}`,
          );
          const body = json<{ type: string; series: { points: { value: number | null }[] }[] }>(res);
          return body.series.flatMap((s) => s.points).reduce((a, p) => a + (p.value ?? 0), 0);
        },
        (n) => n === 3,
      );
      // Counts 2, 3, 5: after the baseline, 1 and 2.
      expect(hist).toBe(3);
      await meters.shutdown();
    }
  });
});

describe('OTLP answers and errors', () => {
  const post = (path: string, body: Uint8Array | string, type: string, extra: Record<string, string> = {}) =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': type, ...headers(), ...extra },
      body,
    });
  const ns = (ms: number) => (BigInt(Math.round(ms * 1000)) * 1000n).toString();
  const span = (over: Record<string, unknown>) => ({
    traceId: '5b8efff798038103d269b633813fc60c',
    spanId: 'eee19b7ec3c1b174',
    name: 'GET /x',
    kind: 2,
    startTimeUnixNano: ns(Date.now() - 1000),
    endTimeUnixNano: ns(Date.now() - 990),
    ...over,
  });
  const tracesBody = (service: string, spans: Record<string, unknown>[]) => ({
    resourceSpans: [
      {
        resource: { attributes: [{ key: 'service.name', value: { stringValue: service } }] },
        scopeSpans: [{ spans }],
      },
    ],
  });

  it('answers 400 with a google.rpc.Status in the request encoding for a body that does not decode', async () => {
    const pb = await post(
      '/v1/traces',
      new Uint8Array([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]),
      'application/x-protobuf',
    );
    expect(pb.status).toBe(400);
    expect(pb.headers.get('content-type')).toBe('application/x-protobuf');
    const status = statusType().decode(new Uint8Array(await pb.arrayBuffer())) as unknown as {
      code: number;
      message: string;
    };
    expect(status.code).toBe(3);
    expect(status.message).toMatch(/not a valid OTLP protobuf traces request/);
    const js = await post('/v1/logs', '{"resourceLogs": [', 'application/json');
    expect(js.status).toBe(400);
    expect(await js.json()).toMatchObject({ code: 3, message: expect.stringMatching(/OTLP\/JSON logs/) });
  });

  it('answers 401, 415 and 413 as OTLP errors', async () => {
    const noKey = await fetch(`${base}/v1/traces`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(noKey.status).toBe(401);
    expect(await noKey.json()).toMatchObject({ code: 16 });
    const text = await post('/v1/metrics', 'hello', 'text/plain');
    expect(text.status).toBe(415);
    expect(((await text.json()) as { message: string }).message).toMatch(
      /application\/x-protobuf or application\/json/,
    );
    const big = await post(
      '/v1/logs',
      Buffer.alloc(stack.config.BODY_MAX_BYTES + 1, 0x20),
      'application/json',
    );
    expect(big.status).toBe(413);
  });

  it('counts spans that cannot be mapped in partialSuccess and lists them as rejections', async () => {
    const service = unique('partial');
    const body = tracesBody(service, [
      span({ spanId: 'a1a1a1a1a1a1a1a1' }),
      span({ spanId: 'b1b1b1b1b1b1b1b1', traceId: '00000000000000000000000000000000' }),
      span({ spanId: 'c1c1c1c1c1c1c1c1', endTimeUnixNano: ns(Date.now() - 5000) }),
    ]);
    const res = await post('/v1/traces', JSON.stringify(body), 'application/json');
    expect(res.status).toBe(200);
    const answer = (await res.json()) as { partialSuccess: { rejectedSpans: number; errorMessage: string } };
    expect(answer.partialSuccess.rejectedSpans).toBe(2);
    expect(answer.partialSuccess.errorMessage).toMatch(/item 1: the span has no trace id/);
    await executionOf('a1a1a1a1a1a1a1a1');
    const rejections = await eventually(
      async () =>
        json<{ data: { kind: string; index: number; requestId: string }[] }>(
          await get(stack.service, tenant.keys.test!, '/api/ingest/rejections'),
        ).data.filter((r) => r.requestId === res.headers.get('x-request-id')),
      (rs) => rs.length === 2,
    );
    expect(rejections.map((r) => [r.kind, r.index]).sort()).toEqual([
      ['spans', 1],
      ['spans', 2],
    ]);
  });

  it('answers success in protobuf, takes gzip, and stores a byte-identical body once', async () => {
    const service = unique('gzip');
    const body = tracesBody(service, [
      span({ spanId: 'd1d1d1d1d1d1d1d1' }),
      span({ spanId: 'd2d2d2d2d2d2d2d2' }),
    ]);
    const type = requestType('traces');
    const bytes = type
      .encode(
        type.fromObject({
          resourceSpans: body.resourceSpans.map((rs) => ({
            ...rs,
            scopeSpans: rs.scopeSpans.map((ss) => ({
              spans: ss.spans.map((s) => ({
                ...s,
                traceId: Buffer.from(String(s.traceId), 'hex'),
                spanId: Buffer.from(String(s.spanId), 'hex'),
              })),
            })),
          })),
        }),
      )
      .finish();
    const gz = zlib.gzipSync(bytes);
    for (let i = 0; i < 2; i++) {
      const res = await post('/v1/traces', gz, 'application/x-protobuf', { 'content-encoding': 'gzip' });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/x-protobuf');
      const answer = responseType('traces').decode(new Uint8Array(await res.arrayBuffer())) as unknown as {
        partialSuccess?: unknown;
      };
      expect(answer.partialSuccess ?? null).toBeNull();
    }
    await stack.service.pipeline!.drained();
    const list = json<{ total: number }>(
      await get(
        stack.service,
        tenant.keys.test!,
        `/api/executions?serviceName=${service}&from=${Date.now() - 3_600_000}`,
      ),
    );
    expect(list.total).toBe(2);
  });
});

describe('an app instrumented with the stock OpenTelemetry Node SDK, configured by OTEL_* variables only', () => {
  it('shows its server spans as executions with route, status, trace and exception, its logs and its counters', async () => {
    const service = unique('otel-shop');
    const child = spawn(process.execPath, [path.join(fixtures, 'otel-express-app.cjs')], {
      env: {
        ...process.env,
        OTEL_EXPORTER_OTLP_ENDPOINT: base,
        OTEL_EXPORTER_OTLP_HEADERS: `authorization=Bearer ${tenant.keys.test}`,
        OTEL_SERVICE_NAME: service,
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=staging',
        OTEL_METRIC_EXPORT_INTERVAL: '500',
        OTEL_BSP_SCHEDULE_DELAY: '200',
        OTEL_BLRP_SCHEDULE_DELAY: '200',
        OTEL_LOGS_EXPORTER: 'otlp',
        OTEL_METRICS_EXPORTER: 'otlp',
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const port = await new Promise<number>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`the app exited (${code})`)));
      readline.createInterface({ input: child.stdout! }).once('line', (l) => resolve(JSON.parse(l).port));
    });
    const app = `http://127.0.0.1:${port}`;
    await (await fetch(`${app}/users/42`)).text();
    await (await fetch(`${app}/boom`)).text();
    for (let i = 0; i < 3; i++) await (await fetch(`${app}/orders`, { method: 'POST' })).text();
    // Two more metric exports, then a clean stop (sdk.shutdown() flushes what is left).
    await new Promise((r) => setTimeout(r, 1200));
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;

    const list = await eventually(
      async () =>
        json<{ data: Record<string, unknown>[] }>(
          await get(
            stack.service,
            tenant.keys.test!,
            `/api/executions?serviceName=${service}&from=${Date.now() - 3_600_000}`,
          ),
        ).data,
      (d) => d.length >= 5,
    );
    expect(list.map((e) => `${e.method} ${e.endpoint} ${e.statusCode}`).sort()).toEqual([
      'GET /boom 500',
      'GET /users/:id 200',
      'POST /orders 201',
      'POST /orders 201',
      'POST /orders 201',
    ]);
    for (const e of list)
      expect(e).toMatchObject({ environment: 'staging', traceId: expect.stringMatching(/^[0-9a-f]{32}$/) });
    const boom = list.find((e) => e.endpoint === '/boom')!;
    expect(boom).toMatchObject({ outcome: 'failed', exceptionType: 'TypeError' });
    const user = list.find((e) => e.endpoint === '/users/:id')!;
    const detail = await eventually(
      async () =>
        json<Detail>(
          await get(stack.service, tenant.keys.test!, `/api/executions/${String(user.executionId)}`),
        ),
      // The log and the child spans may come in other requests than the SERVER span, committed a flush later.
      (d) => d.logs.length > 0 && d.spans.some((s) => s.kind === 'internal'),
    );
    // The log was recorded under Express's handler span, a child of the SERVER span: it is the execution's.
    expect(detail.logs).toMatchObject([{ message: 'user 42 loaded', level: 'info', traceId: user.traceId }]);
    expect(detail.spans.map((s) => s.kind)).toContain('internal');
    const series = json<{ type: string; series: { points: { value: number | null }[] }[] }>(
      await get(
        stack.service,
        tenant.keys.test!,
        `/api/metrics/series?name=orders.placed&serviceName=${service}&interval=1h&from=${Date.now() - 3_600_000}`,
      ),
    );
    expect(series.type).toBe('counter');
    expect(series.series.flatMap((s) => s.points).reduce((a, p) => a + (p.value ?? 0), 0)).toBe(3);
  });
});
