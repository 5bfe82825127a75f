import fs from 'node:fs/promises';
import { DAY_MS } from '../schemas/time.js';
import { DATASET_NAMES, type DatasetName } from './datasets.js';
import { bumpGeneration } from './generation.js';
import { datePartitions, modeDirs } from './layout.js';

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
    for (const { workspaceId, dir } of await modeDirs(dataDir, dataset)) {
      const days =
        dataset === ('rejections' satisfies DatasetName)
          ? REJECTIONS_RETENTION_DAYS
          : retentionDaysOf(workspaceId);
      const cutoff = now - days * DAY_MS;
      for (const date of await datePartitions(dir)) {
        if (date.day + DAY_MS <= cutoff) {
          await fs.rm(date.dir, { recursive: true, force: true });
          // Cached listings of the mode directory name the removed files.
          await bumpGeneration(dir);
          removedPartitions++;
        }
      }
    }
  }
  return { removedPartitions };
}
