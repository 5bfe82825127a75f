import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Config } from '../schemas/config.js';
import { HOUR_MS } from '../schemas/time.js';
import type { DatasetName } from './datasets.js';
import { DATASET_NAMES } from './datasets.js';
import { isOutOfMemory, parquetCopyOptions, type QueryEngine, type SqlParam } from './duckdb.js';
import { fsyncDir, fsyncFile } from './fsync.js';
import { changedHours } from './generation.js';
import { FILTERS_SETTLE_MS, idFilterPath, writeIdFilters } from './id-filter.js';
import { datePartitions, hourPartitions, hoursBeside, modeDirs, partitionHourOf } from './layout.js';
import {
  type ByIdPart,
  byIdPartName,
  byIdPartsOf,
  byIdTempDir,
  COMPACTED_PREFIX,
  emptyManifest,
  legacyIdIndexPath,
  type Manifest,
  RUNNING_PREFIX,
  readManifest,
  visibleFiles,
  wholeRowFiles,
  writeManifest,
} from './manifest.js';
import { EXECUTION_SIDECARS, type SidecarField, type SidecarKind } from './sidecars.js';

/**
 * Merges a partition's small files into one, sorted for pruning and, for executions, deduplicated by
 * executionId (CONTRACT §5: an execution resent in another request is stored once from the time its hour has
 * been compacted). The merged file is written under its final name, invisible until the manifest names it;
 * the manifest swap is the single atomic step, and the replaced files are deleted only after a grace period
 * (queries that listed them may still be reading).
 */

const fsyncAll = (paths: string[]) => Promise.all(paths.map(fsyncFile));

// Without hive_partitioning = false DuckDB would add the path's ws=/mode=/date=/hour= segments as columns.
const ALL_ROWS = 'SELECT * FROM read_parquet($files, union_by_name = true, hive_partitioning = false)';

/**
 * Per dataset, the merge that ends an hour: the rows kept and their order in the hour's one file. Executions
 * are deduplicated (the first stored copy of each id is kept): the contract's promise.
 */
const FIRST_COPY =
  'QUALIFY row_number() OVER (PARTITION BY execution_id ORDER BY received_at, ingest_seq) = 1';

const FINAL: Record<Exclude<DatasetName, 'failures'>, string> = {
  executions: `${ALL_ROWS}
    ${FIRST_COPY}
    ORDER BY service, started_at`,
  logs: `${ALL_ROWS} ORDER BY service, timestamp, ingest_seq`,
  metrics: `${ALL_ROWS} ORDER BY name, timestamp, ingest_seq`,
  // A span resent in another body is kept once (the first stored copy); the file is sorted by trace.
  spans: `${ALL_ROWS}
    QUALIFY row_number() OVER (PARTITION BY trace_id, span_id ORDER BY received_at, ingest_seq) = 1
    ORDER BY trace_id, started_at`,
  rejections: `${ALL_ROWS} ORDER BY received_at, ingest_seq, kind, item_index`,
};

/**
 * Per dataset, a merge while the hour is still written. It only cuts the number of files, and the hour's end
 * merges it again, so it does the least that keeps the running hour quick to query: executions (the list's
 * service and time filters) are sorted but not deduplicated; logs, metrics and rejections are concatenated.
 * Measured per row on one DuckDB thread: executions 2.3 µs sorted against 3.4 deduplicated; logs 0.6 µs
 * concatenated against 1.3 sorted, and logs are 2–3 rows per execution.
 */
const RUNNING: Record<DatasetName, string> = {
  executions: `${ALL_ROWS} ORDER BY service, started_at`,
  failures: ALL_ROWS,
  logs: ALL_ROWS,
  metrics: ALL_ROWS,
  spans: ALL_ROWS,
  rejections: ALL_ROWS,
};

/**
 * Per dataset with one, the by-id copy an hour's final file gets (manifest.ts byIdPartName): its rows sorted by
 * execution id, in parts of BY_ID_ROW_GROUPS small row groups. Opening one execution, or one execution's logs,
 * costs DuckDB in proportion to the row groups and columns of the files it opens and to the rows of the row
 * group it decodes: the hour's file is laid out for the lists' scans (large row groups, sorted by service and
 * time), the copy for reads by id, where a lookup opens the one part whose id range holds the id (from the
 * footers, cached) and decodes one small row group of it. At 10M executions: a 16k-row group of the hour's file
 * took 9 ms to decode, one of a 2k-row part 4–6 ms; smaller groups in the hour's file made the lists 2.5× slower
 * (and at 1M, a row found in the hour's file through the statistics of its service and start, 17–20 ms at p50
 * against 8 in a part). An ended executions hour is split instead (writeSplitOrNone): its copy holds every
 * column and the hour's file only what scans read (SCAN_ONLY_DROPS); this copy of an executions file is for the
 * hours merged before the split (and those it failed for), made beside a file that keeps every column. Logs copy
 * those of an execution. The copy costs a sort when the hour ends; merges while the hour is written do not make
 * one (the current hour's few files are read whole).
 */
