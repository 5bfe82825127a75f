import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type NatsServerHandle, startNatsServer } from '../../broker/nats-server.js';

/** The environment a running process was started with, from /proc. */
async function environOf(pid: number): Promise<Map<string, string>> {
  const raw = await fs.readFile(`/proc/${pid}/environ`, 'utf8');
  return new Map(
    raw
      .split('\0')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)] as [string, string]),
  );
}

const started: { nats: NatsServerHandle; dir: string }[] = [];
afterEach(async () => {
  for (const { nats, dir } of started.splice(0)) {
    await nats.stop();
    await fs.rm(dir, { recursive: true, force: true });
  }
});

async function start(memoryLimitMb?: number): Promise<Map<string, string>> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nats-env-'));
  const nats = await startNatsServer({ dir, memoryLimitMb });
  started.push({ nats, dir });
  return environOf(nats.pid()!);
}

describe('the embedded nats-server', () => {
  it.skipIf(process.env.GOMEMLIMIT !== undefined)(
    'runs with the Go memory limit it is given, none when given none, and the environment’s when it sets one',
    async () => {
      const limited = await start(256);
      expect(limited.get('GOMEMLIMIT')).toBe('256MiB');
      expect(limited.get('GOMAXPROCS')).toEqual(
        process.env.GOMAXPROCS ?? expect.stringMatching(/^[1-9]\d*$/),
      );
      const unlimited = await start(0);
      expect(unlimited.has('GOMEMLIMIT')).toBe(false);
      process.env.GOMEMLIMIT = '300MiB';
      try {
        expect((await start(256)).get('GOMEMLIMIT')).toBe('300MiB');
      } finally {
        delete process.env.GOMEMLIMIT;
      }
    },
  );
});
