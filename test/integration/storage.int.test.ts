import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IDEMPOTENCY_WINDOW_MS } from '../../schemas/broker-messages.js';
import { BatchWriter } from '../../storage/batch-writer.js';
import { ChunkSet } from '../../storage/columns.js';
import { CommitJournal, type Delivery, NotCommitted } from '../../storage/commit-journal.js';
import { QueryEngine } from '../../storage/duckdb.js';
import { listPartitionFiles, partitionDir } from '../../storage/layout.js';
import { removeOrphanTempFiles } from '../../storage/orphans.js';
import { encodeParquet } from '../../storage/parquet-encode.js';
import { tempDir } from '../support/env.js';

let dir: string;
let engine: QueryEngine;

beforeAll(async () => {
  dir = await tempDir('storage');
  engine = await QueryEngine.open(dir);
});
afterAll(async () => {
  engine?.close();
  await fs.rm(dir, { recursive: true, force: true });
});

const HOUR = 3_600_000;
const T0 = Date.UTC(2026, 10, 20, 22, 30);

describe('Parquet encoding', () => {
  it('round-trips every column type and null through DuckDB', async () => {
    const set = new ChunkSet();
    set.add('metrics', T0, [T0, 'cpu', 'gauge', 0.5, null, null, null, null, '%', 's', 'e', null, 'r1', 7]);
    set.add('metrics', T0 + 1, [
      T0 + 1,
      'lat',
      'histogram',
      null,
      3,
      30,
      1,
      20,
      null,
      's',
      'e',
      '{"a":"é"}',
      'r1',
      2 ** 40,
    ]);
    set.add('rejections', T0, [T0, 'r2', 'executions', 4, 'VALIDATION_ERROR', '[]', 9]);
    const chunks = set.finish();
    expect(chunks.map((c) => [c.dataset, c.rows])).toEqual([
      ['metrics', 2],
      ['rejections', 1],
    ]);
    const file = path.join(dir, 'roundtrip.parquet');
    await fs.writeFile(file, encodeParquet('metrics', [chunks[0]!, chunks[0]!], 'zstd'));
    const rows = await engine.all(
      `SELECT epoch_ms(timestamp)::DOUBLE AS ts, name, type, value, hist_count, hist_max, unit, tags,
         ingest_seq::DOUBLE AS seq FROM read_parquet($files) ORDER BY ts, name`,
      { files: [file] },
    );
    expect(rows).toHaveLength(4);
    expect(rows[0]).toEqual({
      ts: T0,
      name: 'cpu',
      type: 'gauge',
      value: 0.5,
      hist_count: null,
      hist_max: null,
      unit: '%',
      tags: null,
      seq: 7,
    });
    expect(rows[2]).toEqual({
      ts: T0 + 1,
      name: 'lat',
      type: 'histogram',
      value: null,
      hist_count: 3,
      hist_max: 20,
      unit: null,
      tags: '{"a":"é"}',
      seq: 2 ** 40,
    });
  });
});

describe('partition layout', () => {
  it('lists only the hours that overlap [from, to), in time order', async () => {
    const make = async (hour: number, name: string) => {
      const d = partitionDir(dir, 'logs', 'ws_layout', 'test', hour);
      await fs.mkdir(d, { recursive: true });
      await fs.writeFile(path.join(d, name), '');
      return path.join(d, name);
    };
    const h0 = Math.floor(T0 / HOUR) * HOUR;
    const a = await make(h0, 'a.parquet');
    const b = await make(h0 + HOUR, 'b.parquet');
    const c = await make(h0 + 2 * HOUR, 'c.parquet'); // crosses midnight into the next date
    await make(h0 + HOUR, 'pending.parquet.tmp');
    expect(path.basename(path.dirname(path.dirname(c)))).toBe('date=2026-11-21');
    expect(await listPartitionFiles(dir, 'logs', 'ws_layout', 'test', 0, Number.MAX_SAFE_INTEGER)).toEqual([
      a,
      b,
      c,
    ]);
    expect(
      await listPartitionFiles(dir, 'logs', 'ws_layout', 'test', h0 + 59 * 60_000, h0 + 2 * HOUR),
    ).toEqual([a, b]);
    expect(await listPartitionFiles(dir, 'logs', 'ws_layout', 'test', h0 + HOUR, h0 + HOUR + 1)).toEqual([b]);
    expect(await listPartitionFiles(dir, 'logs', 'ws_layout', 'live', 0, Number.MAX_SAFE_INTEGER)).toEqual(
      [],
    );
    expect(() => partitionDir(dir, 'logs', '../etc', 'test', h0)).toThrow();
  });
});