const BY_ID: Partial<Record<DatasetName, ByIdSpec & { rows: string }>> = {
  executions: {
    rows: 'SELECT count(*)::DOUBLE AS n FROM read_parquet($file, hive_partitioning = false)',
    sql: `SELECT * FROM read_parquet($file, hive_partitioning = false)
      ORDER BY execution_id, received_at, ingest_seq`,
    rowGroup: 2048,
    filtered: true,
  },
  logs: {
    rows: 'SELECT count(execution_id)::DOUBLE AS n FROM read_parquet($file, hive_partitioning = false)',
    sql: `SELECT * FROM read_parquet($file, hive_partitioning = false)
      WHERE execution_id IS NOT NULL ORDER BY execution_id, timestamp, ingest_seq`,
    rowGroup: 4096,
    filtered: true,
  },
};
const BY_ID_ROW_GROUPS = 16;

/**
 * A by-id copy: its statement and row groups, and whether its parts get filters of their ids (storage/id-filter.ts):
 * an execution is looked up in every hour kept and its logs in the three hours around it, and with random ids each
 * of those hours has a part whose range holds the id (idsInterleave).
 */
interface ByIdSpec {
  sql: string;
  rowGroup: number;
  filtered?: boolean;
}

/**
 * The columns an hour's executions file leaves to its by-id copy: what only the detail of one execution reads
 * (query/executions.ts DETAIL_COLUMNS) and what no query of executions reads (the failures dataset has the
 * issue's own). Lists, context searches, the rollups (storage/sidecars.ts) and the failures' rebuild read the
 * rest. At 1M executions of the query benchmark's body these are about 41 of the file's 88 bytes per execution
 * (request 16, span ids 13, context 9: the typed ctx_* columns stay for the filters).
 */
const SCAN_ONLY_DROPS = [
  'span_id',
  'parent_span_id',
  'context',
  'request',
  'response',
  'exception',
  'exception_message',
  'outcome_reason',
  'outcome_evidence',
  'truncated',
  'fingerprint',
  'failure_type',
  'request_id',
];

/**
 * Executions files in 16k-row groups: chosen when the detail read these files (a quarter less than at 32k, the list
 * no slower); reads by id now go to the by-id copy, and at 8k the list's per-row-group costs grow.
 */
const EXECUTIONS_ROW_GROUP = 16_384;

/**
 * An ended executions hour's by-id copy, made from the merge's inputs (writeSplitOrNone): deduplicated when some id
 * is there twice, sorted alone when none is. Resent executions are few, and the window that keeps an id's first copy
 * cost 2–6 µs per row beside the sort's 4–5 (one DuckDB thread, an ingest benchmark hour of 737k executions); the
 * count of distinct ids that tells them apart, 0.5.
 */
const SPLIT_BY_ID: ByIdSpec = {
  sql: `${ALL_ROWS} ${FIRST_COPY} ORDER BY execution_id, received_at, ingest_seq`,
  rowGroup: BY_ID.executions!.rowGroup,
  filtered: true,
};
const SPLIT_BY_ID_UNIQUE = { ...SPLIT_BY_ID, sql: `${ALL_ROWS} ORDER BY execution_id` };
const DUPLICATE_IDS = `SELECT (count(*) - count(DISTINCT execution_id))::DOUBLE AS n
  FROM read_parquet($files, union_by_name = true, hive_partitioning = false)`;
const SCAN_ONLY_COLUMNS = `COLUMNS(lambda c: NOT list_contains([${SCAN_ONLY_DROPS.map((c) => `'${c}'`).join(', ')}], c))`;

/**
 * The hour's final failures file, rebuilt against its executions (bound as `$sources`) rather than merged alone:
 * the failures rows of the copies the executions' merge keeps (FIRST_COPY), matched by (execution_id,
 * received_at, ingest_seq), so an issue's counts agree with the executions list exactly, resent executions
 * included (a resent execution whose first copy succeeded is no failure). Only executions named by the failures
 * files being replaced (`$files`) are read: a commit that lands while this runs wrote its executions file before
 * its failures file (the journal renames them in that order), so its failures file is either among `$files` with
 * its executions among the sources, or stays visible beside the result. Sorted by issue, so one issue's rows are a
 * few row groups that the rest can be skipped for (min/max statistics).
 */
const FAILURES_FROM_EXECUTIONS = `WITH f AS (
    SELECT * FROM read_parquet($files, union_by_name = true, hive_partitioning = false)
  ),
  kept AS (
    SELECT execution_id, received_at, ingest_seq
    FROM read_parquet($sources, union_by_name = true, hive_partitioning = false)
    WHERE execution_id IN (SELECT execution_id FROM f)
    ${FIRST_COPY}
  )
  SELECT f.* FROM f JOIN kept USING (execution_id, received_at, ingest_seq)
  ORDER BY issue_id, started_at`;

/** The executions partition directory beside a failures one (same workspace, mode and hour). */
const executionsDirOf = (failuresDir: string) => {
  const parts = failuresDir.split(path.sep);
  parts[parts.length - 5] = 'executions';
  return parts.join(path.sep);
};

/** The visible files of a partition directory, as readers see them (the manifest before the listing). */
async function visiblePaths(dir: string): Promise<string[]> {
  const manifest = await readManifest(dir);
  const names = await fs.readdir(dir).catch(() => [] as string[]);
  return visibleFiles(names, manifest).map((n) => path.join(dir, n));
}

