import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import fc from 'fast-check';
import { Pool } from 'undici';
import { freePort } from '../broker/nats-server.js';
import { fuzzRequests } from './support/fuzz-requests.js';
import { cleanupService, ServiceProcess, serviceEntry } from './support/service-process.js';

/**
 * The long fuzz run: generated bad requests on every route (support/fuzz-requests.ts) against the service as its
 * own process, on its embedded defaults. Prints the answers by status, and fails on any answer ≥ 500, any reset
 * connection, a service not ready after, or a valid execution sent after not visible. Seeded and repeatable.
 *
 *   npm run bench -- fuzz [--runs 10000] [--seed 20261124]
 */

export async function main(argv: string[] = process.argv.slice(2)): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: { runs: { type: 'string', default: '10000' }, seed: { type: 'string', default: '20261124' } },
  });
  const runs = Number(values.runs);
  const seed = Number(values.seed);
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'svc-bench-fuzz-'));
  const dataDir = path.join(dir, 'data');
  let svc: ServiceProcess | null = null;
  try {
    svc = ServiceProcess.spawn({ mainJs: serviceEntry(import.meta.url), dataDir, port: await freePort() });
    await svc.waitReady();
    const signup = await fetch(`${svc.url}/api/auth/signup`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'fuzz@bench.example', password: 'benchmark password' }),
    });
    const account = (await signup.json()) as { session: { token: string }; testKey: { key: string } };
    const key = account.testKey.key;
    const pool = new Pool(svc.url, { connections: 4 });
    const requests = fc.sample(fuzzRequests({ key, session: account.session.token }), {
      numRuns: runs,
      seed,
    });
    const byStatus = new Map<string, number>();
    const failures: string[] = [];
    const started = performance.now();
    for (const r of requests) {
      let status: string;
      try {
        const res = await pool.request({ method: r.method, path: r.path, headers: r.headers, body: r.body });
        await res.body.dump();
        status = String(res.statusCode);
        if (res.statusCode >= 500) failures.push(`${r.method} ${r.path.slice(0, 160)} → ${status}`);
      } catch (err) {
        status = `reset (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`;
        failures.push(`${r.method} ${r.path.slice(0, 160)} → ${status}`);
      }
      byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
    }
    const seconds = (performance.now() - started) / 1000;
    const ready = (await fetch(`${svc.url}/readyz`)).status === 200;
    const executionId = `after-fuzz-${Date.now()}`;
    const sent = await fetch(`${svc.url}/api/ingest`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({
        executions: [
          {
            executionId,
            service: 'after-fuzz',
            endpoint: '/after',
            startedAt: new Date().toISOString(),
            durationMs: 1,
          },
        ],
      }),
    });
    let visible = false;
    for (let i = 0; i < 100 && !visible; i++) {
      visible = (await fetch(`${svc.url}/api/executions/${executionId}`, { headers: { 'x-api-key': key } }))
        .ok;
      if (!visible) await new Promise((r) => setTimeout(r, 100));
    }
    await pool.close();
    const pad = (s: string, n: number) => s.padEnd(n);
    process.stdout.write(`fuzz: ${runs} requests, seed ${seed}, ${seconds.toFixed(1)} s\n`);
    for (const [status, n] of [...byStatus].sort())
      process.stdout.write(`  ${pad(status, 24)} ${n.toLocaleString('en-US')}\n`);
    process.stdout.write(
      `answers ≥ 500 or resets: ${failures.length}; ready after: ${ready}; valid execution after: ${sent.status} then ${visible ? 'visible' : 'NOT visible'}\n`,
    );
    for (const f of failures.slice(0, 20)) process.stdout.write(`  ${f}\n`);
    if (failures.length > 0 || !ready || sent.status !== 202 || !visible) process.exitCode = 1;
  } finally {
    await cleanupService(svc, dataDir);
    await fs.rm(dir, { recursive: true, force: true });
  }
}
