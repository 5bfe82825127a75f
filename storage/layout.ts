import fs from 'node:fs/promises';
import path from 'node:path';
import { DAY_MS, HOUR_MS } from '../schemas/time.js';
import type { DatasetName } from './datasets.js';
import { READER_FRESH_MS, readGeneration } from './generation.js';
import { readManifest, visibleFiles } from './manifest.js';
import { EXECUTION_SIDECARS, type SidecarField } from './sidecars.js';

/**
 * Where files live: DATA_DIR/<dataset>/ws=<id>/mode=<m>/date=YYYY-MM-DD/hour=HH/<writer>-<commit>.parquet.
 * Workspace ids and modes are checked against their shapes before they become path segments.
 */

const WS_SHAPE = /^ws_[A-Za-z0-9]+$/;

export const PARQUET_SUFFIX = '.parquet';
export const TMP_SUFFIX = '.parquet.tmp';

function modeDir(dataDir: string, dataset: DatasetName, workspaceId: string, mode: string): string {
  if (!WS_SHAPE.test(workspaceId)) throw new Error(`bad workspace id for a path: ${workspaceId}`);
  if (mode !== 'test' && mode !== 'live') throw new Error(`bad mode for a path: ${mode}`);
  return path.join(dataDir, dataset, `ws=${workspaceId}`, `mode=${mode}`);
}

const dateOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const hourOf = (ms: number) => new Date(ms).toISOString().slice(11, 13);

export function partitionDir(
  dataDir: string,
  dataset: DatasetName,
  workspaceId: string,
  mode: string,
  hour: number,
): string {
  return path.join(
    modeDir(dataDir, dataset, workspaceId, mode),
    `date=${dateOf(hour)}`,
    `hour=${hourOf(hour)}`,
  );
}

/**
 * The hour partitions on one side of `hour` (`side` -1: earlier, 1: later) beside the partition directory `hourDir`
 * (the same dataset, workspace and mode), nearest first: a date's directory is listed only once the nearer ones
 * are passed.
 */
export async function* hoursBeside(
  hourDir: string,
  hour: number,
  side: -1 | 1,
): AsyncGenerator<{ start: number; dir: string }> {
  const day = Math.floor(hour / DAY_MS) * DAY_MS;
  const dates = (await datePartitions(path.dirname(path.dirname(hourDir)))).filter((d) =>
    side < 0 ? d.day <= day : d.day >= day,
  );
  if (side < 0) dates.reverse();
  for (const date of dates) {
    const hours = (await hourPartitions(date)).filter((h) => (side < 0 ? h.start < hour : h.start > hour));
    if (side < 0) hours.reverse();
    yield* hours;
  }
}

const PARTITION_HOUR = /\/date=(\d{4}-\d{2}-\d{2})\/hour=(\d{2})\/[^/]*$/;

/** The start of the hour partition a file (or a sidecar of one) is in, in epoch ms; null when not in one. */
export function partitionHourOf(filePath: string): number | null {
  const m = PARTITION_HOUR.exec(filePath.split(path.sep).join('/'));
  if (!m) return null;
  const ms = Date.parse(`${m[1]}T${m[2]}:00:00Z`);
  return Number.isFinite(ms) ? ms : null;
}

