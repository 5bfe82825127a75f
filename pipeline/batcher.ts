import type { JsMsg } from '@nats-io/jetstream';
import type { IssueOccurrences } from '../schemas/issues.js';
import type { Mode } from '../schemas/records.js';
import type { BatchWriter, PartitionBatch, WriteStats } from '../storage/batch-writer.js';
import type { ColumnChunk } from '../storage/columns.js';
import { type Delivery, Fenced } from '../storage/commit-journal.js';

export interface BatcherLog {
  error(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}

export interface BatcherOptions {
  writer: BatchWriter;
  maxRows: number;
  flushIntervalMs: number;
  log: BatcherLog;
  /**
   * Claims a batch's messages for one commit and says which must not be written in it: those whose request is
   * committed already (by another process, or as another copy), and those another process is committing now.
   */
  claim: (deliveries: readonly Delivery[]) => Promise<ClaimedBatch>;
  /** Called once a message is acked or naked: it is no longer this process's to hold. */
  onSettled: (msg: JsMsg) => void;
  onFlushed?: (stats: WriteStats & { messages: number; ms: number }) => void;
  /** A batch could not be written or finished: its messages come again (acked then if it was committed). */
  onFailed?: (err: unknown) => void;
  /** Test seam: runs after a batch is committed and before its messages are acked. */
  afterCommit?: () => Promise<void> | void;
  /**
   * Runs beside the batch's encoding and must succeed before its commit point: the issue upserts. A crash
   * after the commit then cannot lose them, and a crash before it brings the messages back to do them again
   * (they are idempotent).
   */
  beforeCommit?: (entries: readonly BatchEntry[]) => Promise<void>;
}

/** A batch's messages claimed for one commit (pipeline/commit-claims.ts). */
export interface ClaimedBatch {
  /** The commit's number. */
  no: number;
  /** Sequences whose request is committed already: acked, not written. */
  committed: Set<number>;
  /** Sequences whose request another process is committing now: naked, to come again. */
  contested: Set<number>;
  /** True once the claims may have lapsed: the commit must not be published then. */
  lapsed: () => boolean;
  /** Gives the claims back: the commit is given up, or holds nothing. */
  release: () => void;
}

/** One parsed message: its rows stay together, in one commit. */
export interface BatchEntry {
  msg: JsMsg;
  delivery: Delivery;
  workspaceId: string;
  mode: Mode;
  chunks: ColumnChunk[];
  /** Its failed executions, per issue. */
  issues: IssueOccurrences[];
}

interface Batch {
  entries: BatchEntry[];
  rows: number;
}

/**
 * How long a message whose batch could not be written waits before it comes again: 1 s, doubling with every
 * failed delivery up to 16 s, so a full disk or a broken directory is retried without parsing the whole backlog
 * again every second, and writing resumes within seconds of the cause going away.
 */
export const retryDelayMs = (deliveryCount: number) =>
  1000 * 2 ** Math.min(4, Math.max(0, deliveryCount - 1));

/**
 * Gathers parsed messages and flushes them, on size or on a timer, as one commit. Flushes never overlap; the
 * messages of a batch are acked only after its files are committed, and a message's rows are never split
 * between two batches.
 */
export class Batcher {
  readonly #o: BatcherOptions;
  #batch: Batch = { entries: [], rows: 0 };
  #timer: NodeJS.Timeout | null = null;
  #flushing: Promise<void> | null = null;
  #again = false;
  #roomWaiters: (() => void)[] = [];

  constructor(opts: BatcherOptions) {
    this.#o = opts;
  }

