import fs from 'node:fs/promises';
import path from 'node:path';
import { DATASET_NAMES } from './datasets.js';
import { GENERATION_TMP_SUFFIX } from './generation.js';
import { idFilterDataName } from './id-filter.js';
import { TMP_SUFFIX } from './layout.js';
import { byIdDataName, byIdTempDir } from './manifest.js';
import { sidecarDataName } from './sidecars.js';

const BY_ID_TEMP_SUFFIX = byIdTempDir('');
const LEGACY_INDEX_SUFFIX = '.parquet.ids';

/**
 * Removes temporary files that nothing will ever rename: Parquet files left by a writer that died before its
 * journal entry, or by a compaction that died before its manifest swap (with its by-id parts and sidecars, or the
 * directory DuckDB was writing them into). Run after journal recovery (which renames every committed one).
 * Only files older than `minAgeMs` go, so a live writer's file in progress is never touched.
 */
export async function removeOrphanTempFiles(
  dataDir: string,
  minAgeMs: number,
  now = Date.now(),
): Promise<number> {
  let removed = 0;
  const oldEnough = async (p: string) => {
    const st = await fs.stat(p).catch(() => null);
    return st !== null && now - st.mtimeMs >= minAgeMs;
  };
  const exists = (p: string) =>
    fs.access(p).then(
      () => true,
      () => false,
    );
  const walk = async (dir: string, depth: number): Promise<void> => {
    let entries: import('node:fs').Dirent[];
    try {
      entries = await fs.readdir(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const p = path.join(dir, e.name);
      if (e.isDirectory() && e.name.endsWith(BY_ID_TEMP_SUFFIX)) {
        if (await oldEnough(p)) {
          await fs.rm(p, { recursive: true, force: true });
          removed++;
        }
      } else if (e.isDirectory() && depth < 4) await walk(p, depth + 1);
      else if (e.isFile()) {
        // A by-id part, its filters or a sidecar (or an earlier version's id index) is an orphan only when its data
        // file never made it.
        const data =
          byIdDataName(e.name) ??
          idFilterDataName(e.name) ??
          sidecarDataName(e.name) ??
          (e.name.endsWith(LEGACY_INDEX_SUFFIX) ? e.name.slice(0, -'.ids'.length) : null);
        const orphan =
          data !== null
            ? !(await exists(path.join(dir, data)))
            : e.name.endsWith(TMP_SUFFIX) || e.name.endsWith(GENERATION_TMP_SUFFIX);
        if (orphan && (await oldEnough(p))) {
          await fs.rm(p, { force: true });
          removed++;
        }
      }
    }
  };
  for (const dataset of DATASET_NAMES) await walk(path.join(dataDir, dataset), 0);
  return removed;
}
