import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { procStats } from './support/load.js';
import { median, quantile } from './support/stats.js';

/**
 * What the Node SDK costs an application (issue 15): a plain node:http hello-world, as its own process, under a
 * closed-loop load from this process (undici, keep-alive), without the SDK and with init() (sending to a local
 * sink that answers 202, so the service's own cost is not in the figure). Runs alternate (plain, sdk, plain, sdk…)
 * on these noisy machines; each is a closed loop (throughput, the app's CPU per request) then an open loop at a
 * fixed rate under either capacity (the latency a request sees: at saturation latency is queueing, not cost);
 * then the differences and the throughput ratio from the medians.
 */

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');
const resultsDir = path.join(root, 'bench', 'results');
const sdkEntry = path.join(root, 'sdk', 'node', 'dist', 'esm', 'index.js');

const APP = (withSdk: boolean, sink: string) => `
${
  withSdk
    ? `import { init } from ${JSON.stringify(sdkEntry)};
const svc = init({ apiKey: 'svc_test_benchbenchbenchbench', endpoint: ${JSON.stringify(sink)}, service: 'hello' });`
    : ''
}
import http from 'node:http';
const server = http.createServer((req, res) => {
  res.writeHead(200, { 'content-type': 'text/plain' });
  res.end('hello world');
});
server.listen(0, '127.0.0.1', () => process.stdout.write(JSON.stringify({ port: server.address().port }) + '\\n'));
`;

interface Run {
  mode: 'plain' | 'sdk';
  /** Closed loop, as fast as the app answers: throughput, and latency at saturation. */
  requests: number;
  perSec: number;
  p50Us: number;
  p99Us: number;
  cpuUsPerRequest: number;
  /** Open loop at a fixed rate well under either capacity: the latency a request sees. */
  atRate: { perSec: number; p50Us: number; p99Us: number };
}

/** Request latencies (µs) of an open loop at `rate` requests/s for `seconds`: each sent when it is due. */
async function openLoop(hit: () => Promise<void>, rate: number, seconds: number): Promise<number[]> {
  const latencies: number[] = [];
  const start = performance.now();
  const total = Math.floor(rate * seconds);
  const pending: Promise<void>[] = [];
  for (let n = 0; n < total; n++) {
    const due = start + (n * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    const s = performance.now();
    pending.push(hit().then(() => void latencies.push((performance.now() - s) * 1000)));
    if (pending.length >= 256) await Promise.all(pending.splice(0));
  }
  await Promise.all(pending);
  return latencies.sort((a, b) => a - b);
}

async function runOnce(
  mode: Run['mode'],
  sink: string,
  seconds: number,
  connections: number,
  rate: number,
): Promise<Run> {
  const child = spawn(process.execPath, ['--input-type=module', '-e', APP(mode === 'sdk', sink)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    const port = await new Promise<number>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`the app exited (${code})`)));
      readline.createInterface({ input: child.stdout! }).once('line', (l) => resolve(JSON.parse(l).port));
    });
    const pool = new Pool(`http://127.0.0.1:${port}`, { connections, pipelining: 1 });
    const hit = async () => {
      const res = await pool.request({ method: 'GET', path: '/hello' });
      await res.body.dump();
    };
    // Warm-up: JIT, sockets, the SDK's first batches.
    const warm = performance.now() + 2000;
    await Promise.all(
      Array.from({ length: connections }, async () => {
        while (performance.now() < warm) await hit();
      }),
    );
    const latencies: number[] = [];
    const cpu0 = (await procStats(child.pid!)).cpuSeconds;
    const end = performance.now() + seconds * 1000;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: connections }, async () => {
        while (performance.now() < end) {
          const s = performance.now();
          await hit();
          latencies.push((performance.now() - s) * 1000);
        }
      }),
    );
    const elapsed = (performance.now() - t0) / 1000;
    const cpu = (await procStats(child.pid!)).cpuSeconds - cpu0;
    const timed = await openLoop(hit, rate, seconds);
    await pool.close();
    latencies.sort((a, b) => a - b);
    return {
      atRate: { perSec: rate, p50Us: quantile(timed, 0.5) ?? 0, p99Us: quantile(timed, 0.99) ?? 0 },
      mode,
      requests: latencies.length,
      perSec: latencies.length / elapsed,
      p50Us: quantile(latencies, 0.5) ?? 0,
      p99Us: quantile(latencies, 0.99) ?? 0,
      cpuUsPerRequest: (cpu * 1e6) / latencies.length,
    };
  } finally {
    child.kill('SIGKILL');
  }
}

