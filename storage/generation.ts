import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { HOUR_MS } from '../schemas/time.js';

/**
 * Readers keep the listing of a workspace and mode's older hour partitions (layout.ts), because listing every
 * hour directory of a week on each query took 19 ms (p95 36 ms) for the detail alone. Every change to what an
 * older hour shows — a commit into it, a merge, a retention pass — changes the mode directory's generation file
 * after it, so the next reader lists again. Hours newer than READER_FRESH_MS are listed on every read, so the
 * writers' common case, the current hour, changes no generation.
 */

/** A change to an hour that started before now minus this changes the generation. */
const WRITER_OLD_MS = 2 * HOUR_MS;
/** Readers list the hours that started after now minus this every time: an hour's margin for clocks. */
export const READER_FRESH_MS = 3 * HOUR_MS;

const GENERATION = '_generation';
/** A generation file being written (an orphan if its writer died before the rename). */
export const GENERATION_TMP_SUFFIX = '.gen.tmp';

/** A new generation for a mode directory: written whole under a temporary name, then renamed over the old. */
export async function bumpGeneration(modeDir: string): Promise<void> {
  const target = path.join(modeDir, GENERATION);
  const tmp = `${target}.${crypto.randomBytes(6).toString('hex')}${GENERATION_TMP_SUFFIX}`;
  try {
    await fs.writeFile(tmp, crypto.randomBytes(12).toString('hex'));
  } catch (err) {
    // No mode directory: nothing there to list, nothing cached to invalidate.
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  await fs.rename(tmp, target);
}

/** The mode directory's generation ('' before its first change). */
export async function readGeneration(modeDir: string): Promise<string> {
  try {
    return await fs.readFile(path.join(modeDir, GENERATION), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return '';
    throw err;
  }
}

/**
 * After a change to the files of the hour partitions `hourDirs` (…/mode=…/date=…/hour=…, started at
 * `hourStart(dir)`): a new generation for each mode directory with an older hour among them. Judged by this
 * machine's clock, whatever time a caller works with.
 */
export async function changedHours(hourDirs: Iterable<[dir: string, hourStart: number]>): Promise<void> {
  const old = Date.now() - WRITER_OLD_MS;
  const modeDirs = new Set<string>();
  for (const [dir, start] of hourDirs) if (start < old) modeDirs.add(path.dirname(path.dirname(dir)));
  await Promise.all([...modeDirs].map(bumpGeneration));
}
