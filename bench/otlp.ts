import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { freePort } from '../broker/nats-server.js';
import { requestType } from '../pipeline/otlp/proto.js';
import { readTracesProtobuf } from '../pipeline/otlp/traces.js';
import { drive, procStats } from './support/load.js';
import {
  cleanupService,
  natsServerPid,
  ServiceProcess,
  serviceEntry,
  signupKey,
} from './support/service-process.js';
import { type BodyTemplate, buildTemplate, decodedBytes, rng, stampBody } from './traffic.js';

/**
 * OTLP traces ingest beside /api/ingest JSON, end to end (issue 15): each on a fresh service started here on its
 * embedded defaults, closed loop over HTTP, until everything accepted is stored (visible to the list API).
 * OTLP bodies have the protobuf exporter's batch shape: 512 spans a request, here 128 traces of a SERVER span
 * with three children (a database CLIENT span, an INTERNAL span, an HTTP CLIENT span), with the attributes the
 * stock Node instrumentations set. JSON bodies are the ingest bench's default (500 executions with their logs
 * and metric points). Reported: items stored per second (spans; executions), the service's CPU per item
 * (nats-server included), and the ceilings of the same run: protobuf decode (protobufjs) and JSON.parse on one
 * thread. Results in bench/results/otlp-<time>.json.
 */

const here = path.dirname(fileURLToPath(import.meta.url));
const resultsDir = path.resolve(here, '..', '..', 'bench', 'results');

const USAGE = `usage: npm run bench -- otlp [options]
  --duration S      seconds of load per phase (20)
  --concurrency N   HTTP connections sending at once (8)
  --spans N         spans per OTLP request, a multiple of 4 (512)
  --phases LIST     which phases, in order (json,otlp)
`;

const TRACE_SPANS = 4;
const TEMPLATES = 64;
/** The 4-byte mark at the start of every id in a template, overwritten by the request number. */
const MARK = Buffer.from([0xfe, 0xed, 0xfa, 0xce]);

interface OtlpTemplate {
  bytes: Buffer;
  /** Byte offsets of the marks in the encoded body. */
  offsets: number[];
  spans: number;
  executions: number;
}

const kv = (key: string, v: string | number) => ({
  key,
  value: typeof v === 'string' ? { stringValue: v } : { intValue: v },
});