/** The merge statement of a partition and the files it reads besides `$files`. */
async function mergeStatement(
  dir: string,
  dataset: DatasetName,
  hourEnded: boolean,
): Promise<{ sql: string; params: Record<string, string[]> }> {
  if (!hourEnded) return { sql: RUNNING[dataset], params: {} };
  if (dataset !== 'failures') return { sql: FINAL[dataset], params: {} };
  const sources = await visiblePaths(executionsDirOf(dir));
  // No executions to rebuild from (only a damaged store): keep the failures' own rows, deduplicated.
  if (sources.length === 0)
    return { sql: `${ALL_ROWS} ${FIRST_COPY} ORDER BY issue_id, started_at`, params: {} };
  return { sql: FAILURES_FROM_EXECUTIONS, params: { sources } };
}

/** The compactor's DuckDB memory limit, and the lower one it merges an hour still written at (MB). */
export interface CompactionMemory {
  full: number;
  running: number;
}

export interface CompactionOptions {
  /** While an hour is still written, its small files are merged once there are this many. */
  minFiles: number;
  /** Replaced files are deleted this long after the swap. */
  graceMs: number;
  /** Codec of the merged files (default zstd). */
  codec?: CompactionCodec;
  /** The sidecars merged executions files get (default: all of storage/sidecars.ts). */
  sidecars?: readonly SidecarField[];
  /**
   * The engine's memory limit (it is opened with `full`) and the running hour's (runningShare, atRunningMemory):
   * absent, every merge runs at the engine's own limit and takes all the small files there are.
   */
  memory?: CompactionMemory;
  now?: number;
  /**
   * Asked before each partition: whether this compactor still holds its lease (and renews it). False ends the
   * pass there: another process took over (this one stalled past its lease), and two compactors must never
   * replace one partition's manifest at once.
   */
  stillHolds?: () => Promise<boolean>;
  /** Told of each running-hour statement run again at the full memory limit (atRunningMemory), as it happens. */
  onMemoryFallback?: () => void;
}

/**
 * The options the service's compactor passes with (pipeline/pipeline.ts), from its configuration: also what the
 * benchmarks time its passes with (bench/support/hour-end.ts), so the two cannot drift apart.
 */
export function compactionOptions(
  config: Pick<
    Config,
    | 'COMPACTION_MIN_FILES'
    | 'COMPACTION_GRACE_MS'
    | 'COMPACTION_COMPRESSION'
    | 'COMPACTION_MEMORY_MB'
    | 'COMPACTION_RUNNING_MEMORY_MB'
    | 'METRICS_ROLLUPS'
  >,
): CompactionOptions & { memory: CompactionMemory; codec: CompactionCodec } {
  return {
    minFiles: config.COMPACTION_MIN_FILES,
    graceMs: config.COMPACTION_GRACE_MS,
    codec: config.COMPACTION_COMPRESSION,
    memory: {
      full: config.COMPACTION_MEMORY_MB,
      running: Math.min(config.COMPACTION_RUNNING_MEMORY_MB, config.COMPACTION_MEMORY_MB),
    },
    sidecars: config.METRICS_ROLLUPS ? ['rollups', 'minutes'] : ['rollups'],
  };
}

/** zstd makes the smallest files; lz4 decodes faster for about 1.75× the bytes. */
export type CompactionCodec = 'zstd' | 'lz4' | 'snappy';

export interface CompactionStats {
  partitions: number;
  filesIn: number;
  deleted: number;
  /** The pass ended early: the lease was no longer this compactor's. */
  leaseLost?: boolean;
  /** Statements of the running hour run again at the full memory limit (atRunningMemory). */
  memoryFallbacks?: number;
}

const quoteLiteral = (s: string) => `'${s.replace(/'/g, "''")}'`;

/**
 * Uncompressed bytes of small files that one executions merge of a running hour takes, per MB of its memory limit
 * (the other datasets' running merges concatenate, without a sort to hold). The sort holds its rows in memory and
 * spills past the limit, which costs CPU. Sizes come from the footers, after any dictionary encoding: the flush
 * files have none by default (PARQUET_DICTIONARY), or a share would hold more rows than it says. Measured on one
 * DuckDB thread over the flush files of plain executions (about 390 B per row), sorted into one file: at 256 MB,
 * 676 MB of files (1.76M rows) took 5.4 µs per row with a peak RSS of 379 MiB, while 1.1 GB (2.75M rows) spilled,
 * 7.2 to 9.9 µs per row (at 512 MB: 4.9 µs, 630 MiB).
 */
export const RUNNING_BYTES_PER_MB = 2 * 1024 * 1024;

/**
 * The small files one executions merge of a running hour takes: by name (each writer's in the order it committed
 * them), until their uncompressed size (from the footers) would pass what `limitMb` sorts without spilling; two at
 * least, whatever their size.
 */
