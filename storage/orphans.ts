import fs from 'node:fs/promises';
import path from 'node:path';
import { DATASET_NAMES } from './datasets.js';
import { TMP_SUFFIX } from './layout.js';

/**
 * Removes temporary Parquet files that no commit will ever rename: left by a writer that died before its
 * journal entry. Run after journal recovery (which renames every committed one). Only files older than
 * `minAgeMs` go, so a live writer's file in progress is never touched.
 */
export async function removeOrphanTempFiles(
  dataDir: string,
  minAgeMs: number,
  now = Date.now(),
): Promise<number> {
  let removed = 0;
  const walk = async (dir: string, depth: number): Promise<void> => {
    let entries: import('node:fs').Dirent[];
    try {
      entries = await fs.readdir(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const p = path.join(dir, e.name);
      if (e.isDirectory() && depth < 4) await walk(p, depth + 1);
      else if (e.isFile() && e.name.endsWith(TMP_SUFFIX)) {
        const st = await fs.stat(p).catch(() => null);
        if (st && now - st.mtimeMs >= minAgeMs) {
          await fs.rm(p, { force: true });
          removed++;
        }
      }
    }
  };
  for (const dataset of DATASET_NAMES) await walk(path.join(dataDir, dataset), 0);
  return removed;
}