describe('batch writer', () => {
  it("leaves no temporary file, the journal entry's or a Parquet file's, when a batch fails before its commit point", async () => {
    const data = path.join(dir, 'writer');
    const journal = new CommitJournal(data, 'wW');
    await journal.recover();
    const writer = new BatchWriter({ dataDir: data, codec: 'uncompressed', journal, encodeThreads: 1 });
    const batch = () => {
      const set = new ChunkSet();
      set.add('metrics', T0, [T0, 'cpu', 'gauge', 0.5, null, null, null, null, '%', 's', 'e', null, 'r1', 7]);
      return set.finish().map((c) => ({
        dataset: c.dataset,
        workspaceId: 'ws_writer',
        mode: 'test' as const,
        hour: c.hour,
        chunks: [c],
      }));
    };
    const delivery: Delivery = { seq: 1, id: 'm1', storedAt: Date.now() };
    const temporary = async () =>
      (await fs.readdir(data, { recursive: true })).filter((n) => String(n).endsWith('.tmp'));
    try {
      // The issue upserts failed: nothing committed, nothing left.
      await expect(
        writer.write(batch(), [delivery], Promise.reject(new Error('upsert failed'))),
      ).rejects.toThrow('upsert failed');
      expect(await temporary()).toEqual([]);
      // The claims may have lapsed: the entry is never linked.
      await expect(
        writer.write(batch(), [delivery], undefined, { no: journal.nextCommitNo(), lapsed: () => true }),
      ).rejects.toBeInstanceOf(NotCommitted);
      expect(await temporary()).toEqual([]);
      expect(await journal.isCommitted(delivery)).toBe(false);
      // A step right before the commit point that throws (the stall seam's place): nothing left either.
      const stalling = new BatchWriter({
        dataDir: data,
        codec: 'uncompressed',
        journal,
        encodeThreads: 1,
        beforeCommitPoint: () => {
          throw new Error('stalled');
        },
      });
      try {
        await expect(stalling.write(batch(), [delivery])).rejects.toThrow('stalled');
      } finally {
        await stalling.close();
      }
      expect(await temporary()).toEqual([]);
      // Then one that commits: its file in place, its message committed, nothing temporary.
      expect((await writer.write(batch(), [delivery])).files).toBe(1);
      expect(await temporary()).toEqual([]);
      expect(await journal.isCommitted(delivery)).toBe(true);
      const dirOf = partitionDir(data, 'metrics', 'ws_writer', 'test', Math.floor(T0 / HOUR) * HOUR);
      expect((await fs.readdir(dirOf)).filter((n) => n.endsWith('.parquet'))).toHaveLength(1);
    } finally {
      await writer.close();
    }
  });
});

