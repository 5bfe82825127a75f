import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type CompactionOptions,
  compactPartition,
  RUNNING_BYTES_PER_MB,
  runCompaction,
} from '../../storage/compaction.js';
import { QueryEngine } from '../../storage/duckdb.js';
import { listPartitionFiles, partitionDir } from '../../storage/layout.js';
import { COMPACTED_PREFIX, MANIFEST, RUNNING_PREFIX } from '../../storage/manifest.js';

const HOUR = 3_600_000;
const WS = 'ws_running';
const FULL_MB = 512;
const made: string[] = [];
let engine: QueryEngine;
let fullLimit: string;

const memoryLimit = async () =>
  (await engine.all("SELECT current_setting('memory_limit') AS m"))[0]!.m as string;

beforeAll(async () => {
  const own = await fs.mkdtemp(path.join(os.tmpdir(), 'svc-running-engine-'));
  made.push(own);
  engine = await QueryEngine.open(own, 1, FULL_MB);
  fullLimit = await memoryLimit();
});
afterAll(async () => {
  engine?.close();
  for (const d of made) await fs.rm(d, { recursive: true, force: true });
});

/** A data directory of the test's own: runCompaction walks all of it. */
async function dataDirOf(): Promise<string> {
  const d = await fs.mkdtemp(path.join(os.tmpdir(), 'svc-running-'));
  made.push(d);
  return d;
}

const hour = Math.floor(Date.now() / HOUR) * HOUR - 5 * HOUR;

/**
 * Flush-like executions files in the partition of `hour`: `rows` executions each, of five services in reverse start
 * order, with a 288-byte context (about 410 B per row uncompressed), ids `<tag><file>-<i>`; `writer` names them,
 * `extra` adds columns (typed context columns, say).
 */
async function flushFiles(
  dataDir: string,
  files: number,
  rows: number,
  tag: string,
  { writer = 'wA', extra = '' } = {},
): Promise<string> {
  const dir = partitionDir(dataDir, 'executions', WS, 'test', hour);
  await fs.mkdir(dir, { recursive: true });
  for (let f = 0; f < files; f++) {
    await engine.all(
      `COPY (SELECT $tag || '-' || i AS execution_id, 'svc-' || (i % 5) AS service, 'production' AS environment,
         '/orders/' || (i % 7) AS endpoint, 'GET' AS method, epoch_ms($hour::BIGINT + 3_000_000 - i) AS started_at,
         (i % 500)::DOUBLE AS duration_ms, 200 AS status_code, 'success' AS outcome,
         repeat(md5($tag || i), 9) AS context, epoch_ms($hour::BIGINT + 3_000_000) AS received_at, i::BIGINT AS ingest_seq
         ${extra}
       FROM range($rows) t(i)) TO '${path.join(dir, `${writer}-${String(f).padStart(10, '0')}.parquet`)}'
       (FORMAT parquet, COMPRESSION uncompressed)`,
      { tag: `${tag}${f}`, hour, rows },
    );
  }
  return dir;
}

const visible = (dataDir: string) => listPartitionFiles(dataDir, 'executions', WS, 'test', hour, hour + HOUR);

/** The rows of `file`, and how many follow a row of a later (service, start). */
async function order(file: string) {
  return (
    await engine.all(
      `SELECT count(*)::DOUBLE AS n, count(*) FILTER (WHERE prev IS NOT NULL AND prev > key)::DOUBLE AS unsorted
       FROM (SELECT (service, started_at) AS key, lag((service, started_at)) OVER (ORDER BY file_row_number) AS prev
             FROM read_parquet($file, file_row_number = true))`,
      { file },
    )
  )[0];
}

/** A running limit whose share is three of `dir`'s files (each over 4.2 MB, so the MB steps cannot make it four). */
async function limitForThree(dir: string): Promise<number> {
  const [size] = await engine.all(
    `SELECT max(bytes)::DOUBLE AS b FROM (SELECT file_name, sum(total_uncompressed_size) AS bytes
       FROM parquet_metadata($files) GROUP BY file_name)`,
    { files: (await fs.readdir(dir)).map((n) => path.join(dir, n)) },
  );
  const file = Number(size!.b);
  const mb = Math.ceil((3.5 * file) / RUNNING_BYTES_PER_MB);
  expect(mb * RUNNING_BYTES_PER_MB).toBeGreaterThanOrEqual(3 * file);
  expect(mb * RUNNING_BYTES_PER_MB).toBeLessThan(4 * file);
  return mb;
}

