import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NatsServerHandle } from '../../broker/nats-server.js';
import { type Service, startService } from '../../main.js';
import {
  createTenant,
  eventually,
  execution,
  get,
  ingest,
  json,
  startTestNats,
  type TestTenant,
  tempDir,
  testConfig,
} from '../support/env.js';

/**
 * DATA_DIR on a small filesystem of its own (a tmpfs), the broker's store elsewhere (as on a host whose data disk
 * fills while the broker's does not). Mounting needs root (and the right to mount), which CI has; without it the
 * suite says why it skips.
 */
function mountable(): boolean {
  const probe = mkdtempSync(path.join(os.tmpdir(), 'svc-mount-probe-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', probe], { stdio: 'pipe' });
    execFileSync('umount', [probe]);
    return true;
  } catch (err) {
    console.warn(
      `disk-full test skipped: cannot mount a small filesystem here (${(err as Error).message.trim()})`,
    );
    return false;
  } finally {
    rmSync(probe, { recursive: true, force: true });
  }
}
const canMount = mountable();

let dir: string;
let dataDir: string;
let mounted = false;
let nats: NatsServerHandle;
let service: Service;
let tenant: TestTenant;

beforeAll(async () => {
  if (!canMount) return;
  dir = await tempDir('disk-full');
  nats = await startTestNats(dir);
  dataDir = path.join(dir, 'data');
  await fs.mkdir(dataDir);
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=24m', 'tmpfs', dataDir]);
  mounted = true;
  service = await startService(testConfig(dataDir, nats.url, { FLUSH_INTERVAL_MS: '50' }));
  tenant = await createTenant(service);
});
afterAll(async () => {
  await service?.stop().catch(() => {});
  await nats?.stop();
  if (mounted) execFileSync('umount', [dataDir]);
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

/** Writes zeros until the filesystem is full; answers the file. */
async function fill(target: string): Promise<string> {
  const file = path.join(target, 'filler');
  const fh = await fs.open(file, 'w');
  const chunk = Buffer.alloc(256 * 1024);
  try {
    for (;;) await fh.write(chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    await fh.close();
  }
  return file;
}

async function temporaryFiles(root: string): Promise<string[]> {
  const entries = await fs.readdir(root, { recursive: true });
  return entries.filter((n) => n.endsWith('.tmp'));
}

describe.skipIf(!canMount)('DATA_DIR full', () => {
  it('keeps acknowledging into the broker, writes nothing half, and resumes when space returns', async () => {
    const service_ = `disk-${Date.now()}`;
    const listed = async () =>
      json<{ total: number }>(
        await get(service, tenant.keys.test!, `/api/executions?serviceName=${service_}&pageSize=1`),
      ).total;
    const batch = () => ({ executions: Array.from({ length: 50 }, () => execution({ service: service_ })) });
    expect((await ingest(service, tenant.keys.test!, batch())).statusCode).toBe(202);
    await eventually(listed, (n) => n === 50);

    const filler = await fill(dataDir);
    const failuresBefore = service.pipeline!.stats().flushFailures;
    for (let i = 0; i < 5; i++) {
      const res = await ingest(service, tenant.keys.test!, batch());
      expect(res.statusCode, res.body).toBe(202);
    }
    await eventually(
      async () => service.pipeline!.stats().flushFailures,
      (n) => n > failuresBefore,
    );
    // Nothing half-written is visible or left behind, and nothing accepted is dropped: it waits in the broker.
    expect(await listed()).toBe(50);
    // A batch may be between writing its temporary file and removing it: none stays.
    expect(
      await eventually(
        () => temporaryFiles(dataDir),
        (t) => t.length === 0,
      ),
    ).toEqual([]);
    expect(await service.pipeline!.lag()).toBeGreaterThan(0);
    const metrics = await service.app!.inject({ method: 'GET', url: '/metrics' });
    expect(metrics.body).toMatch(/^svc_pipeline_flush_failures_total [1-9]/m);

    await fs.rm(filler);
    // The retries back off to at most 16 s between attempts.
    expect(await eventually(listed, (n) => n === 300, 40_000)).toBe(300);
    await service.pipeline!.drained();
    expect(await listed()).toBe(300);
  });
});