async function runningShare(
  engine: QueryEngine,
  dir: string,
  small: string[],
  limitMb: number,
): Promise<string[]> {
  const names = [...small].sort();
  const rows = await engine.all(
    'SELECT file_name, sum(total_uncompressed_size)::DOUBLE AS bytes FROM parquet_metadata($files) GROUP BY file_name',
    { files: names.map((n) => path.join(dir, n)) },
  );
  const bytes = new Map(rows.map((r) => [path.basename(r.file_name as string), Number(r.bytes)]));
  const cap = limitMb * RUNNING_BYTES_PER_MB;
  const share: string[] = [];
  let total = 0;
  for (const name of names) {
    total += bytes.get(name) ?? 0;
    if (share.length >= 2 && total > cap) break;
    share.push(name);
  }
  return share;
}

/**
 * Runs `work` (a running hour's merge, a sidecar of its file) at the running hour's memory limit, and once more at
 * the full one when it runs out of memory there (a statement that fails that way has written nothing named yet);
 * the engine is at its full limit again afterwards. Measured over 90 s of plain executions at 50k/s offered, the
 * running hour's merges and their sidecars at the full 512 MB raised the service's peak RSS by about 0.5 GiB.
 */
async function atRunningMemory<T>(
  engine: QueryEngine,
  memory: CompactionMemory | undefined,
  work: () => Promise<T>,
  onFallback: () => void,
): Promise<T> {
  if (!memory) return work();
  await engine.setMemoryLimit(memory.running);
  try {
    return await work();
  } catch (err) {
    if (!isOutOfMemory(err) || memory.running >= memory.full) throw err;
    onFallback();
    await engine.setMemoryLimit(memory.full);
    return await work();
  } finally {
    // A failure here (a closed engine) must not hide the statement's own; each pass sets the full limit first.
    await engine.setMemoryLimit(memory.full).catch(() => undefined);
  }
}

/**
 * Compacts one partition directory when it needs it; deletes replaced files past their grace period. `left`: the
 * small files a running hour's merge did not take (runCompaction merges the partition again while enough of
 * those it found are left).
 */
