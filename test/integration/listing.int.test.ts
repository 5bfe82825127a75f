import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CommitJournal } from '../../storage/commit-journal.js';
import { compactPartition, runCompaction } from '../../storage/compaction.js';
import { QueryEngine } from '../../storage/duckdb.js';
import { bumpGeneration } from '../../storage/generation.js';
import { listPartitionFiles, partitionDir } from '../../storage/layout.js';
import { applyRetention } from '../../storage/retention.js';

const HOUR = 3_600_000;
const WS = 'ws_listing';
let dataDir: string;
let engine: QueryEngine;

beforeAll(async () => {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'svc-listing-'));
  engine = await QueryEngine.open(dataDir, 1);
});
afterAll(async () => {
  engine?.close();
  await fs.rm(dataDir, { recursive: true, force: true });
});

const hourStart = (ms: number) => Math.floor(ms / HOUR) * HOUR;
const dirOf = (hour: number) => partitionDir(dataDir, 'logs', WS, 'test', hour);
const list = async () =>
  (await listPartitionFiles(dataDir, 'logs', WS, 'test', 0, Date.now() + HOUR)).map((f) =>
    path.relative(dataDir, f),
  );
const rel = (hour: number, name: string) => path.relative(dataDir, path.join(dirOf(hour), name));

/** A real one-row logs file, as the pipeline would write it. */
async function parquet(target: string, message: string, at: number): Promise<void> {
  await fs.mkdir(path.dirname(target), { recursive: true });
  await engine.all(
    `COPY (SELECT epoch_ms($at::BIGINT) AS timestamp, 'info' AS level, 3 AS level_num, $message AS message,
       'svc' AS service, 'production' AS environment, NULL::VARCHAR AS execution_id, 'r1' AS request_id,
       1::BIGINT AS ingest_seq, false AS truncated)
     TO '${target}' (FORMAT parquet)`,
    { at, message },
  );
}

describe('partition listings', () => {
  it('older hours are listed once per generation; every writer makes a new one; fresh hours are always listed', async () => {
    const now = Date.now();
    const old = hourStart(now) - 10 * HOUR;
    const fresh = hourStart(now);
    await parquet(path.join(dirOf(old), 'wA-0000000001.parquet'), 'a', old + 1000);
    expect(await list()).toEqual([rel(old, 'wA-0000000001.parquet')]);

    // Put there behind the writers' backs: the older hour's listing is kept, a fresh hour is seen at once.
    await parquet(path.join(dirOf(old), 'wA-0000000002.parquet'), 'b', old + 2000);
    await parquet(path.join(dirOf(fresh), 'wA-0000000003.parquet'), 'c', fresh);
    expect(await list()).toEqual([rel(old, 'wA-0000000001.parquet'), rel(fresh, 'wA-0000000003.parquet')]);
    await bumpGeneration(path.dirname(path.dirname(dirOf(old))));
    expect(await list()).toEqual([
      rel(old, 'wA-0000000001.parquet'),
      rel(old, 'wA-0000000002.parquet'),
      rel(fresh, 'wA-0000000003.parquet'),
    ]);

    // A commit into an older hour (late data) is listed right after it.
    const journal = new CommitJournal(dataDir, 'wB');
    await journal.recover();
    const finalPath = path.join(dirOf(old - HOUR), 'wB-0000000001.parquet');
    await parquet(`${finalPath}.tmp`, 'late', old - HOUR + 5);
    await journal.commit({
      writerId: 'wB',
      commitNo: 1,
      seqs: [1],
      files: [{ tmpPath: `${finalPath}.tmp`, finalPath }],
    });
    expect(await list()).toContain(rel(old - HOUR, 'wB-0000000001.parquet'));

    // A merge of an older hour: its file replaces the small ones in the very next listing.
    await compactPartition(engine, dirOf(old), 'logs', old, { minFiles: 2, graceMs: 60_000 });
    const merged = (await list()).filter((f) => f.startsWith(path.relative(dataDir, dirOf(old))));
    expect(merged).toEqual([expect.stringMatching(/\/c-\d+-[0-9a-f]+\.parquet$/)]);

    // Retention: the removed days are gone from the next listing.
    await applyRetention(dataDir, () => 0, now + 2 * 86_400_000);
    expect(await list()).toEqual([]);
  });
});

describe('compaction passes', () => {
  it('a partition that cannot be merged does not hold back the others; the pass still fails', async () => {
    const now = Date.now();
    const broken = hourStart(now) - 30 * HOUR;
    const fine = hourStart(now) - 29 * HOUR;
    await fs.mkdir(dirOf(broken), { recursive: true });
    await fs.writeFile(path.join(dirOf(broken), 'wC-0000000001.parquet'), 'not parquet');
    await parquet(path.join(dirOf(broken), 'wC-0000000002.parquet'), 'x', broken + 1);
    await parquet(path.join(dirOf(fine), 'wC-0000000003.parquet'), 'y', fine + 1);
    await parquet(path.join(dirOf(fine), 'wC-0000000004.parquet'), 'z', fine + 2);
    await expect(runCompaction(engine, dataDir, { minFiles: 2, graceMs: 60_000 })).rejects.toThrow();
    const listed = await listPartitionFiles(dataDir, 'logs', WS, 'test', fine, fine + HOUR);
    expect(listed.map((f) => path.basename(f))).toEqual([expect.stringMatching(/^c-\d/)]);
    // Nothing half-written is left in the broken partition.
    expect((await fs.readdir(dirOf(broken))).sort()).toEqual([
      'wC-0000000001.parquet',
      'wC-0000000002.parquet',
    ]);
  });

  it('a compactor whose lease another process took stops before its next partition', async () => {
    const now = Date.now();
    const first = hourStart(now) - 40 * HOUR;
    const second = hourStart(now) - 39 * HOUR;
    for (const [hour, n] of [
      [first, 1],
      [second, 3],
    ] as const) {
      await parquet(path.join(dirOf(hour), `wL-000000000${n}.parquet`), 'a', hour + 1);
      await parquet(path.join(dirOf(hour), `wL-000000000${n + 1}.parquet`), 'b', hour + 2);
    }
    // It holds the lease for the first partition, then finds it taken (it stalled past it).
    let asked = 0;
    const stats = await runCompaction(engine, dataDir, {
      minFiles: 2,
      graceMs: 60_000,
      stillHolds: async () => ++asked === 1,
    });
    expect(stats.leaseLost).toBe(true);
    const names = async (hour: number) =>
      (await listPartitionFiles(dataDir, 'logs', WS, 'test', hour, hour + HOUR)).map((f) => path.basename(f));
    // Partitions are taken oldest first: the first merged, the second left to the compactor that holds the lease.
    expect(await names(first)).toEqual([expect.stringMatching(/^c-\d/)]);
    expect((await names(second)).sort()).toEqual(['wL-0000000003.parquet', 'wL-0000000004.parquet']);
    expect(asked).toBe(2);
  });
});
