import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { IDEMPOTENCY_WINDOW_MS } from '../schemas/broker-messages.js';
import { fsyncDir, writeFileDurably } from './fsync.js';
import { changedHours } from './generation.js';
import { partitionHourOf } from './layout.js';
import { type Manifest, readManifest, retired } from './manifest.js';

/**
 * Exactly-once commit of a batch to Parquet. A batch's files are written under temporary names first; then
 * one journal entry naming the files and the messages they hold is made durable (the commit point); then the
 * files are renamed into place and the messages acked. After a crash:
 *   - before the commit point: the temporary files are orphans and the messages come again; nothing is visible;
 *   - after it: recovery finishes the renames, and a message whose request is in a journal entry is acked
 *     without being processed again, so no row is added twice.
 *
 * A message is known by its request's id (the broker message id, made from the idempotency key or the body) and
 * the time the broker stored it, not by its stream sequence: a redelivery has the same id, and so has a resend
 * the broker stored again because it restarted since (a restarted broker remembers the ids of the messages it
 * still holds, not of those already acked). An entry is deleted once the consumer's ack floor has passed all its
 * sequences (no redelivery can follow) and its newest message is older than the idempotency window (no resend
 * counts as a duplicate any more).
 */

export interface CommitFile {
  tmpPath: string;
  finalPath: string;
}

/** One message of a batch, as the journal knows it. */
export interface Delivery {
  seq: number;
  /** The broker message id: the same for every copy of one request. */
  id: string;
  /** When the broker stored this copy (ms). */
  storedAt: number;
}

export interface CommitEntry {
  writerId: string;
  commitNo: number;
  seqs: number[];
  /** Per sequence, its message's id and broker time (absent in entries written before ids were recorded). */
  ids?: string[];
  storedAt?: number[];
  files: CommitFile[];
}

const ENTRY_SUFFIX = '.json';

/** The commit point was not reached (the entry could not be written): the batch's files are not committed. */
export class NotCommitted extends Error {}

/** A file of a committed entry that is neither where it was written nor where it goes, nor compacted away. */
class CommittedFileLost extends Error {}

/**
 * Renames every file of these entries into place, makes the renames durable (each directory once), and tells
 * cached listings. Manifests are read once per directory, only for files already gone.
 */
