import type { JsMsg } from '@nats-io/jetstream';
import type { Mode } from '../schemas/records.js';
import type { BatchWriter, PartitionBatch, WriteStats } from '../storage/batch-writer.js';
import type { ColumnChunk } from '../storage/columns.js';

export interface BatcherLog {
  error(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}

export interface BatcherOptions {
  writer: BatchWriter;
  maxRows: number;
  flushIntervalMs: number;
  log: BatcherLog;
  onFlushed?: (stats: WriteStats & { messages: number; ms: number }) => void;
  /** Test seam: runs after a batch is committed and before its messages are acked. */
  afterCommit?: () => Promise<void> | void;
}

interface Batch {
  parts: Map<string, PartitionBatch>;
  messages: JsMsg[];
  rows: number;
}

const emptyBatch = (): Batch => ({ parts: new Map(), messages: [], rows: 0 });

/**
 * Gathers parsed messages and flushes them, on size or on a timer, as one commit. Flushes never overlap; the
 * messages of a batch are acked only after its files are committed, and a message's rows are never split
 * between two batches.
 */
export class Batcher {
  readonly #o: BatcherOptions;
  #batch = emptyBatch();
  #timer: NodeJS.Timeout | null = null;
  #flushing: Promise<void> | null = null;
  #again = false;
  #roomWaiters: (() => void)[] = [];

  constructor(opts: BatcherOptions) {
    this.#o = opts;
  }

  get pendingRows(): number {
    return this.#batch.rows;
  }

  add(msg: JsMsg, workspaceId: string, mode: Mode, chunks: ColumnChunk[]): void {
    const b = this.#batch;
    if (b.messages.length === 0)
      this.#timer = setTimeout(() => this.#requestFlush(), this.#o.flushIntervalMs);
    b.messages.push(msg);
    for (const c of chunks) {
      const key = `${c.dataset}|${workspaceId}|${mode}|${c.hour}`;
      let part = b.parts.get(key);
      if (!part) {
        part = { dataset: c.dataset, workspaceId, mode, hour: c.hour, chunks: [] };
        b.parts.set(key, part);
      }
      part.chunks.push(c);
      b.rows += c.rows;
    }
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
      this.#batch = emptyBatch();
      for (const w of this.#roomWaiters.splice(0)) w();
      if (batch.messages.length > 0) await this.#write(batch);
    } while (this.#again || this.#batch.rows >= this.#o.maxRows);
  }

  async #write(batch: Batch): Promise<void> {
    const started = performance.now();
    let stats: WriteStats = { files: 0, rows: 0, bytes: 0 };
    if (batch.parts.size > 0) {
      try {
        stats = await this.#o.writer.write(
          [...batch.parts.values()],
          batch.messages.map((m) => m.seq),
        );
      } catch (err) {
        // Nothing was committed: the messages come back and are processed again.
        this.#o.log.error(
          { err, messages: batch.messages.length },
          'batch write failed; messages will be redelivered',
        );
        for (const m of batch.messages) m.nak(1000);
        return;
      }
      try {
        await this.#o.afterCommit?.();
      } catch (err) {
        // The test seam simulating a crash between commit and ack: the acks are never sent.
        this.#o.log.error({ err }, 'stopped after commit, before ack');
        return;
      }
    }
    for (const m of batch.messages) m.ack();
    const ms = performance.now() - started;
    this.#o.onFlushed?.({ ...stats, messages: batch.messages.length, ms });
    this.#o.log.debug({ ...stats, messages: batch.messages.length, ms: Math.round(ms) }, 'batch flushed');
  }
}
