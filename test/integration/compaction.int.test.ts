import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CommitJournal } from '../../storage/commit-journal.js';
import { QueryEngine } from '../../storage/duckdb.js';
import { listPartitionFiles } from '../../storage/layout.js';
import { COMPACTED_ROW, idIndexPath, MANIFEST } from '../../storage/manifest.js';
import { execution, ingest, startStack, type TestStack } from '../support/env.js';
import { call, type SignedUp, signup } from '../support/http.js';

let stack: TestStack;
let owner: SignedUp;
const HOUR = 3_600_000;
const hourStart = (ms: number) => Math.floor(ms / HOUR) * HOUR;

beforeAll(async () => {
  // The timer never fires in the test: passes run when the test calls compact().
  stack = await startStack('compaction', {
    COMPACTION_INTERVAL_MS: '3600000',
    COMPACTION_MIN_FILES: '4',
    COMPACTION_GRACE_MS: '1500',
  });
  owner = await signup(stack.service);
});
afterAll(async () => {
  await stack?.close();
});

const total = async (query: string) => {
  const res = await call(stack.service, 'GET', `/api/executions?pageSize=1&${query}`, {
    token: owner.session,
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().total as number;
};

/** One request per file: each is drained before the next, so each lands in a flush of its own. */
async function ingestSeparately(batches: Record<string, unknown>[][]) {
  for (const executions of batches) {
    expect((await ingest(stack.service, owner.testKey, { executions })).statusCode).toBe(202);
    await stack.service.pipeline!.drained();
  }
}

const files = (from: number, to: number) =>
  listPartitionFiles(stack.config.dataDir, 'executions', owner.workspaceId, 'test', from, to);

describe('compaction', () => {
  it('merges files under a read loop without a count ever changing, then deletes the replaced files', async () => {
    const hour = hourStart(Date.now()) - 2 * HOUR;
    await ingestSeparately(
      Array.from({ length: 8 }, (_, b) =>
        Array.from({ length: 25 }, (_, i) =>
          execution({ service: 'loop', startedAt: hour + 60_000 + b * 1000 + i }),
        ),
      ),
    );
    const window = `serviceName=loop&from=${hour}&to=${hour + HOUR}`;
    expect(await total(window)).toBe(200);
    const before = await files(hour, hour + HOUR);
    expect(before.length).toBe(8);

    let stop = false;
    const counts: number[] = [];
    const loop = (async () => {
      while (!stop) counts.push(await total(window));
    })();
    const pass = await stack.service.pipeline!.compact();
    await new Promise((r) => setTimeout(r, 200));
    stop = true;
    await loop;
    expect(pass?.partitions).toBeGreaterThanOrEqual(1);
    expect(counts.length).toBeGreaterThan(3);
    expect(new Set(counts)).toEqual(new Set([200]));

    const after = await files(hour, hour + HOUR);
    expect(after.map((f) => path.basename(f))).toEqual([expect.stringMatching(/^c-/)]);
    // The replaced files stay for the grace period (queries in flight), then go.
    await expect(fs.access(before[0]!)).resolves.toBeUndefined();
    await new Promise((r) => setTimeout(r, 1600));
    await stack.service.pipeline!.compact();
    await expect(fs.access(before[0]!)).rejects.toThrow();
    expect(await total(window)).toBe(200);
    const manifest = JSON.parse(await fs.readFile(path.join(path.dirname(after[0]!), MANIFEST), 'utf8'));
    expect(manifest.deleted).toHaveLength(8);

    // A journal entry naming a compacted-away file is not mistaken for lost data.
    const journalDir = path.join(stack.dir, 'journal-check');
    await fs.mkdir(path.join(journalDir, '_journal'), { recursive: true });
    const entry = {
      writerId: 'wZ',
      commitNo: 1,
      seqs: [1],
      files: [{ tmpPath: `${before[0]}.tmp`, finalPath: before[0] }],
    };
    await fs.writeFile(path.join(journalDir, '_journal', 'wZ-0000000001.json'), JSON.stringify(entry));
    expect(await new CommitJournal(journalDir, 'wY').recover()).toMatchObject({ entries: 1, lost: 0 });
  });

  it('an execution resent in another request is stored once after its hour is compacted', async () => {
    const hour = hourStart(Date.now()) - 3 * HOUR;
    const ex = execution({ service: 'resent', startedAt: hour + 5000 });
    await ingestSeparately([
      [ex, execution({ service: 'resent', startedAt: hour + 6000 })],
      [{ ...ex, durationMs: 99 }],
    ]);
    const window = `serviceName=resent&from=${hour}&to=${hour + HOUR}`;
    expect(await total(window)).toBe(3);
    await stack.service.pipeline!.compact();
    expect(await total(window)).toBe(2);
    const detail = await call(stack.service, 'GET', `/api/executions/${ex.executionId}`, {
      token: owner.session,
    });
    // The first stored copy is the one kept.
    expect(detail.json().durationMs).toBe(ex.durationMs);
    // The merged file has its sorted id index beside it, which the detail lookup goes through.
    const merged = await files(hour, hour + HOUR);
    expect(merged).toHaveLength(1);
    await expect(fs.access(idIndexPath(merged[0]!))).resolves.toBeUndefined();
    const missing = await call(stack.service, 'GET', '/api/executions/not-there', { token: owner.session });
    expect(missing.statusCode).toBe(404);
  });

  it('the hour being written merges only its small files, and new data stays visible', async () => {
    const hour = hourStart(Date.now());
    const now = Date.now();
    await ingestSeparately(
      Array.from({ length: 4 }, (_, b) => [
        execution({ service: 'live-hour', startedAt: Math.max(hour, now - 5000) + b }),
      ]),
    );
    await stack.service.pipeline!.compact();
    const merged = await files(hour, hour + HOUR);
    expect(merged.filter((f) => path.basename(f).startsWith('c-'))).toHaveLength(1);
    await ingestSeparately([[execution({ service: 'live-hour', startedAt: Math.max(hour, now - 4000) })]]);
    expect(await total(`serviceName=live-hour&from=${hour}`)).toBe(5);
  });

  it('numbers the rows of a merged file for the detail lookup; files compacted before that are still found', async () => {
    const detail = async (id: string) => {
      const res = await call(stack.service, 'GET', `/api/executions/${id}`, { token: owner.session });
      expect(res.statusCode, res.body).toBe(200);
      return res.json().executionId as string;
    };
    const engine = await QueryEngine.open(path.join(stack.dir, 'engine'));
    try {
      // Numbered: the merged file and its index carry the row numbers, unique and in file order, also when an
      // hour's merged file is merged again with newer files.
      const hour = hourStart(Date.now()) - 4 * HOUR;
      const first = Array.from({ length: 30 }, (_, i) =>
        execution({ service: `n${i % 3}`, startedAt: hour + i }),
      );
      await ingestSeparately([first.slice(0, 15), first.slice(15)]);
      await stack.service.pipeline!.compact();
      const later = [execution({ service: 'n1', startedAt: hour + 100 })];
      await ingestSeparately([later]);
      await stack.service.pipeline!.compact();
      const [merged] = await files(hour, hour + HOUR);
      const rows = await engine.all(
        `SELECT service, ${COMPACTED_ROW}::DOUBLE AS n FROM read_parquet($f) ORDER BY ${COMPACTED_ROW}`,
        { f: merged! },
      );
      expect(rows).toHaveLength(31);
      expect(new Set(rows.map((r) => r.n)).size).toBe(31);
      const services = rows.map((r) => r.service as string);
      expect(services).toEqual([...services].sort());
      expect(await engine.columnsOf([idIndexPath(merged!)])).toContain(COMPACTED_ROW);
      for (const e of [...first, ...later]) expect(await detail(e.executionId as string)).toBe(e.executionId);

      // Compacted before row numbers (the file and its index without them), and before id indexes (none): each
      // rewritten here before any lookup has read it, as such files were written.
      const lookups: string[] = [];
      for (const [offset, keepIndex] of [
        [5, true],
        [6, false],
      ] as const) {
        const old = hourStart(Date.now()) - offset * HOUR;
        const ex = Array.from({ length: 6 }, (_, i) =>
          execution({ service: `o${i % 2}`, startedAt: old + i }),
        );
        await ingestSeparately([ex.slice(0, 3), ex.slice(3)]);
        await stack.service.pipeline!.compact();
        const [file] = await files(old, old + HOUR);
        for (const f of keepIndex ? [file!, idIndexPath(file!)] : [file!]) {
          await engine.all(
            `COPY (SELECT * EXCLUDE (${COMPACTED_ROW}) FROM read_parquet($f)) TO '${f}.old' (FORMAT parquet)`,
            { f },
          );
          await fs.rename(`${f}.old`, f);
        }
        if (!keepIndex) await fs.rm(idIndexPath(file!));
        lookups.push(...ex.map((e) => e.executionId as string));
      }
      for (const id of lookups) expect(await detail(id)).toBe(id);
    } finally {
      engine.close();
    }
  });
});