export async function compactPartition(
  engine: QueryEngine,
  dir: string,
  dataset: DatasetName,
  hourStart: number,
  opts: CompactionOptions,
): Promise<{ compacted: number; deleted: number; left: number; memoryFallbacks: number }> {
  const now = opts.now ?? Date.now();
  const manifest = (await readManifest(dir)) ?? emptyManifest();
  const names = await fs.readdir(dir);
  const visible = visibleFiles(names, manifest);
  const small = visible.filter((n) => !n.startsWith(COMPACTED_PREFIX));
  // While the hour is written, only the small files are merged (the big ones are not rewritten over and over);
  // once it has ended, everything is merged into one file, which is when executions are deduplicated. A lone
  // file from a running merge is merged again too: it is neither deduplicated nor (logs…) sorted.
  const hourEnded = now >= hourStart + HOUR_MS;
  // A running hour's executions merge takes what its memory limit sorts without spilling; the rest wait.
  const inputs = hourEnded
    ? visible.length > 1 || small.length > 0 || visible.some((n) => n.startsWith(RUNNING_PREFIX))
      ? visible
      : []
    : small.length < opts.minFiles
      ? []
      : opts.memory && dataset === 'executions'
        ? await runningShare(engine, dir, small, opts.memory.running)
        : small;
  const left = hourEnded ? 0 : small.length - inputs.length;
  // What the running hour's merges run (and their sidecars): at the running limit.
  let memoryFallbacks = 0;
  const limited = <T>(work: () => Promise<T>) =>
    hourEnded
      ? work()
      : atRunningMemory(engine, opts.memory, work, () => {
          memoryFallbacks++;
          opts.onMemoryFallback?.();
        });
  let compacted = 0;
  let next = manifest;
  if (inputs.length > 0) {
    const out = `${hourEnded ? COMPACTED_PREFIX : RUNNING_PREFIX}${now}-${crypto.randomBytes(4).toString('hex')}.parquet`;
    const outPath = path.join(dir, out);
    // Written under a temporary name and renamed before the manifest names it: the service's readers go by the
    // manifest anyway, but nothing that globs *.parquet ever finds a half-written file either.
    const rowGroup = dataset === 'executions' ? EXECUTIONS_ROW_GROUP : 122_880;
    const codec = opts.codec ?? 'zstd';
    const tmpPath = `${outPath}.tmp`;
    const files = wholeRowFiles(dir, manifest, inputs);
    // An executions hour that has ended is split into its by-id copy and the hour's file of scanned columns.
    let byId =
      hourEnded && dataset === 'executions'
        ? await writeSplitOrNone(engine, files, outPath, tmpPath, codec)
        : null;
    const scanOnly = byId !== null;
    try {
      if (!scanOnly) {
        const merge = await mergeStatement(dir, dataset, hourEnded);
        await limited(() =>
          engine.all(
            `COPY (${merge.sql}) TO ${quoteLiteral(tmpPath)} (${parquetCopyOptions(codec, rowGroup)})`,
            { files, ...merge.params },
          ),
        );
        const byIdSpec = hourEnded ? BY_ID[dataset] : undefined;
        byId = byIdSpec ? await writeByIdOrNone(engine, byIdSpec, tmpPath, outPath, codec) : null;
      }
      await fsyncAll([tmpPath, ...byIdFiles(outPath, byId ?? [])]);
      await fs.rename(tmpPath, outPath);
      await fsyncDir(dir);
    } catch (err) {
      // Nothing names these files yet: they go, and the next pass tries again.
      await fs.rm(tmpPath, { force: true });
      await removeById(outPath);
      throw err;
    }
    const byIdKept = Object.entries(manifest.byId ?? {}).filter(([n]) => !inputs.includes(n));
    next = {
      version: manifest.version + 1,
      live: [...manifest.live.filter((n) => !inputs.includes(n)), out],
      replaced: [...manifest.replaced, ...inputs.map((name) => ({ name, at: now }))],
      deleted: manifest.deleted,
      byId: Object.fromEntries(byId ? [...byIdKept, [out, byId]] : byIdKept),
    };
    const scanOnlyKept = (manifest.scanOnly ?? []).filter((n) => !inputs.includes(n));
    if (scanOnly) scanOnlyKept.push(out);
    if (scanOnlyKept.length > 0) next.scanOnly = scanOnlyKept;
    else delete next.scanOnly;
    for (const { field } of EXECUTION_SIDECARS) {
      const kept = Object.entries(manifest[field] ?? {}).filter(([n]) => !inputs.includes(n));
      if (kept.length > 0) next[field] = Object.fromEntries(kept);
    }
    await writeManifest(dir, next);
    await changedHours([[dir, hourStart]]);
    compacted = inputs.length;
  }
  const lone = visible.length === 1 ? visible[0]! : null;
  const byIdSpec = BY_ID[dataset];
  if (
    inputs.length === 0 &&
    hourEnded &&
    byIdSpec &&
    lone?.startsWith(COMPACTED_PREFIX) &&
    !lone.startsWith(RUNNING_PREFIX) &&
    manifest.byId?.[lone] === undefined
  ) {
    // An hour merged before by-id copies were made: its one file gets its copy now, without being rewritten.
    const file = path.join(dir, lone);
    const byId = await writeByIdOrNone(engine, byIdSpec, file, file, opts.codec ?? 'zstd');
    if (byId) {
      await fsyncAll(byIdFiles(file, byId));
      await fsyncDir(dir);
      next = { ...manifest, version: manifest.version + 1, byId: { ...manifest.byId, [lone]: byId } };
      await writeManifest(dir, next);
      await changedHours([[dir, hourStart]]);
    }
  }
  const loneParts =
    lone !== null && hourEnded && inputs.length === 0 && byIdSpec?.filtered ? next.byId?.[lone] : undefined;
  if (
    loneParts?.some((p) => p.rows > 0) &&
    loneParts.every((p) => !p.filter) &&
    filtersMayBeDue(path.join(dir, lone!), hourStart, now) &&
    (await idsInterleave(path.join(dir, lone!), loneParts, false))
  ) {
    // A copy written before its parts got filters of their ids gets them now, its parts as they are.
    const file = path.join(dir, lone!);
    const parts = await withIdFilters(engine, file, loneParts);
    if (parts) {
      await fsyncFile(idFilterPath(file));
      await fsyncDir(dir);
      next = { ...next, version: next.version + 1, byId: { ...next.byId, [lone!]: parts } };
      await writeManifest(dir, next);
    }
  }
  let sidecarError: unknown;
  if (dataset === 'executions')
    ({ manifest: next, error: sidecarError } = await addSidecars(
      engine,
      dir,
      hourStart,
      next,
      opts.codec ?? 'zstd',
      EXECUTION_SIDECARS.filter((k) => !opts.sidecars || opts.sidecars.includes(k.field)),
      limited,
    ));
  const expired = next.replaced.filter((r) => now - r.at >= opts.graceMs);
  if (expired.length > 0) {
    const names = await fs.readdir(dir);
    for (const r of expired) {
      await fs.rm(path.join(dir, r.name), { force: true });
      await fs.rm(legacyIdIndexPath(path.join(dir, r.name)), { force: true });
      for (const kind of EXECUTION_SIDECARS) await fs.rm(path.join(dir, kind.name(r.name)), { force: true });
      for (const part of byIdPartsOf(r.name, names)) await fs.rm(path.join(dir, part), { force: true });
      await fs.rm(idFilterPath(path.join(dir, r.name)), { force: true });
    }
    next = {
      ...next,
      version: next.version + 1,
      replaced: next.replaced.filter((r) => now - r.at < opts.graceMs),
      deleted: [...next.deleted, ...expired.map((r) => r.name)],
    };
    await writeManifest(dir, next);
  }
  // Reported once the replaced files are gone: a sidecar that keeps failing must not hold back their deletion.
  if (sidecarError !== undefined) throw sidecarError;
  return { compacted, deleted: expired.length, left, memoryFallbacks };
}

/**
 * Gives every live compacted executions file the sidecars it lacks (storage/sidecars.ts: the baseline and
 * per-minute rollups), running merges' files included: only the hour's few small pipeline files are then left for
 * queries to scan. Made after the merge's manifest swap, so until one is named readers scan the file itself
 * (slower, the same answers). A sidecar that fails is left out (the next pass tries again), and the first error is
 * answered beside the manifest that names the others.
 */