async function readdirOrEmpty(dir: string): Promise<string[]> {
  try {
    return await fs.readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}

/** The mode directories of a dataset: one per workspace and mode (DATA_DIR/<dataset>/ws=<id>/mode=<m>). */
export async function modeDirs(
  dataDir: string,
  dataset: DatasetName,
): Promise<{ workspaceId: string; mode: string; dir: string }[]> {
  const base = path.join(dataDir, dataset);
  const out: { workspaceId: string; mode: string; dir: string }[] = [];
  for (const ws of (await readdirOrEmpty(base)).filter((n) => n.startsWith('ws='))) {
    for (const mode of (await readdirOrEmpty(path.join(base, ws))).filter((n) => n.startsWith('mode='))) {
      out.push({ workspaceId: ws.slice(3), mode: mode.slice(5), dir: path.join(base, ws, mode) });
    }
  }
  return out;
}

/** The date partitions of a mode directory, oldest first, with the start of their day. */
export async function datePartitions(modeDir: string): Promise<{ name: string; day: number; dir: string }[]> {
  return (await readdirOrEmpty(modeDir))
    .filter((d) => d.startsWith('date='))
    .map((d) => ({ name: d, day: Date.parse(`${d.slice(5)}T00:00:00Z`), dir: path.join(modeDir, d) }))
    .filter((d) => Number.isFinite(d.day))
    .sort((a, b) => a.day - b.day);
}

/** The hour partitions of a date partition, in time order, with the start of their hour. */
export async function hourPartitions(date: {
  day: number;
  dir: string;
}): Promise<{ name: string; start: number; dir: string }[]> {
  return (await readdirOrEmpty(date.dir))
    .filter((h) => h.startsWith('hour='))
    .map((h) => ({
      name: h,
      start: date.day + Number.parseInt(h.slice(5), 10) * HOUR_MS,
      dir: path.join(date.dir, h),
    }))
    .filter((h) => Number.isFinite(h.start))
    .sort((a, b) => a.start - b.start);
}

/** An hour partition's committed files, and the sidecars (storage/sidecars.ts) some of them have. */
interface HourFiles {
  start: number;
  files: string[];
  /** Per sidecar field, data file path → its sidecar's path. */
  sidecars: Record<SidecarField, Map<string, string>>;
}

/** The committed files of each hour partition of a mode directory that starts in [fromMs, toMs), in time order. */
async function listHours(base: string, fromMs: number, toMs: number): Promise<HourFiles[]> {
  const firstDay = Math.floor(fromMs / DAY_MS) * DAY_MS;
  const dates = (await datePartitions(base)).filter((d) => d.day >= firstDay && d.day < toMs);
  const perDay = await Promise.all(
    dates.map(async (d) => {
      const hours = (await hourPartitions(d)).filter((h) => h.start >= fromMs && h.start < toMs);
      return Promise.all(
        hours.map(async (h) => {
          const dir = h.dir;
          // The manifest before the listing: a merge renames its file in before its manifest names it, so a
          // listing taken after the manifest has every file that manifest makes visible.
          const manifest = await readManifest(dir);
          const names = await readdirOrEmpty(dir);
          const visible = visibleFiles(names, manifest).sort();
          const sidecars = { rollups: new Map<string, string>(), minutes: new Map<string, string>() };
          for (const kind of EXECUTION_SIDECARS) {
            for (const f of visible) {
              // A sidecar of an earlier layout (another name) is as none: its file is read itself.
              if (manifest?.[kind.field]?.[f] === kind.name(f))
                sidecars[kind.field].set(path.join(dir, f), path.join(dir, kind.name(f)));
            }
          }
          return { start: h.start, files: visible.map((f) => path.join(dir, f)), sidecars };
        }),
      );
    }),
  );
  return perDay.flat();
}

/** A mode directory's hours older than the fresh ones, as listed under a generation (generation.ts). */
interface OlderHours {
  generation: string;
  listedAt: number;
  /** The hours that start before this. */
  until: number;
  hours: HourFiles[];
}
const olderHours = new Map<string, OlderHours>();
/**
 * Even with an unchanged generation a listing is kept this long only: a writer that died between a change and
 * its new generation (or a generation file lost in a crash of the machine) leaves readers stale this long at most.
 */
const OLDER_HOURS_TTL_MS = 10_000;
const MAX_CACHED_MODE_DIRS = 10_000;

async function olderHoursOf(base: string, until: number, now: number): Promise<OlderHours['hours']> {
  // Read before listing: a change that lands during the listing makes a new generation after it.
  const generation = await readGeneration(base);
  const cached = olderHours.get(base);
  if (
    cached &&
    cached.generation === generation &&
    now - cached.listedAt < OLDER_HOURS_TTL_MS &&
    cached.until >= until
  )
    return cached.hours;
  const hours = await listHours(base, 0, until);
  if (olderHours.size >= MAX_CACHED_MODE_DIRS) olderHours.clear();
  olderHours.set(base, { generation, listedAt: now, until, hours });
  return hours;
}

/**
 * The hour partitions that overlap [fromMs, toMs), in time order. Only existing directories are listed. The hours
 * that started more than READER_FRESH_MS ago are listed once per generation of the mode directory (generation.ts):
 * a detail looks through every hour there is, and the lists' default window is 7 days.
 */
async function listPartitionHours(
  dataDir: string,
  dataset: DatasetName,
  workspaceId: string,
  mode: string,
  fromMs: number,
  toMs: number,
): Promise<HourFiles[]> {
  const base = modeDir(dataDir, dataset, workspaceId, mode);
  const now = Date.now();
  const freshFrom = Math.floor((now - READER_FRESH_MS) / HOUR_MS) * HOUR_MS;
  const firstHour = Math.floor(fromMs / HOUR_MS) * HOUR_MS;
  const [older, fresh] = await Promise.all([
    firstHour < freshFrom ? olderHoursOf(base, freshFrom, now) : [],
    toMs > freshFrom ? listHours(base, Math.max(firstHour, freshFrom), toMs) : [],
  ]);
  return [...older.filter((h) => h.start >= firstHour && h.start < Math.min(toMs, freshFrom)), ...fresh];
}

/** The committed files of the hour partitions that overlap [fromMs, toMs), in time order. */
export async function listPartitionFiles(
  dataDir: string,
  dataset: DatasetName,
  workspaceId: string,
  mode: string,
  fromMs: number,
  toMs: number,
): Promise<string[]> {
  const hours = await listPartitionHours(dataDir, dataset, workspaceId, mode, fromMs, toMs);
  return hours.flatMap((h) => h.files);
}

/**
 * The committed executions files of the hour partitions that overlap [fromMs, toMs), split into those with a
 * sidecar of `field` (with it) and those without, to be read themselves.
 */
export async function listSidecarsAndFiles(
  field: SidecarField,
  dataDir: string,
  workspaceId: string,
  mode: string,
  fromMs: number,
  toMs: number,
): Promise<{ sidecars: string[]; covered: string[]; files: string[] }> {
  const hours = await listPartitionHours(dataDir, 'executions', workspaceId, mode, fromMs, toMs);
  const out = { sidecars: [] as string[], covered: [] as string[], files: [] as string[] };
  for (const h of hours) {
    for (const f of h.files) {
      const sidecar = h.sidecars[field].get(f);
      if (sidecar === undefined) out.files.push(f);
      else {
        out.sidecars.push(sidecar);
        out.covered.push(f);
      }
    }
  }
  return out;
}
