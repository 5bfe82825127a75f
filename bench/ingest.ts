import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { Pool } from 'undici';
import { freePort, startNatsServer } from '../broker/nats-server.js';
import { cleanupService, ServiceProcess, serviceEntry } from './support/service-process.js';
import { type BodyTemplate, buildTemplate, stampBody } from './traffic.js';

/**
 * Ingest throughput, end to end: batches of executions over HTTP into the service (a child process on its
 * defaults, pointed at a nats-server this script starts), until every accepted execution is visible to queries.
 * Baselines from the same run: raw JetStream publish of the same bodies from Node, and JSON.parse of them.
 *
 *   npm run bench -- [--duration 20] [--concurrency 8] [--batch 500]
 */

const here = path.dirname(fileURLToPath(import.meta.url));
const resultsDir = path.resolve(here, '..', '..', 'bench', 'results');

interface Options {
  duration: number;
  concurrency: number;
  batch: number;
  templates: number;
  rate: number | undefined;
}

function procStats(pid: number): Promise<{ cpuSeconds: number; peakRssMiB: number }> {
  return Promise.all([
    fs.readFile(`/proc/${pid}/stat`, 'utf8'),
    fs.readFile(`/proc/${pid}/status`, 'utf8'),
  ]).then(([stat, status]) => {
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    const hwm = /VmHWM:\s+(\d+) kB/.exec(status);
    return { cpuSeconds: ticks / 100, peakRssMiB: hwm ? Number(hwm[1]) / 1024 : 0 };
  });
}

/**
 * Runs `send` from `concurrency` loops until the deadline; counts what each call reports accepted. With
 * `requestsPerSec` the load is open-loop: request n is sent at start + n / rate (or at once when behind).
 */
async function drive(
  concurrency: number,
  seconds: number,
  send: (requestNo: number) => Promise<boolean>,
  onTick?: (elapsedS: number, accepted: number) => void,
  requestsPerSec?: number,
): Promise<{ accepted: number; refused: number; seconds: number; lastAcceptAt: number }> {
  let next = 0;
  let accepted = 0;
  let refused = 0;
  let lastAcceptAt = 0;
  const start = performance.now();
  const deadline = start + seconds * 1000;
  const ticker = onTick
    ? setInterval(() => onTick((performance.now() - start) / 1000, accepted), 1000)
    : null;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < deadline) {
        const n = next++;
        if (requestsPerSec) {
          const due = start + (n * 1000) / requestsPerSec;
          if (due >= deadline) break;
          const wait = due - performance.now();
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        }
        if (await send(n)) {
          accepted++;
          lastAcceptAt = performance.now();
        } else refused++;
      }
    }),
  );
  if (ticker) clearInterval(ticker);
  return { accepted, refused, seconds: (performance.now() - start) / 1000, lastAcceptAt };
}

async function rawPublishBaseline(natsUrl: string, templates: BodyTemplate[], o: Options) {
  const nc = await connect({ servers: natsUrl });
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: 'BENCH_RAW', subjects: ['bench.raw'], max_msg_size: 8 * 1024 * 1024 });
  const js = jetstream(nc);
  const seconds = Math.min(10, o.duration);
  const r = await drive(o.concurrency, seconds, async (n) => {
    const t = templates[n % templates.length]!;
    await js.publish('bench.raw', stampBody(t, n), { msgID: `raw-${n}` });
    return true;
  });
  await jsm.streams.delete('BENCH_RAW');
  await nc.close();
  return { executionsPerSec: (r.accepted * o.batch) / r.seconds, seconds: r.seconds };
}

function jsonParseBaseline(templates: BodyTemplate[], o: Options) {
  const start = performance.now();
  let n = 0;
  while (performance.now() - start < 2000) {
    JSON.parse(templates[n % templates.length]!.bytes.toString('utf8'));
    n++;
  }
  return { executionsPerSecPerThread: (n * o.batch) / ((performance.now() - start) / 1000) };
}

