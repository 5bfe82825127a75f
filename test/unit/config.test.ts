import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { nodeFlags, serviceProcessEnv, THREADPOOL_SIZE } from '../../main.js';
import { ConfigError, loadConfig } from '../../schemas/config.js';
import { compactionOptions } from '../../storage/compaction.js';

describe('config', () => {
  it('has working defaults', () => {
    const c = loadConfig({});
    expect(c.PORT).toBe(8080);
    expect(c.DATA_DIR).toBe('./data');
    expect(c.dataDir.endsWith('/data')).toBe(true);
    expect(c.NATS_URL).toBeUndefined();
    expect(c.BODY_MAX_BYTES).toBe(5 * 1024 * 1024);
    expect(c.BODY_MAX_DECODED_BYTES).toBe(20 * 1024 * 1024);
    expect(c.PAGE_SIZE_MAX).toBe(200);
    // Answers are checked against their schemas in tests only (test/support/env.ts turns it on).
    expect(c.VALIDATE_ANSWERS).toBe(false);
    expect(c.pipelineWorkers).toBeGreaterThanOrEqual(1);
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('reads and coerces the environment; empty means unset', () => {
    const c = loadConfig({
      PORT: '9090',
      FLUSH_INTERVAL_MS: '750',
      NATS_URL: '',
      PRINT_FIRST_START_HINT: 'false',
    });
    expect(c.PORT).toBe(9090);
    expect(c.FLUSH_INTERVAL_MS).toBe(750);
    expect(c.NATS_URL).toBeUndefined();
    expect(c.PRINT_FIRST_START_HINT).toBe(false);
  });

  it('names each bad variable', () => {
    const attempt = (env: Record<string, string>) => {
      try {
        loadConfig(env);
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        return (err as Error).message;
      }
      throw new Error('expected a ConfigError');
    };
    expect(attempt({ PORT: 'eighty' })).toMatch(/PORT/);
    const both = attempt({ PORT: '70000', LOG_LEVEL: 'loud' });
    expect(both).toMatch(/PORT/);
    expect(both).toMatch(/LOG_LEVEL/);
    expect(attempt({ NATS_URL: 'not a url' })).toMatch(/NATS_URL/);
    expect(attempt({ PAGE_SIZE_DEFAULT: '300' })).toMatch(/PAGE_SIZE_DEFAULT/);
    expect(attempt({ PARQUET_COMPRESSION: 'lz4' })).toMatch(/PARQUET_COMPRESSION/);
    expect(attempt({ INITIAL_OLD_SPACE_MB: '-1' })).toMatch(/INITIAL_OLD_SPACE_MB/);
    expect(attempt({ INITIAL_OLD_SPACE_MB: 'lots' })).toMatch(/INITIAL_OLD_SPACE_MB/);
  });

  it('gives the V8 flags it is configured with, and this Node accepts them', () => {
    expect(nodeFlags({ SINGLE_THREADED_GC: 'false', INITIAL_OLD_SPACE_MB: '0' })).toEqual([]);
    const flags = nodeFlags({ SINGLE_THREADED_GC: 'true' });
    expect(flags).toEqual(['--single-threaded-gc', '--initial-old-space-size=128']);
    // Node refuses a flag it does not know (exit 9): the service would not start.
    const run = spawnSync(process.execPath, [...flags, '-e', 'process.exit(0)'], {
      encoding: 'utf8',
      env: { ...process.env, NODE_OPTIONS: '' },
    });
    expect(run.stderr).not.toMatch(/bad option/);
    expect(run.status).toBe(0);
  });

  // /proc/self/task lists a process's threads on Linux only.
  it.skipIf(process.platform !== 'linux')(
    "starts a service process with libuv's threadpool at its size, unless the environment sets one",
    () => {
      const env = serviceProcessEnv({ PATH: process.env.PATH });
      expect(env.UV_THREADPOOL_SIZE).toBe(String(THREADPOOL_SIZE));
      expect(serviceProcessEnv({ UV_THREADPOOL_SIZE: '6' }).UV_THREADPOOL_SIZE).toBe('6');
      // libuv starts the pool's threads, on top of Node's own, when zlib's asynchronous work first needs one.
      const threads = (extra: NodeJS.ProcessEnv) =>
        Number(
          spawnSync(
            process.execPath,
            [
              '-e',
              "require('zlib').deflate('x', () => console.log(require('fs').readdirSync('/proc/self/task').length))",
            ],
            { encoding: 'utf8', env: { ...process.env, UV_THREADPOOL_SIZE: undefined, ...extra } },
          ).stdout.trim(),
        );
      expect(threads(env) - threads({})).toBe(THREADPOOL_SIZE - 4);
    },
  );
  it("gives the compactor's options: the running hour's memory within the full limit, sidecars by METRICS_ROLLUPS", () => {
    const d = compactionOptions(loadConfig({}));
    expect(d).toEqual({
      minFiles: 16,
      graceMs: 60_000,
      codec: 'zstd',
      memory: { full: 512, running: 256 },
      sidecars: ['rollups', 'minutes'],
    });
    const c = compactionOptions(
      loadConfig({
        COMPACTION_MEMORY_MB: '192',
        COMPACTION_RUNNING_MEMORY_MB: '300',
        COMPACTION_COMPRESSION: 'lz4',
        METRICS_ROLLUPS: 'false',
      }),
    );
    expect(c.memory).toEqual({ full: 192, running: 192 });
    expect(c.codec).toBe('lz4');
    expect(c.sidecars).toEqual(['rollups']);
  });
});