async function addSidecars(
  engine: QueryEngine,
  dir: string,
  hourStart: number,
  manifest: Manifest,
  codec: CompactionCodec,
  kinds: readonly SidecarKind[],
  run: <T>(work: () => Promise<T>) => Promise<T>,
): Promise<{ manifest: Manifest; error: unknown }> {
  const next: Manifest = { ...manifest };
  const outdated: string[] = [];
  let made = 0;
  let error: unknown;
  for (const kind of kinds) {
    // Missing, or made by an earlier layout (another name): made now.
    for (const name of manifest.live.filter((n) => manifest[kind.field]?.[n] !== kind.name(n))) {
      const target = path.join(dir, kind.name(name));
      try {
        await run(() => kind.write(engine, path.join(dir, name), target, codec));
        await fsyncFile(target);
        const before = manifest[kind.field]?.[name];
        if (before !== undefined) outdated.push(before);
        next[kind.field] = { ...next[kind.field], [name]: kind.name(name) };
        made++;
      } catch (err) {
        error ??= err;
        await fs.rm(target, { force: true });
      }
    }
  }
  if (made === 0) return { manifest, error };
  await fsyncDir(dir);
  next.version = manifest.version + 1;
  await writeManifest(dir, next);
  await changedHours([[dir, hourStart]]);
  // No reader of this build reads a sidecar of another layout (storage/layout.ts checks the name), so they go now.
  for (const name of outdated) await fs.rm(path.join(dir, name), { force: true });
  return { manifest: next, error };
}

/** Removes the by-id parts of `dataPath` and the directory DuckDB writes them into. */
async function removeById(dataPath: string): Promise<void> {
  await fs.rm(byIdTempDir(dataPath), { recursive: true, force: true });
  await fs.rm(idFilterPath(dataPath), { force: true });
  const names = await fs.readdir(path.dirname(dataPath)).catch(() => [] as string[]);
  for (const part of byIdPartsOf(path.basename(dataPath), names))
    await fs.rm(path.join(path.dirname(dataPath), part), { force: true });
}

/**
 * An ended hour's executions `files`, split: their rows deduplicated (FIRST_COPY) and sorted by id into the by-id
 * copy named after `outPath`, then the copy's scanned columns (SCAN_ONLY_COLUMNS) sorted by service and time into
 * `tmpPath`, the hour's file. The deduplication and the copy want the same order, so the rows are sorted twice,
 * the second time narrow, where merging whole and copying took three sorts of whole rows: at 166k executions of
 * the query benchmark, 2–3 s of one DuckDB thread against 3.2–4.1. When no id is there twice the copy holds the
 * files' rows, and the scanned columns are read from the files instead: the copy's small row groups of every column
 * are slow to scan (1.76M plain executions in two running files: 3.7–4.7 s against 8.4). Answers the copy's parts,
 * or null with nothing left behind when the split cannot be made (no rows, a failed write, an hour's file whose rows
 * are not the copy's): the caller then merges the hour whole.
 */
async function writeSplitOrNone(
  engine: QueryEngine,
  files: string[],
  outPath: string,
  tmpPath: string,
  codec: CompactionCodec,
): Promise<ByIdPart[] | null> {
  try {
    const [duplicates] = await engine.all(DUPLICATE_IDS, { files });
    const unique = Number(duplicates?.n) === 0;
    const parts = await writeById(
      engine,
      unique ? SPLIT_BY_ID_UNIQUE : SPLIT_BY_ID,
      { files },
      outPath,
      codec,
    );
    const withRows = parts.filter((p) => p.rows > 0).map((p) => path.join(path.dirname(outPath), p.name));
    if (withRows.length === 0) throw new Error('no rows to split');
    // Both bound: the statement names the one it reads.
    const from = unique
      ? 'read_parquet($files, union_by_name = true, hive_partitioning = false)'
      : 'read_parquet($parts, hive_partitioning = false)';
    await engine.all(
      `COPY (SELECT ${SCAN_ONLY_COLUMNS} FROM ${from} ORDER BY service, started_at)
       TO ${quoteLiteral(tmpPath)} (${parquetCopyOptions(codec, EXECUTIONS_ROW_GROUP)})`,
      { files, parts: withRows },
    );
    const [written] = await engine.all(
      'SELECT sum(row_group_num_rows)::DOUBLE AS n FROM (SELECT DISTINCT row_group_id, row_group_num_rows FROM parquet_metadata($file))',
      { file: tmpPath },
    );
    const copied = parts.reduce((n, p) => n + p.rows, 0);
    if (Number(written?.n ?? 0) !== copied)
      throw new Error(`hour file has ${written?.n} rows, its copy ${copied}`);
    return parts;
  } catch {
    await fs.rm(tmpPath, { force: true });
    await removeById(outPath);
    return null;
  }
}

/**
 * The by-id copy (writeById), checked to hold every row it should; or, when it cannot be made, none: the merge
 * goes on without it and readers read the merged file whole (slower, the same rows), rather than the hour
 * staying undeduplicated.
 */
async function writeByIdOrNone(
  engine: QueryEngine,
  byId: ByIdSpec & { rows: string },
  source: string,
  outPath: string,
  codec: CompactionCodec,
): Promise<ByIdPart[] | null> {
  try {
    const parts = await writeById(engine, byId, { file: source }, outPath, codec);
    const [expected] = await engine.all(byId.rows, { file: source });
    const copied = parts.reduce((n, p) => n + p.rows, 0);
    if (copied !== Number(expected?.n))
      throw new Error(`by-id copy has ${copied} rows, expected ${expected?.n}`);
    return parts;
  } catch {
    await removeById(outPath);
    return null;
  }
}