/** One protobuf ExportTraceServiceRequest of `spans` spans, every id starting with MARK. */
export function buildOtlpTemplate(seed: number, spans: number): OtlpTemplate {
  const r = rng(seed);
  const now = Date.now();
  const ns = (ms: number) => BigInt(Math.round(ms * 1000)) * 1000n;
  const id = (n: number, bytes: number) => {
    const b = Buffer.alloc(bytes);
    MARK.copy(b, 0);
    b.writeUInt32BE(seed * 100_000 + n, bytes - 4);
    return b;
  };
  const service = `service-${String(seed % 20).padStart(2, '0')}`;
  const routes = ['/orders/:id', '/users/:id/cart', '/search', '/checkout', '/products/:sku'];
  const list = [];
  for (let t = 0; t < spans / TRACE_SPANS; t++) {
    const traceId = id(t, 16);
    const serverId = id(t * TRACE_SPANS, 8);
    const start = now - 60_000 + r() * 50_000;
    const duration = 5 + r() * 200;
    const failed = r() < 0.02;
    const route = routes[Math.floor(r() * routes.length)]!;
    const span = (n: number, over: Record<string, unknown>) => ({
      traceId,
      spanId: n === 0 ? serverId : id(t * TRACE_SPANS + n, 8),
      ...(n === 0 ? {} : { parentSpanId: serverId }),
      ...over,
    });
    list.push(
      span(0, {
        name: `GET ${route}`,
        kind: 2,
        startTimeUnixNano: ns(start),
        endTimeUnixNano: ns(start + duration),
        attributes: [
          kv('http.request.method', 'GET'),
          kv('http.route', route),
          kv('url.path', route.replace(':id', String(Math.floor(r() * 1e6))).replace(':sku', 'sku-1')),
          kv('url.scheme', 'http'),
          kv('server.address', 'api.example.com'),
          kv('server.port', 8080),
          kv('network.protocol.version', '1.1'),
          kv('client.address', `10.0.${Math.floor(r() * 255)}.${Math.floor(r() * 255)}`),
          kv('user_agent.original', 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36'),
          kv('http.response.status_code', failed ? 500 : 200),
        ],
        events: failed
          ? [
              {
                name: 'exception',
                timeUnixNano: ns(start + duration - 1),
                attributes: [
                  kv('exception.type', 'TypeError'),
                  kv('exception.message', `cannot read properties of undefined (reading 'id') #${seed % 7}`),
                  kv(
                    'exception.stacktrace',
                    'TypeError: cannot read properties of undefined\n    at handler (app.js:10:5)',
                  ),
                ],
              },
            ]
          : [],
        status: failed ? { code: 2, message: 'internal error' } : {},
      }),
      span(1, {
        name: 'SELECT orders',
        kind: 3,
        startTimeUnixNano: ns(start + 1),
        endTimeUnixNano: ns(start + duration / 2),
        attributes: [
          kv('db.system', 'postgresql'),
          kv('db.name', 'shop'),
          kv('db.statement', 'SELECT * FROM orders WHERE id = $1'),
          kv('server.address', 'db.internal'),
        ],
      }),
      span(2, {
        name: 'render',
        kind: 1,
        startTimeUnixNano: ns(start + duration / 2),
        endTimeUnixNano: ns(start + duration * 0.6),
        attributes: [kv('template', 'order')],
      }),
      span(3, {
        name: 'GET',
        kind: 3,
        startTimeUnixNano: ns(start + duration * 0.6),
        endTimeUnixNano: ns(start + duration * 0.9),
        attributes: [
          kv('http.request.method', 'GET'),
          kv('url.full', 'http://inventory.internal/stock/sku-1'),
          kv('http.response.status_code', 200),
        ],
      }),
    );
  }
  const body = {
    resourceSpans: [
      {
        resource: {
          attributes: [
            kv('service.name', service),
            kv('service.version', '1.4.2'),
            kv('deployment.environment.name', 'production'),
            kv('host.name', `web-${seed % 5}`),
            kv('process.pid', 1000 + seed),
            kv('process.runtime.name', 'nodejs'),
            kv('telemetry.sdk.language', 'nodejs'),
            kv('telemetry.sdk.name', 'opentelemetry'),
            kv('telemetry.sdk.version', '2.12.1'),
          ],
        },
        scopeSpans: [
          { scope: { name: '@opentelemetry/instrumentation-http', version: '0.223.0' }, spans: list },
        ],
      },
    ],
  };
  const type = requestType('traces');
  const bytes = Buffer.from(type.encode(type.fromObject(body)).finish());
  const offsets: number[] = [];
  for (let at = bytes.indexOf(MARK); at >= 0; at = bytes.indexOf(MARK, at + 1)) offsets.push(at);
  // Trace and span ids of every span, and the children's parent ids.
  const expected = spans * 2 + (spans / TRACE_SPANS) * (TRACE_SPANS - 1);
  if (offsets.length !== expected) throw new Error(`found ${offsets.length} id marks, expected ${expected}`);
  return { bytes, offsets, spans, executions: spans / TRACE_SPANS };
}

/** The body of request `n`: every id's first four bytes are the request number. */
export function stampOtlp(t: OtlpTemplate, n: number): Buffer {
  const out = Buffer.from(t.bytes);
  for (const at of t.offsets) out.writeUInt32BE(n, at);
  return out;
}

interface Phase {
  name: 'json' | 'otlp';
  requests: number;
  /** Spans (otlp) or executions (json) accepted. */
  items: number;
  executions: number;
  /** Items over the time from the first request until every accepted execution was visible. */
  storedItemsPerSec: number;
  storedExecutionsPerSec: number;
  seconds: number;
  cpuSeconds: number;
  cpuMicrosPerItem: number;
  peakRssMiB: number;
}

const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

async function runPhase(
  name: Phase['name'],
  dir: string,
  o: { duration: number; concurrency: number },
  body: (n: number) => { path: string; type: string; bytes: Buffer; items: number; executions: number },
): Promise<Phase> {
  const dataDir = path.join(dir, `data-${name}`);
  const svc = ServiceProcess.spawn({
    mainJs: serviceEntry(import.meta.url),
    dataDir,
    port: await freePort(),
  });
  try {
    await svc.waitReady();
    const key = await signupKey(svc.url, `otlp-${name}`);
    const natsPid = await natsServerPid(dataDir);
    const pids = [svc.pid, ...(natsPid ? [natsPid] : [])];
    const cpu = async () => (await Promise.all(pids.map(procStats))).reduce((a, s) => a + s.cpuSeconds, 0);
    const pool = new Pool(svc.url, { connections: o.concurrency, pipelining: 1 });
    let items = 0;
    let executions = 0;
    const cpu0 = await cpu();
    const start = performance.now();
    const load = await drive({
      concurrency: o.concurrency,
      seconds: o.duration,
      send: async (n) => {
        const b = body(n);
        const res = await pool.request({
          method: 'POST',
          path: b.path,
          headers: { authorization: `Bearer ${key}`, 'content-type': b.type },
          body: b.bytes,
        });
        await res.body.dump();
        const ok = res.statusCode === 200 || res.statusCode === 202;
        if (ok) {
          items += b.items;
          executions += b.executions;
        }
        return ok;
      },
    });
    await pool.close();
    // Every accepted execution visible to the list (its child spans are committed with it, in the same batch).
    const deadline = Date.now() + 300_000;
    for (;;) {
      const res = await fetch(`${svc.url}/api/executions?pageSize=1&from=${Date.now() - 3 * 3_600_000}`, {
        headers: { 'x-api-key': key },
      });
      const total = ((await res.json()) as { total: number }).total;
      if (total >= executions) break;
      if (Date.now() > deadline) throw new Error(`${name}: ${total} of ${executions} executions visible`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const seconds = (performance.now() - start) / 1000;
    const cpuSeconds = (await cpu()) - cpu0;
    const peakRssMiB = (await Promise.all(pids.map(procStats))).reduce((a, s) => a + s.peakRssMiB, 0);
    return {
      name,
      requests: load.accepted,
      items,
      executions,
      storedItemsPerSec: items / seconds,
      storedExecutionsPerSec: executions / seconds,
      seconds,
      cpuSeconds,
      cpuMicrosPerItem: (cpuSeconds * 1e6) / items,
      peakRssMiB,
    };
  } finally {
    await cleanupService(svc, dataDir);
  }
}

export async function main(argv: string[] = process.argv.slice(2)): Promise<unknown> {
  const { values } = parseArgs({
    args: argv,
    options: {
      duration: { type: 'string', default: '20' },
      concurrency: { type: 'string', default: '8' },
      spans: { type: 'string', default: '512' },
      phases: { type: 'string', default: 'json,otlp' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return null;
  }
  const o = { duration: Number(values.duration), concurrency: Number(values.concurrency) };
  const spans = Number(values.spans);
  if (!(spans > 0 && spans % TRACE_SPANS === 0)) throw new Error('--spans must be a positive multiple of 4');
  const phases = values.phases.split(',') as Phase['name'][];
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'svc-bench-otlp-'));
  try {
    const run = `o${Date.now().toString(36)}`;
    const otlp = Array.from({ length: TEMPLATES }, (_, i) => buildOtlpTemplate(i + 1, spans));
    const json: BodyTemplate[] = [];
    for (let i = 0; i < TEMPLATES; i++) {
      json.push(buildTemplate(1000 + i, run, 500, { firstFingerprint: json.at(-1)?.nextFingerprint ?? 0 }));
    }
    // Ceilings on one thread, in this run: protobuf decode of the OTLP bodies, JSON.parse of the JSON ones.
    const ceiling = (f: (i: number) => number) => {
      let n = 0;
      let i = 0;
      const t0 = performance.now();
      while (performance.now() - t0 < 2000) n += f(i++);
      return n / ((performance.now() - t0) / 1000);
    };
    const decodeSpansPerSec = ceiling((i) => readTracesProtobuf(otlp[i % TEMPLATES]!.bytes).length);
    const jsonParseExecPerSec = ceiling((i) => {
      JSON.parse(decodedBytes(json[i % TEMPLATES]!).toString('utf8'));
      return 500;
    });
    process.stdout.write(
      `bodies: OTLP ${spans} spans (${spans / TRACE_SPANS} executions), ${fmt(otlp[0]!.bytes.length / 1024)} KiB protobuf; ` +
        `JSON 500 executions with ${json[0]!.logs} logs, ${fmt(json[0]!.bytes.length / 1024)} KiB\n` +
        `ceilings (one thread): protobuf decode ${fmt(decodeSpansPerSec)} spans/s, JSON.parse ${fmt(jsonParseExecPerSec)} executions/s\n`,
    );
    const results: Phase[] = [];
    for (const name of phases) {
      const phase = await runPhase(name, dir, o, (n) =>
        name === 'otlp'
          ? {
              path: '/v1/traces',
              type: 'application/x-protobuf',
              bytes: stampOtlp(otlp[n % TEMPLATES]!, n),
              items: spans,
              executions: spans / TRACE_SPANS,
            }
          : {
              path: '/api/ingest',
              type: 'application/json',
              bytes: stampBody(json[n % TEMPLATES]!, n),
              items: 500,
              executions: 500,
            },
      );
      results.push(phase);
      const unit = name === 'otlp' ? 'spans' : 'executions';
      process.stdout.write(
        `${name.padEnd(4)}: ${fmt(phase.storedItemsPerSec)} ${unit}/s stored (${fmt(phase.storedExecutionsPerSec)} executions/s), ` +
          `${fmt(phase.items)} ${unit} in ${fmt(phase.seconds, 1)} s; CPU ${fmt(phase.cpuMicrosPerItem, 1)} µs per ${unit.slice(0, -1)}` +
          ` (service + nats-server); peak RSS ${fmt(phase.peakRssMiB)} MiB\n`,
      );
    }
    const j = results.find((r) => r.name === 'json');
    const t = results.find((r) => r.name === 'otlp');
    const ratio = j && t ? t.storedItemsPerSec / j.storedItemsPerSec : null;
    if (ratio !== null)
      process.stdout.write(`OTLP spans/s ÷ JSON executions/s: ${fmt(ratio, 2)} (aim ≥ 0.8)\n`);
    const result = {
      at: new Date().toISOString(),
      spans,
      ...o,
      decodeSpansPerSec,
      jsonParseExecPerSec,
      results,
      ratio,
    };
    await fs.mkdir(resultsDir, { recursive: true });
    const file = path.join(resultsDir, `otlp-${Date.now()}.json`);
    await fs.writeFile(file, `${JSON.stringify(result, null, 2)}\n`);
    process.stdout.write(`results: ${path.relative(process.cwd(), file)}\n`);
    return result;
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  main().catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
