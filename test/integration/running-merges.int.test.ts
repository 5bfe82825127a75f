import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compactPartition, runCompaction } from '../../storage/compaction.js';
import { QueryEngine } from '../../storage/duckdb.js';
import { listPartitionFiles, partitionDir } from '../../storage/layout.js';
import { MANIFEST, RUNNING_PREFIX } from '../../storage/manifest.js';

const HOUR = 3_600_000;
const WS = 'ws_running';
const FULL_MB = 512;
let dataDir: string;
let engine: QueryEngine;

beforeAll(async () => {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'svc-running-'));
  engine = await QueryEngine.open(dataDir, 1, FULL_MB);
});
afterAll(async () => {
  engine?.close();
  await fs.rm(dataDir, { recursive: true, force: true });
});

const memoryLimit = async () =>
  (await engine.all("SELECT current_setting('memory_limit') AS m"))[0]!.m as string;

/**
 * A flush-like executions file: `rows` executions of five services in reverse start order, each with a 288-byte
 * context (about 1.4 MB uncompressed per 4,000 rows), ids `<tag>-<i>`.
 */
async function flushFile(dir: string, name: string, hour: number, rows: number, tag: string) {
  await fs.mkdir(dir, { recursive: true });
  await engine.all(
    `COPY (SELECT $tag || '-' || i AS execution_id, 'svc-' || (i % 5) AS service, 'production' AS environment,
       '/orders/' || (i % 7) AS endpoint, 'GET' AS method, epoch_ms($hour::BIGINT + 3_000_000 - i) AS started_at,
       (i % 500)::DOUBLE AS duration_ms, 200 AS status_code, 'success' AS outcome, repeat(md5($tag || i), 9) AS context,
       epoch_ms($hour::BIGINT + 3_000_000) AS received_at, i::BIGINT AS ingest_seq
     FROM range($rows) t(i)) TO '${path.join(dir, name)}' (FORMAT parquet, COMPRESSION uncompressed)`,
    { tag, hour, rows },
  );
}

describe('merges of the hour being written', () => {
  it('each takes what its memory limit sorts, the rest are merged at once in the same pass, sorted, nothing lost', async () => {
    const hour = Math.floor(Date.now() / HOUR) * HOUR - 5 * HOUR;
    const dir = partitionDir(dataDir, 'executions', WS, 'test', hour);
    for (let f = 0; f < 6; f++) await flushFile(dir, `wA-000000000${f}.parquet`, hour, 4000, `f${f}`);
    const before = await memoryLimit();

    // 1 MB: a share of 2 MiB of files (two of these), and every merge and sidecar runs out of memory at that
    // limit, so each is run again at the full one.
    const stats = await runCompaction(engine, dataDir, {
      minFiles: 2,
      graceMs: 60_000,
      now: hour + 60_000,
      memory: { full: FULL_MB, running: 1 },
    });
    // Three merges, each with two sidecars: nine statements run again.
    expect(stats).toMatchObject({ partitions: 1, filesIn: 6, memoryFallbacks: 9 });
    expect(await memoryLimit()).toBe(before);

    const files = await listPartitionFiles(dataDir, 'executions', WS, 'test', hour, hour + HOUR);
    expect(files).toHaveLength(3);
    for (const f of files) expect(path.basename(f).startsWith(RUNNING_PREFIX)).toBe(true);
    const [all] = await engine.all(
      'SELECT count(*)::DOUBLE AS n, count(DISTINCT execution_id)::DOUBLE AS ids FROM read_parquet($files)',
      { files },
    );
    expect(all).toEqual({ n: 24_000, ids: 24_000 });
    for (const file of files) {
      // Two flush files each, in service and start order.
      const [order] = await engine.all(
        `SELECT count(*)::DOUBLE AS n, count(*) FILTER (WHERE prev IS NOT NULL AND prev > key)::DOUBLE AS unsorted
         FROM (SELECT (service, started_at) AS key, lag((service, started_at)) OVER (ORDER BY file_row_number) AS prev
               FROM read_parquet($file, file_row_number = true))`,
        { file },
      );
      expect(order).toEqual({ n: 8000, unsorted: 0 });
    }
    // Their sidecars were made too (at the full limit, after running out at the lower one).
    const manifest = JSON.parse(await fs.readFile(path.join(dir, MANIFEST), 'utf8'));
    for (const f of files) {
      expect(manifest.rollups?.[path.basename(f)]).toBeDefined();
      expect(manifest.minutes?.[path.basename(f)]).toBeDefined();
    }
  });

  it('runs at the lower limit: with nothing higher to fall back to, the merge fails and leaves the files as they were', async () => {
    const hour = Math.floor(Date.now() / HOUR) * HOUR - 7 * HOUR;
    const dir = partitionDir(dataDir, 'executions', WS, 'test', hour);
    for (let f = 0; f < 2; f++) await flushFile(dir, `wA-000000000${f}.parquet`, hour, 4000, `g${f}`);
    const names = async () => (await fs.readdir(dir)).sort();
    const written = await names();
    try {
      await expect(
        compactPartition(engine, dir, 'executions', hour, {
          minFiles: 2,
          graceMs: 60_000,
          now: hour + 60_000,
          memory: { full: 1, running: 1 },
        }),
      ).rejects.toThrow(/Out of Memory/);
    } finally {
      await engine.setMemoryLimit(FULL_MB);
    }
    expect(await names()).toEqual(written);
    // At the full limit the same merge goes through.
    await compactPartition(engine, dir, 'executions', hour, {
      minFiles: 2,
      graceMs: 60_000,
      now: hour + 60_000,
      memory: { full: FULL_MB, running: FULL_MB },
    });
    const files = await listPartitionFiles(dataDir, 'executions', WS, 'test', hour, hour + HOUR);
    expect(files.map((f) => path.basename(f).startsWith(RUNNING_PREFIX))).toEqual([true]);
  });
});