/**
 * Writes the by-id copy of `source` (the merged file, under its temporary name) as parts named after `outPath`,
 * and answers them with the ids each holds (from their footers), for the manifest. DuckDB writes the parts into
 * a directory of its own (one thread, so in order and each part a slice of the ids); they are moved beside the
 * merged file, still invisible until the manifest names it.
 */
async function writeById(
  engine: QueryEngine,
  byId: ByIdSpec,
  params: Record<string, SqlParam>,
  outPath: string,
  codec: CompactionCodec,
): Promise<ByIdPart[]> {
  const tmpDir = byIdTempDir(outPath);
  await engine.all(
    `COPY (${byId.sql}) TO ${quoteLiteral(tmpDir)} (${parquetCopyOptions(codec, byId.rowGroup)}, ROW_GROUPS_PER_FILE ${BY_ID_ROW_GROUPS})`,
    params,
  );
  // DuckDB names them data_0.parquet, data_1.parquet, … in the order written.
  const made = (
    await fs.readdir(tmpDir).catch((err: NodeJS.ErrnoException) => {
      // DuckDB made no directory for no rows; any other failure must not pass for an empty copy.
      if (err.code === 'ENOENT') return [] as string[];
      throw err;
    })
  )
    .map((name) => ({ name, k: Number.parseInt(name.replace(/^\D*/, ''), 10) }))
    .sort((a, b) => a.k - b.k);
  const parts = made.map((_, k) => path.join(path.dirname(outPath), byIdPartName(path.basename(outPath), k)));
  for (const [k, m] of made.entries()) await fs.rename(path.join(tmpDir, m.name), parts[k]!);
  await fs.rm(tmpDir, { recursive: true, force: true });
  if (parts.length === 0) return [];
  const stats = await engine.all(
    `SELECT file_name, min(stats_min_value) AS min, max(stats_max_value) AS max,
       count(*) FILTER (WHERE stats_min_value IS NULL OR stats_max_value IS NULL) AS open,
       sum(row_group_num_rows)::DOUBLE AS rows
     FROM parquet_metadata($files) WHERE path_in_schema = 'execution_id' GROUP BY file_name`,
    { files: parts },
  );
  const byFile = new Map(stats.map((r) => [r.file_name as string, r]));
  const out: ByIdPart[] = parts.map((p) => {
    // A part without a row group lists no row in parquet_metadata.
    const r = byFile.get(p);
    const bounded = r !== undefined && Number(r.open) === 0;
    return {
      name: path.basename(p),
      min: bounded ? (r.min as string) : null,
      max: bounded ? (r.max as string) : null,
      rows: r ? Number(r.rows) : 0,
    };
  });
  if (byId.filtered && (await idsInterleave(outPath, out, true)))
    return (await withIdFilters(engine, outPath, out)) ?? out;
  return out;
}

/**
 * `parts`, of the by-id copy of `dataPath`, with filters of their ids written beside them (not synced), or null when
 * they cannot be made: the copy then serves every lookup by its parts' ranges, as before filters.
 */
async function withIdFilters(
  engine: QueryEngine,
  dataPath: string,
  parts: readonly ByIdPart[],
): Promise<ByIdPart[] | null> {
  const dir = path.dirname(dataPath);
  const slices = await writeIdFilters(
    engine,
    parts.map((p) => ({ path: path.join(dir, p.name), rows: p.rows })),
    idFilterPath(dataPath),
  ).catch(async () => {
    await fs.rm(idFilterPath(dataPath), { force: true });
    return null;
  });
  return slices && parts.map((p, k) => (slices[k] ? { ...p, filter: slices[k] } : p));
}

/**
 * Whether the by-id copy of `dataPath`, its parts `parts`, wants filters of its ids: when the range of ids of the copy
 * of the nearest hour before or after that has one overlaps this copy's (idsOverlap). The nearest copy, not the
 * adjacent hour's: a workspace whose traffic comes in bursts hours apart (a job, a test environment) leaves hours
 * with no executions between them. The first hour with a copy gets none for now: the next one's copy tells, and the
 * compactor's next pass adds them (compactPartition; a `fresh` copy, just written, clears its nearest copies'
 * askedOnce entries, for a copy older than FILTERS_SETTLE_MS by then). Lookups that cached the earlier hour's parts
 * (older than FILTERS_SETTLE_MS, query/id-index.ts) read them as before until the service restarts.
 */
async function idsInterleave(dataPath: string, parts: readonly ByIdPart[], fresh: boolean): Promise<boolean> {
  const hour = partitionHourOf(dataPath);
  const held = parts.filter((p) => p.rows > 0);
  if (hour === null || idRange(held) === null) return false;
  for (const side of [-1, 1] as const) {
    let read = 0;
    for await (const beside of hoursBeside(path.dirname(dataPath), hour, side)) {
      const copies = Object.entries((await readManifest(beside.dir).catch(() => null))?.byId ?? {});
      const theirs = idRange(copies.flatMap(([, parts]) => parts));
      if (theirs !== null) {
        // For a copy just written: a copy of theirs without filters is asked again at the next pass (its own range
        // decides for it). Not for one asked again itself, or old copies would keep asking each other.
        if (fresh)
          for (const [name, parts] of copies)
            if (parts.every((p) => !p.filter)) askedOnce.delete(path.join(beside.dir, name));
        if (idsOverlap(held, theirs)) return true;
        break;
      }
      // An hour still written (no copy yet), or one without rows: the next one out, a few at most.
      if (++read === NEAREST_COPY_READS) break;
    }
  }
  return false;
}

