import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { isAlive } from '../../bench/support/service-process.js';
import { nodeFlags, serviceProcessEnv } from '../../main.js';
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

/** Running: a killed process nobody has reaped yet (a container's init may never reap) is a zombie, gone. */
const alive = isAlive;

/** Starts the service in a process group of its own; answers once it listens, with its broker's pid. */
async function startGroup(name: string, opts: { dir?: string; nodeArgs?: string[] } = {}) {
  const dir = opts.dir ?? (await tempDir(name));
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
  const child = spawn(process.execPath, [...nodeFlags(env), ...(opts.nodeArgs ?? []), MAIN], {
    env: serviceProcessEnv(env),
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
  return { child, natsPid, exited, dir, log: () => out };
}

const gone = (pid: number) =>
  eventually(
    async () => alive(pid),
    (running) => !running,
    15_000,
  );

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

describe('the other ways a service ends', () => {
  it('SIGTERM to the service alone: a clean stop, no broker left', async () => {
    const s = await startGroup('shutdown-process');
    process.kill(s.child.pid!, 'SIGTERM');
    expect(await s.exited, s.log()).toBe(0);
    expect(s.log()).toContain('"msg":"stopped"');
    await gone(s.natsPid);
  }, 90_000);

  it('a crash (an uncaught exception) takes its broker with it', async () => {
    const dir = await tempDir('shutdown-crash');
    // Throws from a signal handler: an exception nothing catches, as a bug would throw.
    const preload = path.join(dir, 'crash-on-usr2.mjs');
    await fs.writeFile(preload, "process.on('SIGUSR2', () => { throw new Error('a bug'); });\n");
    const s = await startGroup('shutdown-crash', { dir, nodeArgs: ['--import', preload] });
    process.kill(s.child.pid!, 'SIGUSR2');
    expect(await s.exited, s.log()).not.toBe(0);
    await gone(s.natsPid);
  }, 90_000);

  it('SIGKILL, which no process can answer: the next start stops the broker it left, then runs as usual', async () => {
    const first = await startGroup('shutdown-kill');
    process.kill(first.child.pid!, 'SIGKILL');
    await first.exited;
    expect(alive(first.natsPid)).toBe(true);
    const second = await startGroup('shutdown-kill', { dir: first.dir });
    await gone(first.natsPid);
    expect(second.natsPid).not.toBe(first.natsPid);
    process.kill(-second.child.pid!, 'SIGTERM');
    expect(await second.exited, second.log()).toBe(0);
    await gone(second.natsPid);
  }, 120_000);
});
