import fs from 'node:fs/promises';
import path from 'node:path';
import { DATASET_NAMES } from './datasets.js';
import { TMP_SUFFIX } from './layout.js';

const ID_INDEX_SUFFIX = '.parquet.ids';

/**
 * Removes temporary Parquet files that no commit will ever rename: left by a writer that died before its
 * journal entry, or by a compaction that died before its manifest swap (with its id index). Run after journal recovery (which renames every committed one). Only files older than
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
      else if (e.isFile() && (e.name.endsWith(TMP_SUFFIX) || e.name.endsWith(ID_INDEX_SUFFIX))) {
        // An id index is an orphan only when its data file never made it (a compaction that died).
        if (e.name.endsWith(ID_INDEX_SUFFIX)) {
          const data = p.slice(0, -'.ids'.length);
          if (
            await fs.access(data).then(
              () => true,
              () => false,
            )
          )
            continue;
        }
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