  add(
    msg: JsMsg,
    delivery: Delivery,
    workspaceId: string,
    mode: Mode,
    chunks: ColumnChunk[],
    issues: IssueOccurrences[] = [],
  ): void {
    const b = this.#batch;
    if (b.entries.length === 0) this.#timer = setTimeout(() => this.#requestFlush(), this.#o.flushIntervalMs);
    b.entries.push({ msg, delivery, workspaceId, mode, chunks, issues });
    for (const c of chunks) b.rows += c.rows;
    if (b.rows >= this.#o.maxRows) this.#requestFlush();
  }

  /** Resolves when the next batch has room: the consumer waits here instead of buffering without bound. */
  async waitForRoom(): Promise<void> {
    while (this.#batch.rows >= this.#o.maxRows && this.#flushing) {
      await new Promise<void>((r) => this.#roomWaiters.push(r));
    }
  }

  /** Flushes whatever is pending and waits for every flush to finish (shutdown, tests). */
  async flush(): Promise<void> {
    this.#requestFlush();
    while (this.#flushing) await this.#flushing;
  }

  #requestFlush(): void {
    if (this.#flushing) {
      this.#again = true;
      return;
    }
    this.#flushing = this.#run().finally(() => {
      this.#flushing = null;
      for (const w of this.#roomWaiters.splice(0)) w();
    });
  }

  async #run(): Promise<void> {
    do {
      this.#again = false;
      if (this.#timer) clearTimeout(this.#timer);
      this.#timer = null;
      const batch = this.#batch;
      this.#batch = { entries: [], rows: 0 };
      for (const w of this.#roomWaiters.splice(0)) w();
      if (batch.entries.length > 0) await this.#write(batch.entries);
    } while (this.#again || this.#batch.rows >= this.#o.maxRows);
  }

  /**
   * Acks (or naks) a batch's messages in stream order, not in the order their parses finished. nats-server 2.9's file
   * store treats an ack of any message but a block's first live one as an out-of-order delete, and after one rewrites
   * the block (reading it back from disk when its cache expired) once less than a quarter of it is live: with parse
   * workers swapping neighbours, that was 14 % of the broker's CPU in a profile of the ingest benchmark (its pprof
   * endpoint), 2 % after.
   */
  #settle(entries: BatchEntry[], how: 'ack' | 'nak'): void {
    for (const e of [...entries].sort((a, b) => a.delivery.seq - b.delivery.seq)) {
      if (how === 'ack') e.msg.ack();
      else e.msg.nak(retryDelayMs(e.msg.info.deliveryCount));
      this.#o.onSettled(e.msg);
    }
  }

  async #write(all: BatchEntry[]): Promise<void> {
    const started = performance.now();
    let stats: WriteStats = { files: 0, rows: 0, bytes: 0, executions: 0 };
    let entries = all;
    let claimed: ClaimedBatch | null = null;
    try {
      // A message this process held too long may have been redelivered to another process and committed
      // there (or be being committed there now), and a resend may reach the stream again after a broker
      // restart: the rows of a request already committed, or of a second copy in this batch, must not be written
      // a second time.
      claimed = await this.#o.claim(all.map((e) => e.delivery));
      const { committed, contested } = claimed;
      if (committed.size + contested.size > 0) {
        this.#settle(
          all.filter((e) => committed.has(e.delivery.seq)),
          'ack',
        );
        this.#settle(
          all.filter((e) => contested.has(e.delivery.seq)),
          'nak',
        );
        entries = all.filter((e) => !committed.has(e.delivery.seq) && !contested.has(e.delivery.seq));
      }
      const parts = new Map<string, PartitionBatch>();
      for (const e of entries) {
        for (const c of e.chunks) {
          const key = `${c.dataset}|${e.workspaceId}|${e.mode}|${c.hour}`;
          let part = parts.get(key);
          if (!part) {
            part = { dataset: c.dataset, workspaceId: e.workspaceId, mode: e.mode, hour: c.hour, chunks: [] };
            parts.set(key, part);
          }
          part.chunks.push(c);
        }
      }
      const ready = entries.some((e) => e.issues.length > 0) ? this.#o.beforeCommit?.(entries) : undefined;
      if (parts.size > 0) {
        stats = await this.#o.writer.write(
          [...parts.values()],
          entries.map((e) => e.delivery),
          ready,
          claimed,
        );
      } else {
        await ready;
        claimed.release();
      }
    } catch (err) {
      // Given up, or published with its renames unfinished (the journal then holds it: releasing is harmless).
      claimed?.release();
      // Nothing was committed: the messages come back and are processed again.
      if (err instanceof Fenced) {
        // This process stalled past its claims; another took the messages over. Not a failure of the batch.
        this.#o.log.warn(
          { messages: entries.length, reason: err.message },
          'batch fenced; messages will come again',
        );
      } else {
        this.#o.log.error(
          { err, messages: entries.length },
          'batch write failed; messages will be redelivered',
        );
        this.#o.onFailed?.(err);
      }
      this.#settle(entries, 'nak');
      return;
    }
    if (stats.files > 0) {
      try {
        await this.#o.afterCommit?.();
      } catch (err) {
        // The test seam simulating a crash between commit and ack: the acks are never sent.
        this.#o.log.error({ err }, 'stopped after commit, before ack');
        return;
      }
    }
    this.#settle(entries, 'ack');
    const ms = performance.now() - started;
    this.#o.onFlushed?.({ ...stats, messages: entries.length, ms });
    this.#o.log.debug({ ...stats, messages: entries.length, ms: Math.round(ms) }, 'batch flushed');
  }
}
