import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CommitJournal } from '../../storage/commit-journal.js';
import { compactPartition } from '../../storage/compaction.js';
import { QueryEngine } from '../../storage/duckdb.js';
import { listPartitionFiles, partitionDir } from '../../storage/layout.js';
import { idIndexPath, MANIFEST } from '../../storage/manifest.js';
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

  it('a file merged while its hour was written is merged again when the hour ends: a resent execution goes', async () => {
    // An hour of its own (no other test writes there), passes timed by `now`.
    const hour = hourStart(Date.now()) - 9 * HOUR;
    const at = hour + 60_000;
    const ex = execution({ service: 'rerun', startedAt: at });
    await ingestSeparately([
      [ex],
      [{ ...ex, durationMs: 99 }],
      [execution({ service: 'rerun', startedAt: at + 1 })],
      [execution({ service: 'rerun', startedAt: at + 2 })],
    ]);
    const window = `serviceName=rerun&from=${hour}&to=${hour + HOUR}`;
    const dir = partitionDir(stack.config.dataDir, 'executions', owner.workspaceId, 'test', hour);
    const engine = await QueryEngine.open(stack.config.dataDir, 1);
    try {
      // While the hour is written: the small files become one file, both copies still in it.
      await compactPartition(engine, dir, 'executions', hour, { minFiles: 4, graceMs: 0, now: at + 1000 });
      expect(await files(hour, hour + HOUR)).toHaveLength(1);
      expect(await total(window)).toBe(4);
      // Nothing more arrives; the pass after the hour's end merges that one file again, deduplicated.
      await compactPartition(engine, dir, 'executions', hour, {
        minFiles: 4,
        graceMs: 0,
        now: hour + HOUR + 1,
      });
      expect(await total(window)).toBe(3);
      const [final] = await files(hour, hour + HOUR);
      expect(path.basename(final!)).toMatch(/^c-\d/);
    } finally {
      engine.close();
    }
  });

  it('the detail finds executions in files with an id index and in files compacted before indexes', async () => {
    const ids: string[] = [];
    for (const [offset, keepIndex] of [
      [5, true],
      [6, false],
    ] as const) {
      const hour = hourStart(Date.now()) - offset * HOUR;
      const ex = Array.from({ length: 6 }, (_, i) =>
        execution({ service: `o${i % 2}`, startedAt: hour + i }),
      );
      await ingestSeparately([ex.slice(0, 3), ex.slice(3)]);
      await stack.service.pipeline!.compact();
      const [file] = await files(hour, hour + HOUR);
      // Removed before any lookup has read the file, as a file compacted before indexes never had one.
      if (!keepIndex) await fs.rm(idIndexPath(file!));
      ids.push(...ex.map((e) => e.executionId as string));
    }
    for (const id of ids) {
      const res = await call(stack.service, 'GET', `/api/executions/${id}`, { token: owner.session });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().executionId).toBe(id);
    }
  });
});
