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
import { quantile } from './support/stats.js';

/**
 * What the Node SDK costs an application (issue 15): a plain node:http hello-world, as its own process, under a
 * closed-loop load from this process (undici, keep-alive), without the SDK and with init() (sending to a local
 * sink that answers 202, so the service's own cost is not in the figure). Runs alternate (plain, sdk, plain, sdk…)
 * on these noisy machines; reported per mode: requests/s, latency p50/p99, and the app's CPU per request; then the
 * differences and the throughput ratio from the medians.
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
  requests: number;
  perSec: number;
  p50Us: number;
  p99Us: number;
  cpuUsPerRequest: number;
}

async function runOnce(mode: Run['mode'], sink: string, seconds: number, connections: number): Promise<Run> {
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
    await pool.close();
    latencies.sort((a, b) => a - b);
    return {
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

const median = (xs: number[]) =>
  quantile(
    [...xs].sort((a, b) => a - b),
    0.5,
  ) ?? 0;
const fmt = (n: number, d = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });

export async function main(argv: string[] = process.argv.slice(2)): Promise<unknown> {
  const { values } = parseArgs({
    args: argv,
    options: {
      duration: { type: 'string', default: '10' },
      rounds: { type: 'string', default: '3' },
      connections: { type: 'string', default: '16' },
    },
  });
  const seconds = Number(values.duration);
  const rounds = Number(values.rounds);
  const connections = Number(values.connections);
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
        const r = await runOnce(mode, sinkUrl, seconds, connections);
        runs.push(r);
        process.stdout.write(
          `${mode.padEnd(5)} ${fmt(r.perSec)} req/s, p50 ${fmt(r.p50Us)} µs, p99 ${fmt(r.p99Us)} µs, ` +
            `app CPU ${fmt(r.cpuUsPerRequest, 1)} µs/request\n`,
        );
      }
    }
  } finally {
    sink.close();
  }
  const of = (mode: Run['mode'], k: keyof Run) =>
    median(runs.filter((r) => r.mode === mode).map((r) => r[k] as number));
  const summary = {
    addedP50Us: of('sdk', 'p50Us') - of('plain', 'p50Us'),
    addedP99Us: of('sdk', 'p99Us') - of('plain', 'p99Us'),
    addedCpuUsPerRequest: of('sdk', 'cpuUsPerRequest') - of('plain', 'cpuUsPerRequest'),
    throughputRatio: of('sdk', 'perSec') / of('plain', 'perSec'),
  };
  process.stdout.write(
    `medians over ${rounds} alternating rounds of ${seconds} s, ${connections} connections: the SDK adds ` +
      `${fmt(summary.addedP50Us)} µs at p50 (aim ≤ 50), ${fmt(summary.addedP99Us)} µs at p99, ` +
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