/** A compactor pass over `dataDir` while `hour` is written (`now` later: after it ended). */
const pass = (dataDir: string, memory: CompactionOptions['memory'], more: Partial<CompactionOptions> = {}) =>
  runCompaction(engine, dataDir, { minFiles: 2, graceMs: 60_000, now: hour + 60_000, memory, ...more });

/** Six files of 12,000 executions in a data directory of their own, and a running limit whose share is three. */
async function sixFiles(tag: string) {
  const dataDir = await dataDirOf();
  const dir = await flushFiles(dataDir, 6, 12_000, tag);
  return { dataDir, running: await limitForThree(dir) };
}

describe('merges of the hour being written', () => {
  it('each takes what its limit sorts, the pass merges again the files it found, and the hour’s end is not limited', async () => {
    const { dataDir, running } = await sixFiles('a');
    let asked = 0;
    const stats = await pass(dataDir, { full: FULL_MB, running }, { stillHolds: async () => ++asked > 0 });
    expect(stats).toMatchObject({ partitions: 1, filesIn: 6 });
    // The lease was asked before each of the two merges.
    expect(asked).toBe(2);
    expect(await memoryLimit()).toBe(fullLimit);
    const files = await visible(dataDir);
    expect(files.map((f) => path.basename(f).startsWith(RUNNING_PREFIX))).toEqual([true, true]);
    for (const f of files) expect(await order(f)).toEqual({ n: 36_000, unsorted: 0 });
    const [all] = await engine.all(
      'SELECT count(*)::DOUBLE AS n, count(DISTINCT execution_id)::DOUBLE AS ids FROM read_parquet($files)',
      { files },
    );
    expect(all).toEqual({ n: 72_000, ids: 72_000 });

    // The hour's end merges at the full limit, whatever the running one: 1 MB would run out of memory.
    const end = await pass(dataDir, { full: FULL_MB, running: 1 }, { now: hour + HOUR + 60_000 });
    expect(end).toMatchObject({ partitions: 1, filesIn: 2 });
    expect(end.memoryFallbacks).toBeUndefined();
    const ended = await visible(dataDir);
    expect(ended).toHaveLength(1);
    expect(path.basename(ended[0]!).startsWith(COMPACTED_PREFIX)).toBe(true);
    expect(path.basename(ended[0]!).startsWith(RUNNING_PREFIX)).toBe(false);
    const [kept] = await engine.all('SELECT count(*)::DOUBLE AS n FROM read_parquet($files)', {
      files: ended,
    });
    expect(kept).toEqual({ n: 72_000 });
  });

  it('a lease lost between two merges ends the pass after the first', async () => {
    const { dataDir, running } = await sixFiles('b');
    let asked = 0;
    const stats = await pass(dataDir, { full: FULL_MB, running }, { stillHolds: async () => ++asked === 1 });
    expect(stats).toMatchObject({ partitions: 1, filesIn: 3, leaseLost: true });
    const names = (await visible(dataDir)).map((f) => path.basename(f));
    expect(names.filter((n) => n.startsWith(RUNNING_PREFIX))).toHaveLength(1);
    expect(names.filter((n) => !n.startsWith(COMPACTED_PREFIX))).toHaveLength(3);
  });

  it('a statement out of memory at the running limit runs again at the full one; the limit is the full one after', async () => {
    const dataDir = await dataDirOf();
    const dir = await flushFiles(dataDir, 4, 4000, 'c');
    // 1 MB: a share of two files, and every merge and sidecar runs out of memory at that limit.
    let told = 0;
    const stats = await pass(dataDir, { full: FULL_MB, running: 1 }, { onMemoryFallback: () => told++ });
    expect(stats).toMatchObject({ partitions: 1, filesIn: 4 });
    expect(stats.memoryFallbacks).toBeGreaterThanOrEqual(2);
    // Each told as it happened (what the service's /metrics counts).
    expect(told).toBe(stats.memoryFallbacks);
    expect(await memoryLimit()).toBe(fullLimit);
    const files = await visible(dataDir);
    expect(files.map((f) => path.basename(f).startsWith(RUNNING_PREFIX))).toEqual([true, true]);
    for (const f of files) expect(await order(f)).toEqual({ n: 8000, unsorted: 0 });
    // Their sidecars were made too.
    const manifest = JSON.parse(await fs.readFile(path.join(dir, MANIFEST), 'utf8'));
    for (const f of files) {
      expect(manifest.rollups?.[path.basename(f)]).toBeDefined();
      expect(manifest.minutes?.[path.basename(f)]).toBeDefined();
    }
  });

  it('a merge out of memory at the full limit too fails and leaves the files as they were; one that fits goes through', async () => {
    const dataDir = await dataDirOf();
    const dir = await flushFiles(dataDir, 2, 4000, 'd');
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
    // At a running limit it fits in, nothing runs again, and the engine is back at the full limit after.
    const r = await compactPartition(engine, dir, 'executions', hour, {
      minFiles: 2,
      graceMs: 60_000,
      now: hour + 60_000,
      memory: { full: FULL_MB, running: 256 },
    });
    expect(r).toMatchObject({ compacted: 2, memoryFallbacks: 0 });
    expect(await memoryLimit()).toBe(fullLimit);
    const files = await visible(dataDir);
    expect(files.map((f) => path.basename(f).startsWith(RUNNING_PREFIX))).toEqual([true]);
  });

  it('an hour’s end splits: its file is the by-id copy’s rows in the scanned columns, ids unique or one resent, late rows too', async () => {
    for (const resent of [false, true]) {
      const dataDir = await dataDirOf();
      const dir = await flushFiles(dataDir, 2, 3000, 'a', { extra: `, 'gold' AS "ctx_s:customer.tier"` });
      await flushFiles(dataDir, 2, 3000, 'b', { writer: 'wB', extra: ', (i % 9)::DOUBLE AS "ctx_n:score"' });
      await pass(dataDir, { full: FULL_MB, running: 256 });
      // After the running merge, one more file; resent, its one execution is the first file's first (id a0-0).
      await flushFiles(dataDir, 1, 1, resent ? 'a' : 'c', { writer: 'wC' });
      const ended = async (expected: number) => {
        await pass(dataDir, { full: FULL_MB, running: 256 }, { now: hour + HOUR + 60_000 });
        const manifest = JSON.parse(await fs.readFile(path.join(dir, MANIFEST), 'utf8'));
        expect(manifest.live).toHaveLength(1);
        const live = manifest.live[0] as string;
        // Split, not merged whole: the file keeps the scanned columns, its by-id copy every row.
        expect(manifest.scanOnly).toEqual([live]);
        const parts = (manifest.byId[live] as { name: string }[]).map((p) => path.join(dir, p.name));
        const columns = (file: string[]) =>
          engine.all(
            'SELECT column_name AS name, column_type AS type FROM (DESCRIBE SELECT * FROM read_parquet($file))',
            { file },
          );
        const own = await columns([path.join(dir, live)]);
        const copy = new Map((await columns(parts)).map((c) => [c.name, c.type]));
        for (const c of own) expect([c.name, copy.get(c.name as string)]).toEqual([c.name, c.type]);
        expect(own.map((c) => c.name)).toEqual(
          expect.arrayContaining(['ctx_s:customer.tier', 'ctx_n:score']),
        );
        const list = own.map((c) => `"${c.name}"`).join(', ');
        const [diff] = await engine.all(
          `SELECT (SELECT count(*) FROM (SELECT ${list} FROM read_parquet($file) EXCEPT ALL
                     SELECT ${list} FROM read_parquet($parts)))::DOUBLE AS extra,
                  (SELECT count(*) FROM (SELECT ${list} FROM read_parquet($parts) EXCEPT ALL
                     SELECT ${list} FROM read_parquet($file)))::DOUBLE AS missing,
                  (SELECT count(*) FROM read_parquet($file))::DOUBLE AS n`,
          { file: path.join(dir, live), parts },
        );
        expect(diff).toEqual({ extra: 0, missing: 0, n: expected });
      };
      await ended(resent ? 12_000 : 12_001);
      // Late rows with a column of their own: the hour is merged again, its earlier file read through its copy.
      await flushFiles(dataDir, 1, 10, 'd', { writer: 'wD', extra: ', true AS "ctx_b:flag"' });
      await ended(resent ? 12_010 : 12_011);
    }
  });
});
