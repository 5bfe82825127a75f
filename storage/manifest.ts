import fs from 'node:fs/promises';
import path from 'node:path';
import { writeFileDurably } from './fsync.js';
import type { IdFilterSlice } from './id-filter.js';

/**
 * A partition's manifest: which compacted files are live, and which files they replaced. It is replaced
 * atomically (write, fsync, rename), so every reader sees either the files before a compaction or the file
 * after it, never both and never neither.
 *
 * A file is visible when the manifest lists it as live, or when it is a pipeline file (not `c-…`) that the
 * manifest does not list as replaced. A compacted file becomes visible only through the manifest, so it can be
 * written in place before the manifest names it.
 */

export const MANIFEST = '_manifest.json';
export const COMPACTED_PREFIX = 'c-';
/**
 * Files written by a merge while their hour was still written (storage/compaction.ts): compacted files like the
 * others (the prefix starts with COMPACTED_PREFIX), but not final, so the hour's end merges them again.
 */
export const RUNNING_PREFIX = `${COMPACTED_PREFIX}r-`;
/** Whether a file is the merge that ended its hour (replaced only if late rows arrive, by a file of another name). */
export const isFinalMerge = (name: string) =>
  name.startsWith(COMPACTED_PREFIX) && !name.startsWith(RUNNING_PREFIX);
const PARQUET = '.parquet';

export interface Manifest {
  version: number;
  /** Compacted files now serving the partition's rows. */
  live: string[];
  /** Files whose rows are in a live file: hidden from readers, deleted after a grace period. */
  replaced: { name: string; at: number }[];
  /** Replaced files already deleted: a late journal recovery must not take their absence for data loss. */
  deleted: string[];
  /** Per live file with a by-id copy, its parts in id order (absent in manifests written before copies). */
  byId?: Record<string, ByIdPart[]>;
  /**
   * Live executions files that keep only the columns the lists and the rollups scan (storage/compaction.ts
   * SCAN_ONLY_DROPS): every column of their rows is in their by-id parts, which a merge reads instead of them.
   */
  scanOnly?: string[];
  /** Per live executions file with a baseline rollup (storage/rollup.ts), the rollup's file name. */
  rollups?: Record<string, string>;
  /** Per live executions file with a per-minute rollup (storage/minutes.ts), its file name. */
  minutes?: Record<string, string>;
}

/** A part of a by-id copy and the execution ids it holds (null bounds: unknown, any id may be there). */
export interface ByIdPart {
  name: string;
  min: string | null;
  max: string | null;
  rows: number;
  /** Where the part's filter of ids is in the copy's filter file (storage/id-filter.ts); absent: none was made. */
  filter?: IdFilterSlice;
}

export const emptyManifest = (): Manifest => ({ version: 0, live: [], replaced: [], deleted: [] });

export async function readManifest(dir: string): Promise<Manifest | null> {
  try {
    return JSON.parse(await fs.readFile(path.join(dir, MANIFEST), 'utf8')) as Manifest;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

export async function writeManifest(dir: string, m: Manifest): Promise<void> {
  await writeFileDurably(path.join(dir, MANIFEST), JSON.stringify(m));
}

/** The visible Parquet files among `names` (a directory listing), by the rule above. */
export function visibleFiles(names: string[], m: Manifest | null): string[] {
  const parquet = names.filter((n) => n.endsWith(PARQUET));
  if (!m) return parquet.filter((n) => !n.startsWith(COMPACTED_PREFIX));
  const live = new Set(m.live);
  const replaced = new Set(m.replaced.map((r) => r.name));
  return parquet.filter((n) => (n.startsWith(COMPACTED_PREFIX) ? live.has(n) : !replaced.has(n)));
}

/**
 * The by-id copy of a compacted file: its rows sorted by execution id, in parts `<file>.ids-0000`, … each
 * holding a disjoint, ascending slice of the ids (storage/compaction.ts). Not `.parquet`-suffixed, so no listing
 * takes them for data; they live and die with their file.
 */
const BY_ID_PART = '.ids-';
export const byIdPartName = (dataName: string, k: number) =>
  `${dataName}${BY_ID_PART}${String(k).padStart(4, '0')}`;
/** The part names of `dataName` among a directory's `names`, in id order. */
export const byIdPartsOf = (dataName: string, names: string[]) =>
  names.filter((n) => n.startsWith(`${dataName}${BY_ID_PART}`)).sort();
/** The data file a by-id part belongs to, or null when `name` is not one. */
export function byIdDataName(name: string): string | null {
  const at = name.lastIndexOf(BY_ID_PART);
  return at > 0 && /^\d+$/.test(name.slice(at + BY_ID_PART.length)) ? name.slice(0, at) : null;
}
/** Where a compaction writes the parts before renaming them into place. */
export const byIdTempDir = (dataPath: string) => `${dataPath}.ids.tmp`;
/** The single execution-id index an earlier version wrote beside a compacted file: deleted with it. */
export const legacyIdIndexPath = (dataPath: string) => `${dataPath}.ids`;

/** True when the manifest accounts for this file having gone (compacted away). */
export function retired(m: Manifest | null, name: string): boolean {
  return m !== null && (m.deleted.includes(name) || m.replaced.some((r) => r.name === name));
}

/**
 * The files that hold every column of the rows of the live files `names` of partition `dir`: each file itself,
 * but a scan-only file's by-id parts. What a merge reads, so it never keeps a scan-only file's rows without the
 * columns only its copy holds.
 */
export function wholeRowFiles(dir: string, m: Manifest, names: string[]): string[] {
  const scanOnly = new Set(m.scanOnly ?? []);
  return names.flatMap((name) => {
    if (!scanOnly.has(name)) return [path.join(dir, name)];
    const parts = m.byId?.[name]?.filter((p) => p.rows > 0) ?? [];
    if (parts.length === 0)
      throw new Error(`${path.join(dir, name)} is scan-only but names no by-id part with rows`);
    return parts.map((p) => path.join(dir, p.name));
  });
}
