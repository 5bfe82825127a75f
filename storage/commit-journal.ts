import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fsyncDir, writeFileDurably } from './fsync.js';
import { changedHours } from './generation.js';
import { partitionHourOf } from './layout.js';
import { readManifest, retired } from './manifest.js';

/**
 * Exactly-once commit of a batch to Parquet. A batch's files are written under temporary names first; then
 * one journal entry naming the files and the stream sequences they hold is made durable (the commit point);
 * then the files are renamed into place and the messages acked. After a crash:
 *   - before the commit point: the temporary files are orphans and the messages come again; nothing is visible;
 *   - after it: recovery finishes the renames, and a redelivered message whose sequence is in a journal entry
 *     is acked without being processed again, so no row is added twice.
 * An entry is deleted once the consumer's ack floor has passed all its sequences: no redelivery can follow.
 */

export interface CommitFile {
  tmpPath: string;
  finalPath: string;
}

export interface CommitEntry {
  writerId: string;
  commitNo: number;
  seqs: number[];
  files: CommitFile[];
}

const ENTRY_SUFFIX = '.json';

async function renameIfPending(f: CommitFile): Promise<void> {
  try {
    await fs.rename(f.tmpPath, f.finalPath);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    // Already renamed by an earlier attempt (or by another process finishing this entry) — or lost, which
    // must not pass for done: its messages would be acked with their rows gone.
    const present = await fs.access(f.finalPath).then(
      () => true,
      () => false,
    );
    // Compacted into another file since: its rows are there.
    if (!present && !retired(await readManifest(path.dirname(f.finalPath)), path.basename(f.finalPath))) {
      throw new Error(`committed file lost: neither ${f.tmpPath} nor ${f.finalPath} exists`);
    }
  }
}

/** Renames every file of an entry into place, makes the renames durable, and tells cached listings. */
async function finishEntry(entry: CommitEntry): Promise<void> {
  const dirs = new Map<string, number>();
  for (const f of entry.files) {
    await renameIfPending(f);
    dirs.set(path.dirname(f.finalPath), partitionHourOf(f.finalPath) ?? 0);
  }
  await Promise.all([...dirs.keys()].map(fsyncDir));
  await changedHours(dirs);
}

export class CommitJournal {
  readonly dir: string;
  readonly writerId: string;
  #commitNo = 0;
  /** Sequence → the entry file that holds it. */
  readonly #committed = new Map<number, string>();
  /** Entries committed by this process whose renames failed: finished before any of their messages is acked. */
  readonly #unfinished = new Map<string, CommitEntry>();
  /** Entry files already read: a refresh reads only the new ones. */
  readonly #known = new Set<string>();

  constructor(dataDir: string, writerId = `w${crypto.randomBytes(5).toString('hex')}`) {
    this.dir = path.join(dataDir, '_journal');
    this.writerId = writerId;
  }

  /** Loads every writer's entries and finishes their renames: run before consuming. */
  async recover(): Promise<{ entries: number; renamed: number; lost: number }> {
    await fs.mkdir(this.dir, { recursive: true });
    const entries = await this.#loadNew();
    let lost = 0;
    for (const [name, e] of entries) if (!(await this.#finishOrSetAside(name, e))) lost++;
    return { entries: entries.length, renamed: entries.reduce((n, [, e]) => n + e.files.length, 0), lost };
  }

  /** Reads the entries not read before (all of them at recovery). */
  async #loadNew(): Promise<[string, CommitEntry][]> {
    const names = (await fs.readdir(this.dir)).filter((n) => n.endsWith(ENTRY_SUFFIX) && !this.#known.has(n));
    const entries: [string, CommitEntry][] = [];
    for (const name of names) {
      let entry: CommitEntry;
      try {
        entry = JSON.parse(await fs.readFile(path.join(this.dir, name), 'utf8')) as CommitEntry;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue; // pruned meanwhile
        throw err;
      }
      this.#known.add(name);
      for (const s of entry.seqs) this.#committed.set(s, name);
      entries.push([name, entry]);
    }
    return entries;
  }

  /**
   * Finishes an entry's renames. When one of its files is gone (a crash of the machine before the entry's
   * files were durable), the entry is set aside as `.lost` and its sequences count as uncommitted: the
   * messages are processed again, so accepted rows are never lost (the entry's surviving files may then
   * hold some rows twice, which compaction's dedup by executionId removes).
   */
  async #finishOrSetAside(name: string, entry: CommitEntry): Promise<boolean> {
    try {
      await finishEntry(entry);
      return true;
    } catch (err) {
      if (!/committed file lost/.test((err as Error).message)) throw err;
      await fs.rename(path.join(this.dir, name), path.join(this.dir, `${name}.lost`));
      for (const s of entry.seqs) if (this.#committed.get(s) === name) this.#committed.delete(s);
      return false;
    }
  }

  /**
   * True when this stream sequence is already in committed files. Only redelivered messages need asking; an
   * unknown sequence rereads the journal's new entries, since another process may have committed it.
   */
  async isCommitted(seq: number): Promise<boolean> {
    if (!this.#committed.has(seq))
      for (const [name, e] of await this.#loadNew()) await this.#finishOrSetAside(name, e);
    const name = this.#committed.get(seq);
    if (name === undefined) return false;
    // Committed, but its renames failed earlier in this process: finish them before anyone acks on it.
    const unfinished = this.#unfinished.get(name);
    if (unfinished) {
      await finishEntry(unfinished);
      this.#unfinished.delete(name);
    }
    return true;
  }

  /** Which of these sequences are in a journal entry (this process's or another's), read afresh. */
  async committedAmong(seqs: number[]): Promise<Set<number>> {
    await this.#loadNew();
    return new Set(seqs.filter((s) => this.#committed.has(s)));
  }

  nextCommitNo(): number {
    return ++this.#commitNo;
  }

  /** Makes the entry durable (the commit point), then renames the files into place. */
  async commit(entry: CommitEntry): Promise<void> {
    const name = `${entry.writerId}-${String(entry.commitNo).padStart(10, '0')}${ENTRY_SUFFIX}`;
    await writeFileDurably(path.join(this.dir, name), JSON.stringify(entry));
    this.#known.add(name);
    for (const s of entry.seqs) this.#committed.set(s, name);
    try {
      await finishEntry(entry);
    } catch (err) {
      this.#unfinished.set(name, entry);
      throw err;
    }
  }

  /** Deletes the entries whose every sequence is at or below the consumer's ack floor. */
  async prune(ackFloor: number): Promise<number> {
    const byEntry = new Map<string, number>();
    for (const [seq, name] of this.#committed) byEntry.set(name, Math.max(byEntry.get(name) ?? 0, seq));
    let removed = 0;
    for (const [name, maxSeq] of byEntry) {
      if (maxSeq > ackFloor) continue;
      await fs.rm(path.join(this.dir, name), { force: true });
      this.#known.delete(name);
      removed++;
    }
    if (removed > 0) for (const [seq] of this.#committed) if (seq <= ackFloor) this.#committed.delete(seq);
    return removed;
  }
}
