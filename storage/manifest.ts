import fs from 'node:fs/promises';
import path from 'node:path';
import { writeFileDurably } from './fsync.js';

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
const PARQUET = '.parquet';

export interface Manifest {
  version: number;
  /** Compacted files now serving the partition's rows. */
  live: string[];
  /** Files whose rows are in a live file: hidden from readers, deleted after a grace period. */
  replaced: { name: string; at: number }[];
  /** Replaced files already deleted: a late journal recovery must not take their absence for data loss. */
  deleted: string[];
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
 * The sorted execution-id index written beside a compacted executions file. Not `.parquet`-suffixed, so no
 * listing takes it for data; it lives and dies with its file.
 */
export const idIndexPath = (parquetPath: string) => `${parquetPath}.ids`;

/** True when the manifest accounts for this file having gone (compacted away). */
export function retired(m: Manifest | null, name: string): boolean {
  return m !== null && (m.deleted.includes(name) || m.replaced.some((r) => r.name === name));
}