async function visibleTotal(port: number, key: string): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${port}/api/executions?pageSize=1`, {
    headers: { 'x-api-key': key },
  });
  if (!res.ok) throw new Error(`list answered ${res.status}`);
  return ((await res.json()) as { total: number }).total;
}

const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

export async function main(argv: string[] = process.argv.slice(2)): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      duration: { type: 'string', default: '20' },
      concurrency: { type: 'string', default: '8' },
      batch: { type: 'string', default: '500' },
      /** Executions per second, open-loop; unset: as fast as it goes (closed loop). */
      rate: { type: 'string' },
      keep: { type: 'boolean', default: false },
    },
  });
  const o: Options = {
    duration: Number(values.duration),
    concurrency: Number(values.concurrency),
    batch: Number(values.batch),
    templates: 16,
    rate: values.rate ? Number(values.rate) : undefined,
  };
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'svc-bench-ingest-'));
  const nats = await startNatsServer({ dir: path.join(dir, 'nats') });
  const dataDir = path.join(dir, 'data');
  let svc: ServiceProcess | null = null;
  try {
    const run = `b${Date.now().toString(36)}`;
    const templates = Array.from({ length: o.templates }, (_, i) => buildTemplate(1000 + i, run, o.batch));
    const bodyKiB = templates[0]!.bytes.length / 1024;
    process.stdout.write(
      `bodies: ${o.batch} executions, ${fmt(bodyKiB)} KiB each; concurrency ${o.concurrency}; ${o.rate ? `open loop at ${fmt(o.rate)} exec/s` : 'closed loop'}\n`,
    );

    const parse = jsonParseBaseline(templates, o);
    const raw = await rawPublishBaseline(nats.url, templates, o);
    process.stdout.write(
      `baselines: raw JetStream publish ${fmt(raw.executionsPerSec)} exec/s, JSON.parse ${fmt(parse.executionsPerSecPerThread)} exec/s/thread\n`,
    );

    const port = await freePort();
    svc = ServiceProcess.spawn({
      mainJs: serviceEntry(import.meta.url),
      dataDir,
      port,
      env: { NATS_URL: nats.url },
    });
    await svc.waitReady();
    const key = await svc.signup('ingest');
    const pool = new Pool(`http://127.0.0.1:${port}`, { connections: o.concurrency, pipelining: 1 });
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const cpuBefore = await procStats(svc.pid);
    const loadStart = performance.now();
    const load = await drive(
      o.concurrency,
      o.duration,
      async (n) => {
        const t = templates[n % templates.length]!;
        const res = await pool.request({
          method: 'POST',
          path: '/api/ingest',
          headers,
          body: stampBody(t, n),
        });
        await res.body.dump();
        return res.statusCode === 202;
      },
      (s, accepted) =>
        process.stdout.write(`\r  ${fmt(s)} s  accepted ${fmt((accepted * o.batch) / s)} exec/s   `),
      o.rate ? o.rate / o.batch : undefined,
    );
    process.stdout.write('\n');
    const expected = load.accepted * o.batch;
    let total = 0;
    const waitDeadline = Date.now() + 120_000;
    while (Date.now() < waitDeadline) {
      total = await visibleTotal(port, key);
      if (total >= expected) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const visibleAt = performance.now();
    const cpuAfter = await procStats(svc.pid);
    await pool.close();

    const acceptedPerSec = expected / load.seconds;
    const storedPerSec = total / ((visibleAt - loadStart) / 1000);
    const result = {
      at: new Date().toISOString(),
      options: o,
      bodyKiB,
      machine: { cpus: os.availableParallelism(), node: process.version },
      requests: { accepted: load.accepted, refused: load.refused },
      executions: { accepted: expected, visible: total },
      acceptedExecutionsPerSec: acceptedPerSec,
      storedExecutionsPerSec: storedPerSec,
      lastAcceptToVisibleMs: visibleAt - load.lastAcceptAt,
      baselines: {
        rawJetStreamPublishExecPerSec: raw.executionsPerSec,
        jsonParseExecPerSecPerThread: parse.executionsPerSecPerThread,
      },
      ratios: {
        storedToRawPublish: storedPerSec / raw.executionsPerSec,
        acceptedToRawPublish: acceptedPerSec / raw.executionsPerSec,
      },
      service: { cpuSeconds: cpuAfter.cpuSeconds - cpuBefore.cpuSeconds, peakRssMiB: cpuAfter.peakRssMiB },
    };
    const rows: [string, string][] = [
      ['requests accepted / refused', `${fmt(load.accepted)} / ${fmt(load.refused)}`],
      [
        'load',
        o.rate ? `open loop, ${fmt(o.rate)} exec/s offered` : `closed loop, ${o.concurrency} connections`,
      ],
      ['executions accepted', fmt(expected)],
      ['executions visible', fmt(total)],
      ['accepted exec/s', fmt(acceptedPerSec)],
      ['stored exec/s (first request → all visible)', fmt(storedPerSec)],
      ['last 202 → all visible', `${fmt(result.lastAcceptToVisibleMs)} ms`],
      ['raw JetStream publish exec/s (baseline)', fmt(raw.executionsPerSec)],
      ['stored / raw publish', fmt(result.ratios.storedToRawPublish, 2)],
      ['JSON.parse exec/s per thread (baseline)', fmt(parse.executionsPerSecPerThread)],
      ['service CPU seconds', fmt(result.service.cpuSeconds, 1)],
      ['service peak RSS', `${fmt(result.service.peakRssMiB)} MiB`],
    ];
    const w = Math.max(...rows.map((r) => r[0].length));
    process.stdout.write(`\n${rows.map(([k, v]) => `${k.padEnd(w)}  ${v}`).join('\n')}\n`);
    await fs.mkdir(resultsDir, { recursive: true });
    const file = path.join(resultsDir, `ingest-${result.at.replace(/[:.]/g, '-')}.json`);
    await fs.writeFile(file, `${JSON.stringify(result, null, 2)}\n`);
    process.stdout.write(`\nresults: ${path.relative(process.cwd(), file)}\n`);
    if (total !== expected) {
      process.stdout.write(`FAIL: ${expected} accepted but ${total} visible\n`);
      process.exitCode = 1;
    }
  } finally {
    await cleanupService(svc, dataDir);
    await nats.stop();
    if (!values.keep) await fs.rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  main().catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
