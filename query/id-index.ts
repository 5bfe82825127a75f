import fs from 'node:fs/promises';
import path from 'node:path';
import { FILTERS_SETTLE_MS, idFilterPath, idHashes, mayContain } from '../storage/id-filter.js';
import { partitionHourOf } from '../storage/layout.js';
import { type ByIdPart, COMPACTED_PREFIX, readManifest } from '../storage/manifest.js';

/**
 * Reads by execution id go through the by-id copies of compacted files (storage/compaction.ts): each file's rows
 * sorted by execution id, in parts holding disjoint slices of the ids. The partition's manifest lists each
 * part with its range of ids (and, when its copy has them, where the filter of its ids is: storage/id-filter.ts), so a
 * lookup opens only the part that may hold the id, where the statistics of its small row groups single out one of
 * them. Random ids (span ids) fall in a part's range in every hour: there the filters leave out the hours without it.
 */

type Part = ByIdPart & { path: string; filterPath: string };

// Files are immutable once visible, and a file's parts become visible with it: each file is looked up once. But
// the compactor may still give a file of the last few hours a copy, or its copy filters (once the nearest hour's
// copy shows its ids interleave: storage/compaction.ts): such an entry is looked up again after a minute.
const partsByFile = new Map<string, { parts: Part[] | null; at: number }>();
const MAX_CACHED = 100_000;
const RECHECK_MS = 60_000;

function settled(file: string, e: { parts: Part[] | null; at: number }, now: number): boolean {
  if (now - e.at < RECHECK_MS || e.parts?.some((p) => p.filter !== undefined)) return true;
  const hour = partitionHourOf(file);
  return hour === null || hour < now - FILTERS_SETTLE_MS;
}

/** Each compacted file's by-id parts, or null when it has none (merged while its hour was written, or before). */
async function partsOf(compacted: string[]): Promise<(Part[] | null)[]> {
  const now = Date.now();
  // Answered from these entries, not from the cache after the reads below (another lookup may clear it meanwhile).
  const known = new Map<string, Part[] | null>();
  const unknown: string[] = [];
  for (const p of compacted) {
    const e = partsByFile.get(p);
    if (e !== undefined && settled(p, e, now)) known.set(p, e.parts);
    else unknown.push(p);
  }
  if (unknown.length > 0) {
    const dirs = [...new Set(unknown.map((p) => path.dirname(p)))];
    const manifests = new Map(await Promise.all(dirs.map(async (d) => [d, await readManifest(d)] as const)));
    if (partsByFile.size > MAX_CACHED) partsByFile.clear();
    for (const p of unknown) {
      const dir = path.dirname(p);
      const listed = manifests.get(dir)?.byId?.[path.basename(p)];
      const parts = listed
        ? listed.map((part) => ({ ...part, path: path.join(dir, part.name), filterPath: idFilterPath(p) }))
        : null;
      known.set(p, parts);
      partsByFile.set(p, { parts, at: now });
    }
  }
  return compacted.map((p) => known.get(p) ?? null);
}

const inRange = (part: ByIdPart, id: string) =>
  part.rows > 0 && (part.min === null || part.min <= id) && (part.max === null || id <= part.max);

/**
 * Parts' filters, read once and kept up to a budget (about 80 KiB a part of 32k executions; a lookup reads one per
 * hour kept, the part whose range holds the id). Dropped least recently used first.
 */
const filters = new Map<string, Uint8Array>();
let filterBytes = 0;
const FILTER_BUDGET = 64 * 1024 * 1024;

async function filterOf(part: Part): Promise<Uint8Array> {
  const cached = filters.get(part.path);
  if (cached) {
    // Used now: the last to go.
    filters.delete(part.path);
    filters.set(part.path, cached);
    return cached;
  }
  const { at, bytes } = part.filter!;
  const out = new Uint8Array(bytes);
  const handle = await fs.open(part.filterPath, 'r');
  try {
    const { bytesRead } = await handle.read(out, 0, bytes, at);
    if (bytesRead !== bytes) throw new Error(`${part.filterPath}: ${bytesRead} of ${bytes} bytes at ${at}`);
  } finally {
    await handle.close();
  }
  // Another lookup may have read it meanwhile.
  const raced = filters.get(part.path);
  if (raced) return raced;
  for (const [k, f] of filters) {
    if (filterBytes + bytes <= FILTER_BUDGET) break;
    filters.delete(k);
    filterBytes -= f.length;
  }
  filters.set(part.path, out);
  filterBytes += bytes;
  return out;
}

/** Whether the filter of `part` (in range of the id) may hold it; a part without one, or whose filter cannot be read, may. */
async function filterHolds(part: Part, hashes: [number, number]): Promise<boolean> {
  if (!part.filter) return true;
  const filter = await filterOf(part).catch(() => null);
  return filter === null || mayContain(filter, part.filter, hashes);
}

/**
 * What to read for the rows of execution `id` among the visible files `paths`: for a compacted file with a by-id
 * copy, the parts whose range holds the id (none, mostly) and whose filter does too; a compacted file without one
 * (merged while its hour was written, or before copies were made) and every file not compacted yet, whole. Ids are
 * ASCII (schemas/ingest-items.ts), so JavaScript's string order is DuckDB's. The answer may be empty: then no file
 * has the id. The filters are asked only when the ranges leave more than one part: one part is read as fast as its
 * filter (ids that sort by time, as ULIDs, leave one; random ids one an hour).
 */
export async function filesForId(paths: string[], id: string): Promise<string[]> {
  const compacted = paths.filter((p) => path.basename(p).startsWith(COMPACTED_PREFIX));
  const whole: string[] = [];
  const candidates: Part[] = [];
  (await partsOf(compacted)).forEach((parts, i) => {
    if (!parts) whole.push(compacted[i]!);
    else for (const part of parts) if (inRange(part, id)) candidates.push(part);
  });
  let held = candidates;
  if (candidates.length > 1) {
    const hashes = idHashes(id);
    const holds = await Promise.all(candidates.map((part) => filterHolds(part, hashes)));
    held = candidates.filter((_, k) => holds[k]);
  }
  return [
    ...whole,
    ...held.map((p) => p.path),
    ...paths.filter((p) => !path.basename(p).startsWith(COMPACTED_PREFIX)),
  ];
}