describe('commit journal', () => {
  it('commits, recovers renames after a crash, answers redeliveries, and prunes', async () => {
    const data = path.join(dir, 'journal');
    const tmp = (n: string) => path.join(data, 'executions', `${n}.parquet.tmp`);
    const fin = (n: string) => path.join(data, 'executions', `${n}.parquet`);
    await fs.mkdir(path.join(data, 'executions'), { recursive: true });
    for (const n of ['a', 'b', 'c']) await fs.writeFile(tmp(n), n);

    const T = Date.now();
    /** Message n of the stream: request `r<n>` unless another id is given, stored at T + n ms. */
    const d = (seq: number, id = `r${seq}`, storedAt = T + seq): Delivery => ({ seq, id, storedAt });
    const writer = new CommitJournal(data, 'wA');
    await writer.recover();
    await writer.commit({
      writerId: 'wA',
      commitNo: writer.nextCommitNo(),
      seqs: [1, 2],
      ids: ['r1', 'r2'],
      storedAt: [T + 1, T + 2],
      files: [{ tmpPath: tmp('a'), finalPath: fin('a') }],
    });
    expect(await fs.readFile(fin('a'), 'utf8')).toBe('a');
    expect(await writer.isCommitted(d(2))).toBe(true);
    expect(await writer.isCommitted(d(3))).toBe(false);
    // A resend of request r2 that a restarted broker stored again, under a new sequence: the same request.
    expect(await writer.isCommitted(d(7, 'r2', T + 60_000))).toBe(true);
    // The same key reused once the idempotency window is over is a new request (CONTRACT §5).
    expect(writer.knows(d(8, 'r2', T + 2 + IDEMPOTENCY_WINDOW_MS))).toBe(false);
    expect(await writer.committedAmong([d(1), d(3), d(9, 'r1', T + 5000)])).toEqual(new Set([1, 9]));
    // Within one batch: a second copy of a request goes; the same key far enough apart is another request.
    const far = T + 30 + IDEMPOTENCY_WINDOW_MS + 1;
    expect(await writer.committedAmong([d(30, 'x', T + 30), d(31, 'x', T + 31), d(32, 'x', far)])).toEqual(
      new Set([31]),
    );
    // A key reused after the window, committed first, does not hide a first copy still on its way (a backlog):
    // each is known by its own time.
    const reused = T + 1 + IDEMPOTENCY_WINDOW_MS + 5000;
    const tmpR = path.join(data, 'executions', 'r.parquet.tmp');
    await fs.writeFile(tmpR, 'r');
    await writer.commit({
      writerId: 'wA',
      commitNo: writer.nextCommitNo(),
      seqs: [40],
      ids: ['r1'],
      storedAt: [reused],
      files: [{ tmpPath: tmpR, finalPath: fin('r') }],
    });
    expect(writer.knows(d(1))).toBe(true);
    expect(writer.knows(d(41, 'r1', reused + 1000))).toBe(true);
    expect(writer.knows(d(42, 'r1', T + 1 + IDEMPOTENCY_WINDOW_MS / 2 + 2500))).toBe(true);
    expect(writer.knows(d(43, 'r1', reused + IDEMPOTENCY_WINDOW_MS))).toBe(false);

    // A second writer commits seqs 3–4; its entry is durable but it "dies" before renaming file b.
    const entry = {
      writerId: 'wB',
      commitNo: 1,
      seqs: [3, 4],
      ids: ['r3', 'r4'],
      storedAt: [T + 3, T + 4],
      files: [{ tmpPath: tmp('b'), finalPath: fin('b') }],
    };
    await fs.writeFile(path.join(data, '_journal', 'wB-0000000001.json'), JSON.stringify(entry));
    // The first writer learns of it when a redelivered seq 4 arrives, and finishes the rename.
    expect(await writer.isCommitted(d(4))).toBe(true);
    expect(await fs.readFile(fin('b'), 'utf8')).toBe('b');

    // An entry of an earlier version (sequences only) still answers by sequence.
    await fs.writeFile(
      path.join(data, '_journal', 'wZ-0000000001.json'),
      JSON.stringify({ writerId: 'wZ', commitNo: 1, seqs: [5], files: [] }),
    );

    // A restarted process sees every entry.
    const restarted = new CommitJournal(data, 'wC');
    expect((await restarted.recover()).entries).toBe(4);
    expect(await restarted.isCommitted(d(1))).toBe(true);
    expect(await restarted.isCommitted(d(3))).toBe(true);
    expect(await restarted.isCommitted(d(5, 'other'))).toBe(true);

    // An entry goes once the ack floor has passed its every sequence and every message still to be processed was
    // stored more than the idempotency window (and a minute for clocks) after the entry's newest: until then a
    // resend after a broker restart, or one waiting in a backlog, would still be a copy.
    const later = T + 10 + IDEMPOTENCY_WINDOW_MS + 60_000;
    expect(await restarted.prune(5, T + 60_000)).toBe(1); // the earlier version's entry: no window to keep
    expect(await restarted.prune(1, later)).toBe(0); // the ack floor has not passed seq 2
    expect(await restarted.prune(2, T + 5 + IDEMPOTENCY_WINDOW_MS)).toBe(0); // a pending message within reach
    expect(await restarted.prune(2, later)).toBe(1);
    expect((await fs.readdir(path.join(data, '_journal'))).sort()).toEqual([
      'wA-0000000002.json',
      'wB-0000000001.json',
    ]);
    expect(restarted.knows(d(2))).toBe(false);
    expect(restarted.knows(d(3))).toBe(true);
    expect(await restarted.prune(40, later)).toBe(1);
    expect(await restarted.prune(40, reused + IDEMPOTENCY_WINDOW_MS + 60_000)).toBe(1);
    expect(await fs.readdir(path.join(data, '_journal'))).toEqual([]);

    // An entry prepared while its batch is encoded and given up before its commit point leaves nothing behind.
    const journal = (await fs.readdir(path.join(data, '_journal'))).sort();
    const third = new CommitJournal(data, 'wG');
    await third.recover();
    await fs.writeFile(tmp('p'), 'p');
    const given = third.prepare({
      writerId: 'wG',
      commitNo: third.nextCommitNo(),
      seqs: [50],
      ids: ['r50'],
      storedAt: [T + 50],
      files: [{ tmpPath: tmp('p'), finalPath: fin('p') }],
    });
    await given.written;
    expect((await fs.readdir(path.join(data, '_journal'))).sort()).toEqual([
      ...journal,
      'wG-0000000001.json.tmp',
    ]);
    await third.discard(given);
    expect((await fs.readdir(path.join(data, '_journal'))).sort()).toEqual(journal);
    expect(await third.isCommitted(d(50))).toBe(false);
    await fs.rm(tmp('p'));

    // A committed file that vanished never passes for "already renamed": the entry is set aside and its
    // messages count as uncommitted, so they are processed again instead of acked with their rows gone.
    const lost = {
      writerId: 'wD',
      commitNo: 1,
      seqs: [9],
      ids: ['r9'],
      storedAt: [T + 9],
      files: [{ tmpPath: tmp('gone'), finalPath: fin('gone') }],
    };
    await fs.writeFile(path.join(data, '_journal', 'wD-0000000001.json'), JSON.stringify(lost));
    const afterLoss = new CommitJournal(data, 'wE');
    // Another process finding it at the same moment: whichever sets it aside first, neither knows r9 after.
    const alongside = new CommitJournal(data, 'wF');
    const [one, two] = await Promise.all([afterLoss.recover(), alongside.recover()]);
    expect(one.lost + two.lost).toBeGreaterThanOrEqual(1);
    expect(await afterLoss.isCommitted(d(9))).toBe(false);
    expect(await alongside.isCommitted(d(9))).toBe(false);
    await fs.rm(path.join(data, '_journal', 'wD-0000000001.json.lost'));

    // The uncommitted temporary file c is an orphan once it is old enough.
    // So are the by-id parts of a compaction that died before its merged file was renamed in (or the single id
    // index of an earlier version), and the directory DuckDB was writing parts into; those of a live file stay.
    const at = (name: string) => path.join(data, 'executions', name);
    await fs.writeFile(at('c-dead.parquet.ids-0000'), 'x');
    await fs.writeFile(at('c-dead.parquet.ids'), 'x');
    await fs.mkdir(at('c-dying.parquet.ids.tmp'));
    await fs.writeFile(path.join(at('c-dying.parquet.ids.tmp'), 'data_0.parquet'), 'x');
    await fs.writeFile(at('a.parquet.ids-0000'), 'x');
    await fs.writeFile(at('a.parquet.ids'), 'x');
    // The same for the filters of a copy's ids.
    await fs.writeFile(at('c-dead.parquet.idfilter'), 'x');
    await fs.writeFile(at('a.parquet.idfilter'), 'x');
    // The same for a baseline rollup.
    await fs.writeFile(at('c-dead.parquet.rollup'), 'x');
    await fs.writeFile(at('a.parquet.rollup'), 'x');
    // And a generation file whose writer died before renaming it into place.
    await fs.writeFile(at('_generation.0a1b2c.gen.tmp'), 'x');
    expect(await removeOrphanTempFiles(data, 60_000)).toBe(0);
    expect(await removeOrphanTempFiles(data, 60_000, Date.now() + 120_000)).toBe(7);
    for (const gone of [
      'c-dead.parquet.ids-0000',
      'c-dead.parquet.ids',
      'c-dead.parquet.idfilter',
      'c-dying.parquet.ids.tmp',
      'c-dead.parquet.rollup',
    ])
      await expect(fs.access(at(gone))).rejects.toThrow();
    for (const kept of ['a.parquet.ids-0000', 'a.parquet.ids', 'a.parquet.idfilter', 'a.parquet.rollup'])
      await expect(fs.access(at(kept))).resolves.toBeUndefined();
    await expect(fs.access(tmp('c'))).rejects.toThrow();
    await expect(fs.access(fin('a'))).resolves.toBeUndefined();
  });
});
