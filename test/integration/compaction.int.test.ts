import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { filesForId } from '../../query/id-index.js';
import { CommitJournal } from '../../storage/commit-journal.js';
import { compactPartition } from '../../storage/compaction.js';
import { QueryEngine } from '../../storage/duckdb.js';
import { idFilterPath } from '../../storage/id-filter.js';
import { listPartitionFiles, partitionDir } from '../../storage/layout.js';
import { byIdPartsOf, legacyIdIndexPath, MANIFEST, type Manifest } from '../../storage/manifest.js';
import { eventually, execution, ingest, startStack, type TestStack } from '../support/env.js';
import { call, type SignedUp, signup } from '../support/http.js';

let stack: TestStack;
let owner: SignedUp;
const HOUR = 3_600_000;
const hourStart = (ms: number) => Math.floor(ms / HOUR) * HOUR;
/**
 * Two executions of `hour` whose ids sort before and after the test helper's (`ex-<pid>-…`): an hour beside one of
 * those whose copy's id range holds theirs, as random ids make every hour's (storage/compaction.ts idsInterleave).
 */
const aroundIds = (hour: number) =>
  ['ex-0', 'ex-zzzz'].map((executionId) =>
    execution({ service: 'around', startedAt: hour + 1, executionId }),
  );

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

/** The by-id parts beside a compacted file. */
const partsOf = async (file: string) =>
  byIdPartsOf(path.basename(file), await fs.readdir(path.dirname(file))).map((n) =>
    path.join(path.dirname(file), n),
  );

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
    // A few more reads after the manifest changed.
    const seen = counts.length;
    await eventually(
      async () => counts.length,
      (n) => n >= seen + 3,
    );
    stop = true;
    await loop;
    expect(pass?.partitions).toBeGreaterThanOrEqual(1);
    // /metrics counts the pass and its time.
    const metrics = (await call(stack.service, 'GET', '/metrics')).body;
    const figure = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(metrics)?.[1]);
    expect(figure('svc_compaction_passes_total')).toBeGreaterThanOrEqual(1);
    expect(figure('svc_compaction_seconds_total')).toBeGreaterThan(0);
    expect(counts.length).toBeGreaterThan(3);
    expect(new Set(counts)).toEqual(new Set([200]));

    const after = await files(hour, hour + HOUR);
    expect(after.map((f) => path.basename(f))).toEqual([expect.stringMatching(/^c-/)]);
    // The replaced files stay for the grace period (queries in flight), then go.
    await expect(fs.access(before[0]!)).resolves.toBeUndefined();
    const passes = await eventually(
      async () => {
        await stack.service.pipeline!.compact();
        return fs.access(before[0]!).then(
          () => 'kept',
          () => 'deleted',
        );
      },
      (state) => state === 'deleted',
    );
    expect(passes).toBe('deleted');
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
    // The merged file has its by-id copy beside it, which the detail reads.
    const merged = await files(hour, hour + HOUR);
    expect(merged).toHaveLength(1);
    expect(await partsOf(merged[0]!)).toHaveLength(1);
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

  it('the detail finds executions in files with a by-id copy and in files compacted before them', async () => {
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
      // Removed before any lookup has read the file, as a file compacted before by-id copies has none (it may
      // have the single id index of that time, which is not read).
      if (!keepIndex) {
        // Such a file has every column: it is made again from its copy, which holds them.
        const parts = await partsOf(file!);
        const engine = await QueryEngine.open(stack.config.dataDir, 1);
        try {
          await engine.all(
            `COPY (SELECT * FROM read_parquet($parts) ORDER BY service, started_at) TO '${file!}' (FORMAT parquet)`,
            { parts },
          );
        } finally {
          engine.close();
        }
        for (const part of parts) await fs.rm(part);
        const manifestPath = path.join(path.dirname(file!), MANIFEST);
        const manifest = JSON.parse(await fs.readFile(manifestPath, 'utf8'));
        delete manifest.byId;
        delete manifest.scanOnly;
        await fs.writeFile(manifestPath, JSON.stringify(manifest));
        await fs.writeFile(legacyIdIndexPath(file!), 'not parquet');
      }
      ids.push(...ex.map((e) => e.executionId as string));
    }
    const detailsFound = async () => {
      for (const id of ids) {
        const res = await call(stack.service, 'GET', `/api/executions/${id}`, { token: owner.session });
        expect(res.statusCode, res.body).toBe(200);
        expect(res.json().executionId).toBe(id);
      }
    };
    await detailsFound();
    // The next pass gives the file compacted before copies its copy, without rewriting it.
    const hour = hourStart(Date.now()) - 6 * HOUR;
    const [before] = await files(hour, hour + HOUR);
    expect(await partsOf(before!)).toEqual([]);
    await stack.service.pipeline!.compact();
    const [after] = await files(hour, hour + HOUR);
    expect(after).toBe(before);
    expect(await partsOf(after!)).toHaveLength(1);
    await detailsFound();
  });
});

