import fc from 'fast-check';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FuzzRequest, fuzzRequests } from '../../bench/support/fuzz-requests.js';
import { createTenant, eventually, execution, startStack, type TestStack } from '../support/env.js';
import { signup } from '../support/http.js';

/**
 * Generated bad requests over a real socket against a running service (bench/support/fuzz-requests.ts): none may
 * be answered ≥ 500 or reset, and the service must be ready and taking data after. A short seeded run here
 * (FUZZ_RUNS, default 600; FUZZ_SEED; FUZZ_PRINT=1 prints the answers by status); `npm run bench -- fuzz` runs
 * 10,000 and more against the service as its own process.
 */

const RUNS = Number(process.env.FUZZ_RUNS ?? 600);
const SEED = Number(process.env.FUZZ_SEED ?? 20261124);

let stack: TestStack;
let pool: Pool;
let url: string;

beforeAll(async () => {
  stack = await startStack('fuzz', { PORT: '0', HOST: '127.0.0.1' }, { listen: true });
  url = stack.service.url!;
  pool = new Pool(url, { connections: 4 });
});
afterAll(async () => {
  await pool?.close();
  await stack?.close();
});

/** Sends one request: its status, or the error that stood for an answer (a reset connection). */
async function send(r: FuzzRequest): Promise<{ status: number | null; error: string | null; body: string }> {
  try {
    const res = await pool.request({ method: r.method, path: r.path, headers: r.headers, body: r.body });
    const body = await res.body.text();
    return { status: res.statusCode, error: null, body };
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return { status: null, error: e.code ?? e.message, body: '' };
  }
}

describe('fuzzing every route', () => {
  it(`answers ${RUNS} generated bad requests below 500, resets none, and still takes data`, async () => {
    const u = await signup(stack.service);
    const tenant = await createTenant(stack.service);
    const requests = fc.sample(fuzzRequests({ key: tenant.keys.test!, session: u.session }), {
      numRuns: RUNS,
      seed: SEED,
    });
    const failures: string[] = [];
    const byStatus = new Map<string, number>();
    for (const r of requests) {
      const res = await send(r);
      const k = res.status === null ? `reset ${res.error}` : String(res.status);
      byStatus.set(k, (byStatus.get(k) ?? 0) + 1);
      if (res.status === null || res.status >= 500)
        failures.push(`${r.method} ${r.path.slice(0, 200)} → ${k} ${res.body.slice(0, 200)}`);
    }
    if (process.env.FUZZ_PRINT)
      console.log(
        [...byStatus]
          .sort()
          .map(([k, n]) => `${k}: ${n}`)
          .join(', '),
      );
    expect(failures, [...byStatus].map(([k, n]) => `${k}: ${n}`).join(', ')).toEqual([]);
    // Still ready, and a valid execution sent now is visible.
    expect((await send({ method: 'GET', path: '/readyz', headers: {} })).status).toBe(200);
    const e = execution({ service: 'after-fuzz' });
    const sent = await send({
      method: 'POST',
      path: '/api/ingest',
      headers: { 'x-api-key': tenant.keys.test!, 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify({ executions: [e] })),
    });
    expect(sent.status).toBe(202);
    await eventually(
      async () =>
        (
          await send({
            method: 'GET',
            path: `/api/executions/${e.executionId}`,
            headers: { 'x-api-key': tenant.keys.test! },
          })
        ).status,
      (s) => s === 200,
    );
  }, 300_000);
});
