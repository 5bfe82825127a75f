import fs from 'node:fs/promises';
import path from 'node:path';
import type { DatasetName } from './datasets.js';
import { readManifest, visibleFiles } from './manifest.js';

/**
 * Where files live: DATA_DIR/<dataset>/ws=<id>/mode=<m>/date=YYYY-MM-DD/hour=HH/<writer>-<commit>.parquet.
 * Workspace ids and modes are checked against their shapes before they become path segments.
 */

const WS_SHAPE = /^ws_[A-Za-z0-9]+$/;
const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

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

/**
 * The committed files of the hour partitions that overlap [fromMs, toMs), in time order. Only existing
 * directories are listed, so a 7-day window over sparse data costs a few readdir calls.
 */
export async function listPartitionFiles(
  dataDir: string,
  dataset: DatasetName,
  workspaceId: string,
  mode: string,
  fromMs: number,
  toMs: number,
): Promise<string[]> {
  const base = modeDir(dataDir, dataset, workspaceId, mode);
  const firstDay = Math.floor(fromMs / DAY_MS) * DAY_MS;
  const firstHour = Math.floor(fromMs / HOUR_MS) * HOUR_MS;
  const dates = (await readdirOrEmpty(base))
    .filter((d) => d.startsWith('date='))
    .map((d) => ({ name: d, day: Date.parse(`${d.slice(5)}T00:00:00Z`) }))
    .filter((d) => Number.isFinite(d.day) && d.day >= firstDay && d.day < toMs)
    .sort((a, b) => a.day - b.day);
  const perDay = await Promise.all(
    dates.map(async (d) => {
      const hours = (await readdirOrEmpty(path.join(base, d.name)))
        .filter((h) => h.startsWith('hour='))
        .map((h) => ({ name: h, start: d.day + Number.parseInt(h.slice(5), 10) * HOUR_MS }))
        .filter((h) => h.start >= firstHour && h.start < toMs)
        .sort((a, b) => a.start - b.start);
      const perHour = await Promise.all(
        hours.map(async (h) => {
          const dir = path.join(base, d.name, h.name);
          const [names, manifest] = await Promise.all([readdirOrEmpty(dir), readManifest(dir)]);
          return visibleFiles(names, manifest)
            .sort()
            .map((f) => path.join(dir, f));
        }),
      );
      return perHour.flat();
    }),
  );
  return perDay.flat();
}
