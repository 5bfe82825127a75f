import fs from 'node:fs/promises';
import path from 'node:path';
import { DAY_MS } from '../schemas/time.js';
import { DATASET_NAMES, type DatasetName } from './datasets.js';
import { bumpGeneration } from './generation.js';

/** Rejections are kept a fixed 7 days (CONTRACT §5), whatever the workspace's retention. */
export const REJECTIONS_RETENTION_DAYS = 7;

export interface RetentionResult {
  removedPartitions: number;
}

/**
 * Deletes whole date partitions older than each workspace's retention, so the disk space really returns (no
 * tombstones, no rewrite). A date is removed when its whole day ended more than `days` days ago.
 */
export async function applyRetention(
  dataDir: string,
  retentionDaysOf: (workspaceId: string) => number,
  now = Date.now(),
): Promise<RetentionResult> {
  let removedPartitions = 0;
  for (const dataset of DATASET_NAMES) {
    const base = path.join(dataDir, dataset);
    for (const wsDir of await fs.readdir(base).catch(() => [] as string[])) {
      if (!wsDir.startsWith('ws=')) continue;
      const days =
        dataset === ('rejections' satisfies DatasetName)
          ? REJECTIONS_RETENTION_DAYS
          : retentionDaysOf(wsDir.slice(3));
      const cutoff = now - days * DAY_MS;
      for (const modeDir of await fs.readdir(path.join(base, wsDir)).catch(() => [] as string[])) {
        const dir = path.join(base, wsDir, modeDir);
        for (const dateDir of await fs.readdir(dir).catch(() => [] as string[])) {
          const dayStart = Date.parse(`${dateDir.slice(5)}T00:00:00Z`);
          if (!dateDir.startsWith('date=') || !Number.isFinite(dayStart)) continue;
          if (dayStart + DAY_MS <= cutoff) {
            await fs.rm(path.join(dir, dateDir), { recursive: true, force: true });
            // Cached listings of the mode directory name the removed files.
            await bumpGeneration(dir);
            removedPartitions++;
          }
        }
      }
    }
  }
  return { removedPartitions };
}
