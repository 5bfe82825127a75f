import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The crash bench, short: the service as `npm start` runs it (dist/main.js with its embedded broker), under a
 * steady load of 4 senders that resend every lost answer under its idempotency key. The long runs, with more kills
 * and busy CPUs, are `npm run bench -- crash-recovery` (README).
 */
const BENCH = fileURLToPath(new URL('../../dist/bench/crash-recovery.js', import.meta.url));

interface BenchResult {
  pass: boolean;
  checks: { name: string; ok: boolean; detail: string }[];
}

const run = async (args: string[]): Promise<BenchResult> => {
  const { main } = (await import(BENCH)) as { main: (a: string[]) => Promise<BenchResult> };
  const common = ['--loops', '4', '--batch', '50', '--kill-after', '3', '--run-after', '2'];
  return main([...common, '--ack-wait-ms', '2000', '--settle-timeout', '60', ...args]);
};

const failed = (r: BenchResult) => r.checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail}`);

describe('crash and outage under load', () => {
  it('kill -9 of the service group and its broker: every accepted execution stored once', async () => {
    const r = await run(['--kills', '1', '--fault', 'kill', '--kill', 'all']);
    expect(failed(r)).toEqual([]);
    expect(r.checks.length).toBeGreaterThan(8);
    expect(r.pass).toBe(true);
  }, 180_000);

  it('the broker stopped for 3 s: 503 with retry-after meanwhile, then every accepted execution stored once', async () => {
    const r = await run([
      '--kills',
      '1',
      '--fault',
      'broker-pause',
      '--pause',
      '3',
      '--env',
      'PUBLISH_TIMEOUT_MS=1000',
    ]);
    expect(failed(r)).toEqual([]);
    expect(r.pass).toBe(true);
  }, 180_000);
});
