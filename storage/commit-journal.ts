import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { IDEMPOTENCY_WINDOW_MS } from '../schemas/broker-messages.js';
import { fsyncDir, linkExclusively, publishExclusively, writeTemporary } from './fsync.js';
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
 * still holds, not of those already acked). Two copies of an id stored within the idempotency window of each other
 * are one request; further apart, two (CONTRACT §5: a key may be reused after 10 minutes). An entry is deleted once
 * the consumer's ack floor has passed all its sequences (no redelivery can follow) and every message not yet
 * processed, and any to come, was stored more than the window after its newest message (none can be its copy).
 *
 * Several processes share the journal. An entry is published exclusively (a hard link, which fails when the name
 * is taken), so a commit can be fenced: another process that must commit a message whose claim names a commit
 * still unpublished (its writer stalled or died past the claim's staleness, pipeline/commit-claims.ts) publishes a
 * fence under that commit's name first; the stalled writer's own entry then finds the name taken and its batch is
 * not committed. Fences are kept an hour, far past the time a writer may still try to publish (its claims' life).
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

/**
 * An entry whose temporary file is being written and fsynced (CommitJournal.prepare): committed, or discarded when
 * the batch fails before its commit point.
 */
export interface PreparedEntry {
  entry: CommitEntry;
  text: string;
  tmp: string;
  /** The temporary file is durable (rejected: it failed and is gone). */
  written: Promise<void>;
}

/** How long a fence stays: a fenced writer gives up publishing long before (COMMIT_CLAIM_TTL_MS / 2). */
const FENCE_KEEP_MS = 3600_000;

/** A temporary file of the journal this old was left by a process that died while publishing. */
const TMP_KEEP_MS = 3600_000;

/** What stands under a commit's name: its entry, a fence, or nothing (not yet, or never, published). */
export type CommitState = 'committed' | 'fenced' | 'absent';

/** The name of a writer's commit: its journal entry's, its files', its claims' value. */
export const commitId = (writerId: string, commitNo: number) =>
  `${writerId}-${String(commitNo).padStart(10, '0')}`;

const COMMIT_ID = /^[A-Za-z0-9_]+-[0-9]{10}$/;

/** A fence stands under a commit's name instead of its entry: the commit is never to be published. */
interface Fence {
  fencedBy: string;
  at: number;
}

const isFence = (v: unknown): v is Fence => typeof (v as Fence | null)?.fencedBy === 'string';

/** Whether two copies of one id are the same request: stored within the idempotency window of each other. */
const sameRequest = (a: number, b: number) => Math.abs(a - b) < IDEMPOTENCY_WINDOW_MS;

/** Kept beyond the window, for a broker clock behind this process's. */
const CLOCK_MARGIN_MS = 60_000;

/** The commit point was not reached (the entry could not be written): the batch's files are not committed. */
export class NotCommitted extends Error {}

/** Another process fenced this commit (it took over the batch's messages): the batch's files are not committed. */
export class Fenced extends NotCommitted {}

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
  #leftoversPrunedAt = 0;
  /** Every entry read or written and not yet pruned, by file name. */
  readonly #entries = new Map<string, CommitEntry>();
  /**
   * Message id → the broker times of its committed copies: one number, or several when a key was reused after the
   * window (an array only then, to keep the common case small).
   */
  readonly #ids = new Map<string, number | number[]>();
  /** Fences read, by file name: not entries. */
  readonly #fences = new Set<string>();
  /** Sequences of entries without ids (written by an earlier version), → their entry. */
  readonly #legacySeqs = new Map<number, string>();
  /**
   * Entries whose files may not all be in place (renames or an fsync failed, here or in the process that wrote
   * them): finished before any of their messages is acked, and never pruned meanwhile.
   */
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
      (n) => n.endsWith(ENTRY_SUFFIX) && !this.#entries.has(n) && !this.#fences.has(n),
    );
    const entries: [string, CommitEntry][] = [];
    for (const name of names) {
      let entry: CommitEntry | Fence;
      try {
        entry = JSON.parse(await fs.readFile(path.join(this.dir, name), 'utf8')) as CommitEntry | Fence;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue; // pruned meanwhile
        throw err;
      }
      if (isFence(entry)) {
        this.#fences.add(name);
        continue;
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
        const id = e.ids[i]!;
        const t = e.storedAt[i]!;
        const was = this.#ids.get(id);
        if (was === undefined) this.#ids.set(id, t);
        else if (typeof was === 'number') {
          if (was !== t) this.#ids.set(id, [was, t]);
        } else if (!was.includes(t)) was.push(t);
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
      for (let i = 0; i < e.ids.length; i++) {
        const id = e.ids[i]!;
        const was = this.#ids.get(id);
        if (was === e.storedAt[i]) this.#ids.delete(id);
        else if (Array.isArray(was)) {
          const rest = was.filter((t) => t !== e.storedAt![i]);
          this.#ids.set(id, rest.length === 1 ? rest[0]! : rest);
        }
      }
    } else {
      for (const s of e.seqs) if (this.#legacySeqs.get(s) === name) this.#legacySeqs.delete(s);
    }
  }

  /**
   * Finishes entries' renames. When one of an entry's files is gone (a crash of the machine before the entry's
   * files were durable), the entry is set aside as `.lost` and its messages count as uncommitted: they are
   * processed again, so accepted rows are never lost (the entry's surviving files may then hold some rows
   * twice, which compaction's dedup by executionId removes). Any other failure leaves the entries unfinished and
   * is thrown. Answers how many were set aside.
   */
  async #finishOrSetAside(entries: [string, CommitEntry][]): Promise<number> {
    if (entries.length === 0) return 0;
    try {
      await finishEntries(entries.map(([, e]) => e));
      for (const [name] of entries) this.#unfinished.delete(name);
      return 0;
    } catch (err) {
      if (!(err instanceof CommittedFileLost)) {
        for (const [name, e] of entries) this.#unfinished.set(name, e);
        throw err;
      }
    }
    // One at a time, to find which.
    let lost = 0;
    for (const [name, e] of entries) {
      try {
        await finishEntries([e]);
        this.#unfinished.delete(name);
      } catch (err) {
        if (!(err instanceof CommittedFileLost)) {
          this.#unfinished.set(name, e);
          throw err;
        }
        await this.#setAside(name);
        lost++;
      }
    }
    return lost;
  }

  async #setAside(name: string): Promise<void> {
    try {
      await fs.rename(path.join(this.dir, name), path.join(this.dir, `${name}.lost`));
    } catch (err) {
      // Set aside (or pruned) by another process meanwhile: the same outcome.
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    } finally {
      this.#unindex(name);
      this.#unfinished.delete(name);
    }
  }

  /** Finishes the unfinished entries that hold any of these messages (the journal's own fsync first). */
  async #finishHolding(ds: readonly Delivery[]): Promise<void> {
    if (this.#unfinished.size === 0) return;
    const ids = new Set(ds.map((d) => d.id));
    const seqs = new Set(ds.map((d) => d.seq));
    const holding = [...this.#unfinished].filter(([, e]) =>
      e.ids ? e.ids.some((id) => ids.has(id)) : e.seqs.some((s) => seqs.has(s)),
    );
    if (holding.length === 0) return;
    await fsyncDir(this.dir);
    await this.#finishOrSetAside(holding);
  }

  /** Whether this message's request is in an entry this process has read (no disk access). */
  knows(d: Delivery): boolean {
    const times = this.#ids.get(d.id);
    if (times !== undefined) {
      if (
        typeof times === 'number'
          ? sameRequest(times, d.storedAt)
          : times.some((t) => sameRequest(t, d.storedAt))
      )
        return true;
    }
    return this.#legacySeqs.size > 0 && this.#legacySeqs.has(d.seq);
  }

  /**
   * True when this message's request is already in committed files, whose entry is finished: it may be acked. An
   * unknown one rereads the journal's new entries, since another process may have committed it.
   */
  async isCommitted(d: Delivery): Promise<boolean> {
    if (!this.knows(d)) await this.#finishOrSetAside(await this.#loadNew());
    await this.#finishHolding([d]);
    return this.knows(d);
  }

  /**
   * The sequences among a batch's messages that must not be written: their request is in an entry (this
   * process's or another's, read afresh, finished), or is an earlier message of the batch.
   */
  async committedAmong(ds: readonly Delivery[]): Promise<Set<number>> {
    await this.#finishOrSetAside(await this.#loadNew());
    await this.#finishHolding(ds);
    const skip = new Set<number>();
    const kept = new Map<string, number[]>();
    for (const d of ds) {
      const earlier = kept.get(d.id);
      if (this.knows(d) || earlier?.some((t) => sameRequest(t, d.storedAt))) skip.add(d.seq);
      else if (earlier) earlier.push(d.storedAt);
      else kept.set(d.id, [d.storedAt]);
    }
    return skip;
  }

  nextCommitNo(): number {
    return ++this.#commitNo;
  }

  /** What stands under a commit's name now. */
  async state(id: string): Promise<CommitState> {
    if (!COMMIT_ID.test(id)) throw new Error(`not a commit id: ${JSON.stringify(id)}`);
    let text: string;
    try {
      text = await fs.readFile(path.join(this.dir, id + ENTRY_SUFFIX), 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 'absent';
      throw err;
    }
    return isFence(JSON.parse(text)) ? 'fenced' : 'committed';
  }

  /**
   * Makes sure the commit `id` is never published: a fence under its name, unless its entry got there first.
   * Answers which of the two stands there now.
   */
  async fence(id: string): Promise<Exclude<CommitState, 'absent'>> {
    if (!COMMIT_ID.test(id)) throw new Error(`not a commit id: ${JSON.stringify(id)}`);
    const fence: Fence = { fencedBy: this.writerId, at: Date.now() };
    const file = path.join(this.dir, id + ENTRY_SUFFIX);
    const there = await publishExclusively(file, JSON.stringify(fence), `${file}.${this.writerId}.fence.tmp`);
    return there === null || isFence(JSON.parse(there)) ? 'fenced' : 'committed';
  }

  /**
   * Starts writing an entry's temporary file (and its fsync) while the batch's files are encoded and fsynced: the
   * two fsyncs (each a journal commit on ext4) overlap instead of following each other. Nothing is committed until
   * `commit`; a batch that fails before that `discard`s it.
   */
  prepare(entry: CommitEntry): PreparedEntry {
    const text = JSON.stringify(entry);
    const tmp = `${path.join(this.dir, commitId(entry.writerId, entry.commitNo) + ENTRY_SUFFIX)}.tmp`;
    const written = writeTemporary(tmp, text);
    // Awaited by commit or discard; handled now so a failure before then is not an unhandled rejection.
    written.catch(() => {});
    return { entry, text, tmp, written };
  }

  /** Removes a prepared entry's temporary file: its batch was given up before its commit point. */
  async discard(prepared: PreparedEntry): Promise<void> {
    await prepared.written.catch(() => {});
    await fs.rm(prepared.tmp, { force: true });
  }

  /**
   * Makes the entry durable (the commit point), then renames the files into place. `lapsed`, asked right before
   * the entry is linked into place: true when its writer's claims may have lapsed, and then it is not.
   */
  async commit(entryOrPrepared: CommitEntry | PreparedEntry, lapsed?: () => boolean): Promise<void> {
    const prepared = 'written' in entryOrPrepared ? entryOrPrepared : this.prepare(entryOrPrepared);
    const { entry, text } = prepared;
    const id = commitId(entry.writerId, entry.commitNo);
    const name = id + ENTRY_SUFFIX;
    const file = path.join(this.dir, name);
    let there: string | null;
    try {
      await prepared.written;
      there = await linkExclusively(file, text, prepared.tmp, () => {
        if (lapsed?.()) throw new NotCommitted(`commit ${id} too late: its claims may have lapsed`);
      });
    } catch (err) {
      if (err instanceof NotCommitted) throw err;
      const present = await fs.readFile(file, 'utf8').then(
        (t) => t === text,
        (e: NodeJS.ErrnoException) => {
          if (e.code === 'ENOENT') return false;
          throw err;
        },
      );
      if (!present) throw new NotCommitted(`commit entry ${name} not written`, { cause: err });
      // In place, so committed (readers may have seen it), but not known to be durable: finished, the journal's
      // directory fsynced, before any of its messages is acked.
      this.#index(name, entry);
      this.#unfinished.set(name, entry);
      throw err;
    }
    if (there !== null) throw new Fenced(`commit ${id} fenced by another process: not committed`);
    this.#index(name, entry);
    try {
      await finishEntries([entry]);
    } catch (err) {
      this.#unfinished.set(name, entry);
      throw err;
    }
  }

  /**
   * Deletes the entries no message can be a copy of any more: every sequence at or below the consumer's ack floor,
   * and `oldestPending` (the broker time of the oldest message not yet processed, or now when there is none: the
   * earliest any message still to be processed can have been stored) more than the window after the entry's
   * newest message.
   */
  async prune(ackFloor: number, oldestPending = Date.now()): Promise<number> {
    let removed = await this.#pruneLeftovers();
    for (const [name, e] of [...this.#entries]) {
      if (this.#unfinished.has(name)) continue;
      let maxSeq = 0;
      for (const s of e.seqs) if (s > maxSeq) maxSeq = s;
      let newest = 0;
      for (const t of e.storedAt ?? []) if (t > newest) newest = t;
      if (maxSeq > ackFloor || oldestPending - newest < IDEMPOTENCY_WINDOW_MS + CLOCK_MARGIN_MS) continue;
      await fs.rm(path.join(this.dir, name), { force: true });
      this.#unindex(name);
      removed++;
    }
    return removed;
  }

  /** Deletes fences past their hour, and temporary files of publications that died with their process. */
  async #pruneLeftovers(): Promise<number> {
    const now = Date.now();
    if (now - this.#leftoversPrunedAt < 60_000) return 0;
    this.#leftoversPrunedAt = now;
    let removed = 0;
    const old = async (name: string, keepMs: number) => {
      const st = await fs.stat(path.join(this.dir, name)).catch(() => null);
      return st === null || now - st.mtimeMs > keepMs;
    };
    for (const name of [...this.#fences]) {
      if (!(await old(name, FENCE_KEEP_MS))) continue;
      await fs.rm(path.join(this.dir, name), { force: true });
      this.#fences.delete(name);
      removed++;
    }
    for (const name of await fs.readdir(this.dir)) {
      if (!name.endsWith('.tmp') || !(await old(name, TMP_KEEP_MS))) continue;
      await fs.rm(path.join(this.dir, name), { force: true });
      removed++;
    }
    return removed;
  }
}
