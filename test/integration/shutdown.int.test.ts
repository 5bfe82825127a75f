import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually, tempDir } from '../support/env.js';

/**
 * The service as `npm start` runs it (`dist/main.js`, its own embedded nats-server), stopped the ways a terminal,
 * systemd or a container runtime stop it: a signal to the whole process group, which `npm` then passes on to the
 * service a second time. Nothing may be left running.
 */

const MAIN = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
const dirs: string[] = [];
const brokers: number[] = [];
afterAll(async () => {
  // A failed test may have left a broker behind: not this suite's others.
  for (const pid of brokers) if (alive(pid)) process.kill(pid, 'SIGKILL');
  for (const d of dirs) await fs.rm(d, { recursive: true, force: true });
});

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Starts the service in a process group of its own; answers once it listens, with its broker's pid. */
async function startGroup(name: string) {
  const dir = await tempDir(name);
  dirs.push(dir);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATA_DIR: path.join(dir, 'data'),
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    PRINT_FIRST_START_HINT: 'false',
  };
  // Its own embedded broker, as `npm start` runs it.
  delete env.NATS_URL;
  const child = spawn(process.execPath, [MAIN], {
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => {
    out += d;
  });
  child.stderr!.on('data', (d) => {
    out += d;
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  await eventually(
    async () => out.includes('"msg":"service started"'),
    (started) => started,
    60_000,
  );
  const natsPid = Number(await fs.readFile(path.join(dir, 'data', 'nats', 'nats-server.pid'), 'utf8'));
  brokers.push(natsPid);
  expect(alive(natsPid)).toBe(true);
  return { child, natsPid, exited, log: () => out };
}

describe('stopping the whole process group', () => {
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`${signal} to the group, then again as npm passes it on: a clean stop, no broker left`, async () => {
      const s = await startGroup(`shutdown-${signal}`);
      process.kill(-s.child.pid!, signal);
      process.kill(s.child.pid!, signal);
      expect(await s.exited, s.log()).toBe(0);
      expect(s.log()).toContain('"msg":"stopped"');
      expect(s.log()).not.toContain('exiting now');
      await eventually(
        async () => alive(s.natsPid),
        (running) => !running,
        15_000,
      );
    }, 90_000);
  }
});