const fmt = (n: number, d = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });

export async function main(argv: string[] = process.argv.slice(2)): Promise<unknown> {
  const { values } = parseArgs({
    args: argv,
    options: {
      duration: { type: 'string', default: '10' },
      rounds: { type: 'string', default: '3' },
      connections: { type: 'string', default: '16' },
      rate: { type: 'string', default: '5000' },
    },
  });
  const seconds = Number(values.duration);
  const rounds = Number(values.rounds);
  const connections = Number(values.connections);
  const rate = Number(values.rate);
  // The sink: reads each batch and answers 202, as the service would.
  let batches = 0;
  const sink = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      batches++;
      res.writeHead(202, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => sink.listen(0, '127.0.0.1', r));
  const sinkUrl = `http://127.0.0.1:${(sink.address() as AddressInfo).port}`;
  const runs: Run[] = [];
  try {
    for (let i = 0; i < rounds; i++) {
      for (const mode of ['plain', 'sdk'] as const) {
        const r = await runOnce(mode, sinkUrl, seconds, connections, rate);
        runs.push(r);
        process.stdout.write(
          `${mode.padEnd(5)} ${fmt(r.perSec)} req/s, p50 ${fmt(r.p50Us)} µs, p99 ${fmt(r.p99Us)} µs, ` +
            `app CPU ${fmt(r.cpuUsPerRequest, 1)} µs/request; at ${fmt(rate)} req/s p50 ${fmt(r.atRate.p50Us)} µs, ` +
            `p99 ${fmt(r.atRate.p99Us)} µs\n`,
        );
      }
    }
  } finally {
    sink.close();
  }
  const of = (mode: Run['mode'], pick: (r: Run) => number) =>
    median(runs.filter((r) => r.mode === mode).map(pick)) || 0;
  const summary = {
    addedP50Us: of('sdk', (r) => r.atRate.p50Us) - of('plain', (r) => r.atRate.p50Us),
    addedP99Us: of('sdk', (r) => r.atRate.p99Us) - of('plain', (r) => r.atRate.p99Us),
    addedP50UsAtSaturation: of('sdk', (r) => r.p50Us) - of('plain', (r) => r.p50Us),
    addedCpuUsPerRequest: of('sdk', (r) => r.cpuUsPerRequest) - of('plain', (r) => r.cpuUsPerRequest),
    throughputRatio: of('sdk', (r) => r.perSec) / of('plain', (r) => r.perSec),
  };
  process.stdout.write(
    `medians over ${rounds} alternating rounds of ${seconds} s, ${connections} connections: at ${fmt(rate)} req/s the SDK ` +
      `adds ${fmt(summary.addedP50Us)} µs at p50 (aim ≤ 50), ${fmt(summary.addedP99Us)} µs at p99; ` +
      `${fmt(summary.addedCpuUsPerRequest, 1)} µs of app CPU a request; throughput ratio ${fmt(summary.throughputRatio, 2)} ` +
      `(aim ≥ 0.9); ${batches} batches sent to the sink\n`,
  );
  const result = { at: new Date().toISOString(), seconds, rounds, connections, runs, summary };
  await fs.mkdir(resultsDir, { recursive: true });
  const file = path.join(resultsDir, `sdk-overhead-${Date.now()}.json`);
  await fs.writeFile(file, `${JSON.stringify(result, null, 2)}\n`);
  process.stdout.write(`results: ${path.relative(process.cwd(), file)}\n`);
  return result;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  main().catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