/**
 * Whether a neighbouring copy's range of ids, `theirs`, overlaps a copy of `parts` (in id order, all bounded) enough to
 * make lookups read its parts in vain: ids that sort by time (ULIDs, the service's own, the ingest benchmark's) give each
 * hour a range of its own but for its edges (a logs hour holds logs of the hour before's last executions), which touch
 * its first or last part only; random ids (span ids) fall within its inner parts, however few the neighbour has. A copy
 * of one or two parts has no inner part: any overlap counts (its filters are small).
 */
export function idsOverlap(parts: readonly ByIdPart[], theirs: { min: string; max: string }): boolean {
  const over = (p: ByIdPart) => !(theirs.max < p.min! || p.max! < theirs.min);
  return parts.length <= 2 ? parts.some(over) : parts.slice(1, -1).some(over);
}

/** Hour partitions without a copy idsInterleave passes on each side before it gives up. */
const NEAREST_COPY_READS = 48;

/** The range of ids of a copy's parts that hold rows; null when there are none, or a part has no bounds. */
function idRange(parts: readonly ByIdPart[]): { min: string; max: string } | null {
  const held = parts.filter((p) => p.rows > 0);
  if (held.length === 0 || held.some((p) => p.min === null || p.max === null)) return null;
  return {
    min: held.reduce((m, p) => (p.min! < m ? p.min! : m), held[0]!.min!),
    max: held.reduce((m, p) => (p.max! > m ? p.max! : m), held[0]!.max!),
  };
}

/**
 * Whether a copy without filters is worth asking again (idsInterleave reads the nearest copies' manifests): while
 * its hour is recent, each pass (the next hour's copy comes at that hour's end); an older one once per process (a
 * copy of an earlier build, or the first of a workspace's hours with a copy when the next came hours later).
 */
const askedOnce = new Set<string>();
function filtersMayBeDue(dataPath: string, hourStart: number, now: number): boolean {
  if (hourStart >= now - FILTERS_SETTLE_MS) return true;
  if (askedOnce.has(dataPath)) return false;
  if (askedOnce.size > 100_000) askedOnce.clear();
  askedOnce.add(dataPath);
  return true;
}

/** The files a by-id copy wrote beside `dataPath`: its parts, and their filters when it has them. */
function byIdFiles(dataPath: string, parts: readonly ByIdPart[]): string[] {
  const dir = path.dirname(dataPath);
  const files = parts.map((p) => path.join(dir, p.name));
  return parts.some((p) => p.filter) ? [...files, idFilterPath(dataPath)] : files;
}

/** Every partition of every dataset, oldest first. */
export async function runCompaction(
  engine: QueryEngine,
  dataDir: string,
  opts: CompactionOptions,
): Promise<CompactionStats> {
  const stats: CompactionStats = { partitions: 0, filesIn: 0, deleted: 0 };
  // Whatever an earlier pass left it at (atRunningMemory restores it, but may have failed to).
  if (opts.memory) await engine.setMemoryLimit(opts.memory.full);
  let failure: unknown;
  for (const dataset of DATASET_NAMES) {
    for (const { dir: modeDir } of await modeDirs(dataDir, dataset)) {
      for (const date of await datePartitions(modeDir)) {
        for (const hour of await hourPartitions(date)) {
          // A running hour whose small files are more than one merge takes is merged again at once, up to the files
          // it had when the pass came to it: those written meanwhile wait for the next pass, so a partition that
          // keeps filling cannot hold the others back.
          for (let more = true, counted = false, budget = Number.POSITIVE_INFINITY; more; ) {
            if (opts.stillHolds && !(await opts.stillHolds())) {
              if (failure !== undefined) throw failure;
              return { ...stats, leaseLost: true };
            }
            let r: Awaited<ReturnType<typeof compactPartition>>;
            try {
              r = await compactPartition(engine, hour.dir, dataset, hour.start, opts);
            } catch (err) {
              // One partition's failure (a full disk, a bad file) does not hold back the others.
              failure ??= err;
              break;
            }
            if (r.compacted > 0 && !counted) {
              stats.partitions++;
              counted = true;
            }
            stats.filesIn += r.compacted;
            stats.deleted += r.deleted;
            if (r.memoryFallbacks > 0)
              stats.memoryFallbacks = (stats.memoryFallbacks ?? 0) + r.memoryFallbacks;
            if (budget === Number.POSITIVE_INFINITY) budget = r.compacted + r.left;
            budget -= r.compacted;
            // The files it found and has not merged (all of them among the `left` ones) make another merge.
            more = r.compacted > 0 && budget >= opts.minFiles;
          }
        }
      }
    }
  }
  // Reported once every partition has had its turn.
  if (failure !== undefined) throw failure;
  return stats;
}