async function finishEntries(entries: readonly CommitEntry[]): Promise<void> {
  const dirs = new Map<string, number>();
  const manifests = new Map<string, Promise<Manifest | null>>();
  for (const entry of entries) {
    for (const f of entry.files) {
      const dir = path.dirname(f.finalPath);
      dirs.set(dir, partitionHourOf(f.finalPath) ?? 0);
      try {
        await fs.rename(f.tmpPath, f.finalPath);
        continue;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
      // Already renamed by an earlier attempt (or by another process finishing this entry) — or lost, which
      // must not pass for done: its messages would be acked with their rows gone.
      const present = await fs.access(f.finalPath).then(
        () => true,
        () => false,
      );
      if (present) continue;
      if (!manifests.has(dir)) manifests.set(dir, readManifest(dir));
      // Compacted into another file since: its rows are there.
      if (!retired(await manifests.get(dir)!, path.basename(f.finalPath))) {
        throw new CommittedFileLost(`committed file lost: neither ${f.tmpPath} nor ${f.finalPath} exists`);
      }
    }
  }
  await Promise.all([...dirs.keys()].map(fsyncDir));
  await changedHours(dirs);
}

export class CommitJournal {
  readonly dir: string;
  readonly writerId: string;
  #commitNo = 0;
  /** Every entry read or written and not yet pruned, by file name. */
  readonly #entries = new Map<string, CommitEntry>();
  /** Message id → when the broker stored its committed copy (the newest, when a key was reused later). */
  readonly #ids = new Map<string, number>();
  /** Sequences of entries without ids (written by an earlier version), → their entry. */
  readonly #legacySeqs = new Map<number, string>();
  /** Entries committed by this process whose renames failed: finished before any of their messages is acked. */
  readonly #unfinished = new Map<string, CommitEntry>();

  constructor(dataDir: string, writerId = `w${crypto.randomBytes(5).toString('hex')}`) {
    this.dir = path.join(dataDir, '_journal');
    this.writerId = writerId;
  }

  /** Loads every writer's entries and finishes their renames: run before consuming. */
  async recover(): Promise<{ entries: number; renamed: number; lost: number }> {
    await fs.mkdir(this.dir, { recursive: true });
    const entries = await this.#loadNew();
    const lost = await this.#finishOrSetAside(entries);
    return { entries: entries.length, renamed: entries.reduce((n, [, e]) => n + e.files.length, 0), lost };
  }

  /** Reads the entries not read before (all of them at recovery). */
  async #loadNew(): Promise<[string, CommitEntry][]> {
    const names = (await fs.readdir(this.dir)).filter(
      (n) => n.endsWith(ENTRY_SUFFIX) && !this.#entries.has(n),
    );
    const entries: [string, CommitEntry][] = [];
    for (const name of names) {
      let entry: CommitEntry;
      try {
        entry = JSON.parse(await fs.readFile(path.join(this.dir, name), 'utf8')) as CommitEntry;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue; // pruned meanwhile
        throw err;
      }
      this.#index(name, entry);
      entries.push([name, entry]);
    }
    return entries;
  }

  #index(name: string, e: CommitEntry): void {
    this.#entries.set(name, e);
    if (e.ids && e.storedAt) {
      for (let i = 0; i < e.ids.length; i++) {
        const was = this.#ids.get(e.ids[i]!);
        if (was === undefined || was < e.storedAt[i]!) this.#ids.set(e.ids[i]!, e.storedAt[i]!);
      }
    } else {
      for (const s of e.seqs) this.#legacySeqs.set(s, name);
    }
  }

  #unindex(name: string): void {
    const e = this.#entries.get(name);
    if (!e) return;
    this.#entries.delete(name);
    if (e.ids && e.storedAt) {
      // A key reused after the window has a newer copy: that one stays.
      for (let i = 0; i < e.ids.length; i++)
        if (this.#ids.get(e.ids[i]!) === e.storedAt[i]) this.#ids.delete(e.ids[i]!);
    } else {
      for (const s of e.seqs) if (this.#legacySeqs.get(s) === name) this.#legacySeqs.delete(s);
    }
  }

  /**
   * Finishes entries' renames. When one of an entry's files is gone (a crash of the machine before the entry's
   * files were durable), the entry is set aside as `.lost` and its messages count as uncommitted: they are
   * processed again, so accepted rows are never lost (the entry's surviving files may then hold some rows
   * twice, which compaction's dedup by executionId removes). Answers how many were set aside.
   */
  async #finishOrSetAside(entries: [string, CommitEntry][]): Promise<number> {
    if (entries.length === 0) return 0;
    try {
      await finishEntries(entries.map(([, e]) => e));
      return 0;
    } catch (err) {
      if (!(err instanceof CommittedFileLost)) throw err;
    }
    // One at a time, to find which.
    let lost = 0;
    for (const [name, e] of entries) {
      try {
        await finishEntries([e]);
      } catch (err) {
        if (!(err instanceof CommittedFileLost)) throw err;
        await fs.rename(path.join(this.dir, name), path.join(this.dir, `${name}.lost`));
        this.#unindex(name);
        lost++;
      }
    }
    return lost;
  }

  /** Whether this message's request is in an entry this process has read (no disk access). */
  knows(d: Delivery): boolean {
    const at = this.#ids.get(d.id);
    // A copy stored earlier, or later (a redelivered first copy after the resend was committed), within the window.
    if (at !== undefined && d.storedAt - at < IDEMPOTENCY_WINDOW_MS) return true;
    return this.#legacySeqs.size > 0 && this.#legacySeqs.has(d.seq);
  }

  /**
   * True when this message's request is already in committed files. An unknown one rereads the journal's new
   * entries, since another process may have committed it.
   */
  async isCommitted(d: Delivery): Promise<boolean> {
    if (!this.knows(d)) await this.#finishOrSetAside(await this.#loadNew());
    if (!this.knows(d)) return false;
    // Committed, but renames failed earlier in this process: finish them before anyone acks on it.
    if (this.#unfinished.size > 0) {
      await finishEntries([...this.#unfinished.values()]);
      this.#unfinished.clear();
    }
    return true;
  }

  /** The sequences among these messages whose request is in an entry (this process's or another's), read afresh. */
  async committedAmong(ds: readonly Delivery[]): Promise<Set<number>> {
    await this.#finishOrSetAside(await this.#loadNew());
    return new Set(ds.filter((d) => this.knows(d)).map((d) => d.seq));
  }

  nextCommitNo(): number {
    return ++this.#commitNo;
  }

  /** Makes the entry durable (the commit point), then renames the files into place. */
  async commit(entry: CommitEntry): Promise<void> {
    const name = `${entry.writerId}-${String(entry.commitNo).padStart(10, '0')}${ENTRY_SUFFIX}`;
    const file = path.join(this.dir, name);
    try {
      await writeFileDurably(file, JSON.stringify(entry));
    } catch (err) {
      // Renamed into place with only its directory's fsync failing, it is committed: readers may have seen it.
      const inPlace = await fs.access(file).then(
        () => true,
        () => false,
      );
      if (!inPlace) throw new NotCommitted(`commit entry ${name} not written`, { cause: err });
    }
    this.#index(name, entry);
    try {
      await finishEntries([entry]);
    } catch (err) {
      this.#unfinished.set(name, entry);
      throw err;
    }
  }

  /**
   * Deletes the entries no message can be a copy of any more: every sequence at or below the consumer's ack
   * floor, and the newest message older than the idempotency window.
   */
  async prune(ackFloor: number, now = Date.now()): Promise<number> {
    let removed = 0;
    for (const [name, e] of [...this.#entries]) {
      if (this.#unfinished.has(name)) continue;
      let maxSeq = 0;
      for (const s of e.seqs) if (s > maxSeq) maxSeq = s;
      let newest = 0;
      for (const t of e.storedAt ?? []) if (t > newest) newest = t;
      if (maxSeq > ackFloor || now - newest < IDEMPOTENCY_WINDOW_MS) continue;
      await fs.rm(path.join(this.dir, name), { force: true });
      this.#unindex(name);
      removed++;
    }
    return removed;
  }
}
