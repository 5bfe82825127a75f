import path from 'node:path';
import { type ByIdPart, COMPACTED_PREFIX, readManifest } from '../storage/manifest.js';

/**
 * Reads by execution id go through the by-id copies of compacted files (storage/compaction.ts): each file's rows
 * sorted by execution id, in parts holding disjoint slices of the ids. The partition's manifest lists each
 * part with its range of ids, so a lookup opens only the part that may hold the id, where the statistics of its
 * small row groups single out one of them.
 */

// Files are immutable once visible, and a file's parts become visible with it: each file is looked up once.
const partsByFile = new Map<string, (ByIdPart & { path: string })[] | null>();
const MAX_CACHED = 100_000;

/** Each compacted file's by-id parts, or null when it has none (merged while its hour was written, or before). */
async function partsOf(compacted: string[]): Promise<((ByIdPart & { path: string })[] | null)[]> {
  const unknown = compacted.filter((p) => !partsByFile.has(p));
  if (unknown.length > 0) {
    const dirs = [...new Set(unknown.map((p) => path.dirname(p)))];
    const manifests = new Map(await Promise.all(dirs.map(async (d) => [d, await readManifest(d)] as const)));
    if (partsByFile.size > MAX_CACHED) partsByFile.clear();
    for (const p of unknown) {
      const dir = path.dirname(p);
      const parts = manifests.get(dir)?.byId?.[path.basename(p)];
      partsByFile.set(p, parts ? parts.map((part) => ({ ...part, path: path.join(dir, part.name) })) : null);
    }
  }
  return compacted.map((p) => partsByFile.get(p) ?? null);
}

const mayHold = (part: ByIdPart, id: string) =>
  part.rows > 0 && (part.min === null || part.min <= id) && (part.max === null || id <= part.max);

/**
 * What to read for the rows of execution `id` among the visible files `paths`: for a compacted file with a by-id
 * copy, the parts whose range holds the id (none, mostly); a compacted file without one (merged while its hour
 * was written, or before copies were made) and every file not compacted yet, whole. Ids are ASCII
 * (schemas/ingest-items.ts), so JavaScript's string order is DuckDB's. The answer may be empty: then no file
 * has the id.
 */
export async function filesForId(paths: string[], id: string): Promise<string[]> {
  const compacted = paths.filter((p) => path.basename(p).startsWith(COMPACTED_PREFIX));
  const out: string[] = [];
  (await partsOf(compacted)).forEach((parts, i) => {
    if (!parts) out.push(compacted[i]!);
    else for (const part of parts) if (mayHold(part, id)) out.push(part.path);
  });
  return [...out, ...paths.filter((p) => !path.basename(p).startsWith(COMPACTED_PREFIX))];
}