describe('by-id copies', () => {
  const detailOf = async (id: string) => {
    const res = await call(stack.service, 'GET', `/api/executions/${id}`, { token: owner.session });
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as { executionId: string; durationMs: number; logs: { message: string }[] };
  };
  const listed = async (url: string) => {
    const res = await call(stack.service, 'GET', url, { token: owner.session });
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as { data: { message: string }[]; total: number };
  };
  const log = (executionId: string | undefined, timestamp: number, message: string) => ({
    timestamp,
    level: 'info',
    message,
    service: 'by-id',
    environment: 'production',
    ...(executionId ? { executionId } : {}),
  });
  const logFiles = (from: number, to: number) =>
    listPartitionFiles(stack.config.dataDir, 'logs', owner.workspaceId, 'test', from, to);
  const send = async (body: Record<string, unknown>) => {
    expect((await ingest(stack.service, owner.testKey, body)).statusCode).toBe(202);
    await stack.service.pipeline!.drained();
  };

  it('an execution and its logs are read from the by-id parts, from files written since and from the next hour', async () => {
    // An hour with none written before it, whose copy therefore gets filters of its ids.
    const hour = hourStart(Date.now()) - 50 * HOUR;
    const startedAt = hour + HOUR - 1000;
    const ex = execution({
      service: 'by-id',
      startedAt,
      durationMs: 800,
      logs: [0, 1, 2].map((i) => ({ timestamp: startedAt + 100 * i, level: 'info', message: `inline ${i}` })),
    });
    // Many executions, so the copies have several parts (16 row groups of 2,048 executions each, at most).
    const others = Array.from({ length: 40_000 }, (_, i) =>
      execution({
        service: `by-id-${i % 7}`,
        startedAt: hour + (i % 3_500_000),
        logs:
          i % 1000 === 0 ? [{ timestamp: hour + (i % 3_500_000), level: 'warn', message: `other ${i}` }] : [],
      }),
    );
    await send({ executions: [ex], logs: [log(undefined, startedAt + 50, 'no execution')] });
    for (let i = 0; i < others.length; i += 1000) await send({ executions: others.slice(i, i + 1000) });
    // The hour before with ids around all of these: the copies' ranges interleave, so this hour's gets filters.
    await send({ executions: aroundIds(hour - HOUR) });
    await send({ logs: [log(ex.executionId as string, startedAt + 250, 'sent apart')] });
    await stack.service.pipeline!.compact();
    const [exFile, ...moreEx] = await files(hour, hour + HOUR);
    const [logFile, ...moreLogs] = await logFiles(hour, hour + HOUR);
    expect([moreEx.length, moreLogs.length]).toEqual([0, 0]);
    expect((await partsOf(exFile!)).length).toBeGreaterThan(1);
    expect(await partsOf(logFile!)).toHaveLength(1);
    // The executions copy's parts have filters of their ids, in one file beside them.
    const manifestOf = async (f: string) =>
      JSON.parse(await fs.readFile(path.join(path.dirname(f), MANIFEST), 'utf8')) as Manifest;
    const exParts = (await manifestOf(exFile!)).byId![path.basename(exFile!)]!;
    expect(exParts.every((p) => p.filter?.hashes === 14 && p.filter.bits >= p.rows * 20)).toBe(true);
    expect((await fs.stat(idFilterPath(exFile!))).size).toBe(
      exParts.reduce((n, p) => n + p.filter!.bytes, 0),
    );
    // Ids that sort just after an execution's fall in its part's range, so the range alone would read the part.
    // With one part in range it is read (as fast as its filter); with several (random ids: one in each hour kept,
    // here the same file listed twice) the filters leave them out, but for their false positives (about 0.005 %).
    // The execution's own id finds its part either way.
    const absent = others.slice(0, 300).map((o) => `${o.executionId}~`);
    const inRange = absent.filter((id) => exParts.some((p) => p.min! <= id && id <= p.max!));
    expect(inRange.length).toBeGreaterThan(250);
    expect(await filesForId([exFile!], inRange[0]!)).toHaveLength(1);
    const read = await Promise.all(inRange.map((id) => filesForId([exFile!, exFile!], id)));
    expect(read.filter((f) => f.length > 0).length).toBeLessThan(10);
    for (const o of others.slice(0, 50)) {
      expect(await filesForId([exFile!], o.executionId as string)).toHaveLength(1);
      expect(await filesForId([exFile!, exFile!], o.executionId as string)).toHaveLength(2);
    }

    // After the merge: one more log in a file of its own (no copy) and one in the next hour's partition.
    await send({
      logs: [
        log(ex.executionId as string, startedAt + 700, 'after the merge'),
        log(ex.executionId as string, hour + HOUR + 500, 'next hour'),
      ],
    });
    expect(await logFiles(hour, hour + HOUR)).toHaveLength(2);
    const expected = ['inline 0', 'inline 1', 'inline 2', 'sent apart', 'after the merge', 'next hour'];
    expect((await detailOf(ex.executionId as string)).logs.map((l) => l.message)).toEqual(expected);
    const paged = await listed(`/api/executions/${ex.executionId}/logs?pageSize=4&page=2`);
    expect([paged.total, paged.data.map((l) => l.message)]).toEqual([6, expected.slice(4)]);
    const byFilter = await listed(
      `/api/logs?executionId=${ex.executionId}&from=${hour}&to=${hour + 2 * HOUR}&sort=timestamp`,
    );
    expect(byFilter.data.map((l) => l.message)).toEqual(expected);
    // Every execution of the hour is found, whichever part holds it, with its own logs.
    for (const o of others.filter((_, i) => i % 997 === 0 || i % 1000 === 0)) {
      const d = await detailOf(o.executionId as string);
      expect(d.executionId).toBe(o.executionId);
      expect(d.logs.map((l) => l.message)).toEqual((o.logs as { message: string }[]).map((l) => l.message));
    }
    expect((await listed(`/api/logs?from=${hour}&to=${hour + HOUR}&serviceName=by-id`)).total).toBe(6);
  });

  it('an ended hour keeps in its file what scans read, every column in its by-id copy, through a merge of late rows too', async () => {
    const hour = hourStart(Date.now()) - 12 * HOUR;
    const full = (startedAt: number, n: number) =>
      execution({
        service: 'scan-only',
        startedAt,
        statusCode: 500,
        traceId: `trace-${n}`,
        spanId: `span-${n}`,
        parentSpanId: `parent-${n}`,
        request: { route: '/orders/:id', headers: { 'x-request-id': `r-${n}` }, query: { page: n } },
        response: { headers: { 'content-type': 'application/json' }, fields: { error: 'boom' } },
        context: { customer: { tier: 'gold', id: `c-${n}` } },
        exception: { type: 'TimeoutError', message: `took too long ${n}` },
        outcomeEvidence: [{ kind: 'response-field', detail: 'error', verdict: 'failed' }],
      });
    const first = [full(hour + 1000, 1), full(hour + 2000, 2)];
    // The hour before interleaves this one's ids: the copy gets filters (removed with it below).
    await ingestSeparately([first.slice(0, 1), first.slice(1), aroundIds(hour - HOUR)]);
    const detailNow = async (id: string) => {
      const res = await call(stack.service, 'GET', `/api/executions/${id}`, { token: owner.session });
      expect(res.statusCode, res.body).toBe(200);
      const { logs: _l, spans: _s, issue: _i, ...rest } = res.json();
      return rest as Record<string, unknown>;
    };
    const before = await Promise.all(first.map((e) => detailNow(e.executionId as string)));
    expect(before[0]).toMatchObject({
      request: { route: '/orders/:id' },
      exception: { type: 'TimeoutError' },
    });
    const columnsOf = async (file: string) => {
      const engine = await QueryEngine.open(stack.config.dataDir, 1);
      try {
        return [...(await engine.columnsOf([file]))];
      } finally {
        engine.close();
      }
    };
    const scanOnlyFile = async () => {
      const [file, ...more] = await files(hour, hour + HOUR);
      expect(more).toEqual([]);
      const manifest = JSON.parse(await fs.readFile(path.join(path.dirname(file!), MANIFEST), 'utf8'));
      expect(manifest.scanOnly).toEqual([path.basename(file!)]);
      const columns = await columnsOf(file!);
      expect(columns).toEqual(
        expect.arrayContaining(['execution_id', 'trace_id', 'service', 'started_at', 'issue_id']),
      );
      for (const dropped of ['request', 'response', 'context', 'exception', 'span_id'])
        expect(columns).not.toContain(dropped);
      const parts = await partsOf(file!);
      expect(parts).toHaveLength(1);
      expect(await columnsOf(parts[0]!)).toEqual(expect.arrayContaining([...columns, 'request', 'context']));
      return file!;
    };
    await stack.service.pipeline!.compact();
    const merged = await scanOnlyFile();
    // The same answers from the by-id copy as from the pipeline's files.
    expect(await Promise.all(first.map((e) => detailNow(e.executionId as string)))).toEqual(before);
    const window = `serviceName=scan-only&from=${hour}&to=${hour + HOUR}`;
    expect(await total(window)).toBe(2);

    // A late row into the ended hour: the merge reads the scan-only file's rows from its copy, every column kept.
    const late = full(hour + 3000, 3);
    await ingestSeparately([[late]]);
    const lateBefore = await detailNow(late.executionId as string);
    await stack.service.pipeline!.compact();
    expect(await scanOnlyFile()).not.toBe(merged);
    expect(await Promise.all(first.map((e) => detailNow(e.executionId as string)))).toEqual(before);
    expect(await detailNow(late.executionId as string)).toEqual(lateBefore);
    expect(await total(window)).toBe(3);
    // Past the grace period the replaced file goes, with its copy and the filters of its ids.
    await expect(fs.access(idFilterPath(merged))).resolves.toBeUndefined();
    await eventually(
      async () => {
        await stack.service.pipeline!.compact();
        return fs.access(idFilterPath(merged)).then(
          () => 'kept',
          () => 'deleted',
        );
      },
      (state) => state === 'deleted',
    );
    expect(await partsOf(merged)).toEqual([]);
  });

  it('a copy written before its parts had filters of their ids gets them at the next pass', async () => {
    // A recent hour: lookups look its parts up again (the compactor may still give them filters).
    const hour = hourStart(Date.now()) - HOUR;
    const sent = Array.from({ length: 3000 }, (_, i) =>
      execution({ service: 'filters', startedAt: hour + i }),
    );
    await ingestSeparately([
      sent.slice(0, 1000),
      sent.slice(1000, 2000),
      sent.slice(2000),
      aroundIds(hour - HOUR),
    ]);
    await stack.service.pipeline!.compact();
    const [file] = await files(hour, hour + HOUR);
    const manifestPath = path.join(path.dirname(file!), MANIFEST);
    const written = JSON.parse(await fs.readFile(manifestPath, 'utf8')) as Manifest;
    const filters = await fs.readFile(idFilterPath(file!));
    // As an earlier build left it: no filter file, none named.
    const before: Manifest = {
      ...written,
      byId: { [path.basename(file!)]: written.byId![path.basename(file!)]!.map(({ filter: _, ...p }) => p) },
    };
    // The clock stands still from here (a pass taking over a minute must not make the lookups below look again).
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now());
    try {
      await fs.writeFile(manifestPath, JSON.stringify(before));
      await fs.rm(idFilterPath(file!));
      // Ids in range of a part that no execution has: without filters every listed file's part is read. A lookup
      // now keeps the parts it found (without filters) for a minute.
      const parts = written.byId![path.basename(file!)]!;
      const absent = sent
        .slice(0, 20)
        .map((e) => `${e.executionId}~`)
        .filter((id) => parts.some((p) => p.min! <= id && id <= p.max!));
      expect(absent.length).toBeGreaterThanOrEqual(18);
      const lookUp = () => Promise.all(absent.map((id) => filesForId([file!, file!], id)));
      expect((await lookUp()).map((f) => f.length)).toEqual(absent.map(() => 2));
      await stack.service.pipeline!.compact();
      const after = JSON.parse(await fs.readFile(manifestPath, 'utf8')) as Manifest;
      expect(after.byId).toEqual(written.byId);
      expect(await fs.readFile(idFilterPath(file!))).toEqual(filters);
      expect((await lookUp()).map((f) => f.length)).toEqual(absent.map(() => 2));
      vi.setSystemTime(Date.now() + 61_000);
      // Looked up again: the filters leave the parts out (but for a false positive, about 0.8 % each).
      expect((await lookUp()).filter((f) => f.length === 0).length).toBeGreaterThanOrEqual(absent.length - 3);
    } finally {
      vi.useRealTimers();
    }
    for (const e of sent.filter((_, i) => i % 300 === 0))
      expect(await filesForId([file!, file!], e.executionId as string)).toHaveLength(2);
  });

  it('an hour whose ids are apart from the nearest copies’ gets no filters; one whose ids interleave gets them', async () => {
    const copyOf = async (hour: number, dataset: 'executions' | 'logs' = 'executions') => {
      const [file] = await (dataset === 'logs' ? logFiles : files)(hour, hour + HOUR);
      const m = JSON.parse(await fs.readFile(path.join(path.dirname(file!), MANIFEST), 'utf8')) as Manifest;
      return m.byId![path.basename(file!)]!;
    };
    const now = hourStart(Date.now());
    const hourAt = (k: number) => now - k * HOUR;
    // One execution in ten with a log (the logs' copies get filters by the same rule).
    const send = async (hour: number, id: (i: number) => string) =>
      ingestSeparately([
        Array.from({ length: 500 }, (_, i) =>
          execution({
            service: 'ids',
            startedAt: hour + i,
            executionId: id(i),
            logs: i % 10 === 0 ? [{ timestamp: hour + i, level: 'info', message: `log ${i}` }] : [],
          }),
        ),
      ]);
    // Ids that sort by time: each hour's after the hour before's.
    await send(hourAt(71), (i) => `t-71-${String(i).padStart(4, '0')}`);
    await send(hourAt(70), (i) => `t-70-${String(i).padStart(4, '0')}`);
    // Random ids (prefixed, so that only these hours' ranges hold them: the other tests' ids start `ex-`). First a
    // burst alone, its copy then asked for filters again at the next pass (its hour is old: once in the process).
    const random = () => `r-${crypto.randomBytes(8).toString('hex')}`;
    await send(hourAt(93), random);
    await stack.service.pipeline!.compact();
    await stack.service.pipeline!.compact();
    expect((await copyOf(hourAt(93))).some((p) => p.filter)).toBe(false);
    // Then a burst three hours later, and two hours side by side.
    await send(hourAt(90), random);
    await send(hourAt(81), random);
    await send(hourAt(80), random);
    // Each copy has the nearest copy before it, three hours back for the first, and gets filters; the first burst's
    // is older and passed already (oldest first), but asked again at the next pass since the later copy interleaves.
    await stack.service.pipeline!.compact();
    for (const k of [90, 81, 80]) {
      expect((await copyOf(hourAt(k))).every((p) => p.filter)).toBe(true);
      expect((await copyOf(hourAt(k), 'logs')).every((p) => p.filter)).toBe(true);
    }
    // An execution's logs are found through the logs' filters (with two parts in range, here the same file listed
    // twice, the filters are asked), and ids in range that have no logs are left out.
    const [logs80] = await logFiles(hourAt(80), hourAt(79));
    const engine = await QueryEngine.open(stack.config.dataDir, 1);
    const logged = await engine
      .all('SELECT DISTINCT execution_id AS id FROM read_parquet($file) WHERE execution_id IS NOT NULL', {
        file: logs80!,
      })
      .finally(() => engine.close());
    expect(logged).toHaveLength(50);
    for (const { id } of logged) expect(await filesForId([logs80!, logs80!], id as string)).toHaveLength(2);
    // About 0.01 % of them pass a filter; without filters every one would read both.
    const unlogged = Array.from({ length: 200 }, random);
    const read = await Promise.all(unlogged.map((id) => filesForId([logs80!, logs80!], id)));
    expect(read.flat().length).toBeLessThan(5);
    expect((await copyOf(hourAt(93))).some((p) => p.filter)).toBe(false);
    expect((await copyOf(hourAt(71), 'logs')).some((p) => p.filter)).toBe(false);
    expect((await copyOf(hourAt(71))).some((p) => p.filter)).toBe(false);
    expect((await copyOf(hourAt(70))).some((p) => p.filter)).toBe(false);
    await expect(fs.access(idFilterPath((await files(hourAt(70), hourAt(69)))[0]!))).rejects.toThrow();
    await stack.service.pipeline!.compact();
    expect((await copyOf(hourAt(93))).every((p) => p.filter)).toBe(true);
    expect((await copyOf(hourAt(71))).some((p) => p.filter)).toBe(false);
    expect((await copyOf(hourAt(70))).some((p) => p.filter)).toBe(false);
  });

  it('the detail’s logs are those of the execution’s window: ±1 h around it, in whole hours, however long it ran', async () => {
    // Logs up to 5 h after: hours no other test writes.
    const hour = hourStart(Date.now()) - 20 * HOUR;
    // Started on the hour and took no time: its window ends an hour after it.
    const short = execution({ service: 'by-id', startedAt: hour, durationMs: 0 });
    const long = execution({ service: 'by-id', startedAt: hour + 2000, durationMs: 3 * HOUR });
    const id = (e: Record<string, unknown>) => e.executionId as string;
    await send({
      executions: [short, long],
      logs: [
        log(id(short), hour + 500, 'short: in'),
        log(id(short), hour + HOUR + 1_800_000, 'short: after its window'),
        log(id(long), hour + 2.5 * HOUR, 'long: 2.5 h in'),
        log(id(long), hour + 4.5 * HOUR, 'long: 4.5 h in'),
        log(id(long), hour + 5 * HOUR + 1, 'long: after its window'),
      ],
    });
    const check = async () => {
      expect((await detailOf(id(short))).logs.map((l) => l.message)).toEqual(['short: in']);
      expect((await detailOf(id(long))).logs.map((l) => l.message)).toEqual([
        'long: 2.5 h in',
        'long: 4.5 h in',
      ]);
      expect((await listed(`/api/executions/${id(long)}/logs`)).total).toBe(2);
    };
    await check();
    await stack.service.pipeline!.compact();
    expect(path.basename((await files(hour, hour + HOUR))[0]!)).toMatch(/^c-\d/);
    await check();
  });

  it('a logs file without any execution id gets an empty by-id copy, and lookups by id find nothing there', async () => {
    const hour = hourStart(Date.now()) - 10 * HOUR;
    await send({ logs: [log(undefined, hour + 1000, 'alone 1'), log(undefined, hour + 2000, 'alone 2')] });
    await stack.service.pipeline!.compact();
    const [merged] = await logFiles(hour, hour + HOUR);
    expect(path.basename(merged!)).toMatch(/^c-\d/);
    // DuckDB writes one part without a row group; the lookup skips it.
    const parts = await partsOf(merged!);
    const engine = await QueryEngine.open(stack.config.dataDir, 1);
    try {
      const [row] = await engine.all('SELECT count(*)::DOUBLE AS n FROM read_parquet($files)', {
        files: parts,
      });
      expect([parts.length, row!.n]).toEqual([1, 0]);
    } finally {
      engine.close();
    }
    const window = `from=${hour}&to=${hour + HOUR}`;
    expect((await listed(`/api/logs?${window}`)).total).toBe(2);
    expect((await listed(`/api/logs?executionId=ex-none&${window}`)).total).toBe(0);
  });
});
