import fs from 'node:fs/promises';
import path from 'node:path';
import { Piscina } from 'piscina';
import type { Mode } from '../schemas/records.js';
import { type ColumnChunk, chunkBuffers } from './columns.js';
import { type CommitJournal, commitId, type Delivery, NotCommitted } from './commit-journal.js';
import type { DatasetName } from './datasets.js';
import { fsyncDir } from './fsync.js';
import { PARQUET_SUFFIX, partitionDir, TMP_SUFFIX } from './layout.js';
import type { Codec } from './parquet-encode.js';
import type { EncodeResult, EncodeTask } from './parquet-worker.js';
import { WORKER_EXEC_ARGV, workerFile } from './worker-file.js';

/** The rows of one partition in a batch: one Parquet file. */
export interface PartitionBatch {
  dataset: DatasetName;
  workspaceId: string;
  mode: Mode;
  hour: number;
  chunks: ColumnChunk[];
}

export interface WriteStats {
  files: number;
  rows: number;
  bytes: number;
  /** Of `rows`, the executions. */
  executions: number;
}

export interface BatchWriterOptions {
  dataDir: string;
  codec: Codec;
  /** Dictionary-encode columns (default true). */
  dictionary?: boolean;
  journal: CommitJournal;
  encodeThreads: number;
  /** Test seam: runs right before the commit point. */
  beforeCommitPoint?: () => void;
}

/**
 * Writes a batch as Parquet files (encoded in worker threads) and commits it through the journal, so the batch
 * becomes visible whole-or-nothing with respect to the stream sequences it carries.
 */
export class BatchWriter {
  readonly #opts: BatchWriterOptions;
  readonly #pool: Piscina<EncodeTask, EncodeResult>;
  /**
   * Partition directories whose every ancestor's entry this process has made durable (fsynced, up to DATA_DIR): a
   * later batch into one fsyncs the directory itself (its new file's entry) and not the 5 above it, unless its mkdir
   * made one of them again (retention removes old dates). A batch fsynced 11–15 directories, 10–160 ms of a batch
   * while a merge wrote its file. A batch that fails forgets its directories: its mkdir may have made one whose entry
   * was never fsynced, and the retry's mkdir would not say so. (A directory another process removed and made again,
   * a cluster's retention on shared storage, stays that process's to make durable.)
   */
  readonly #durableDirs = new Set<string>();

  constructor(opts: BatchWriterOptions) {
    this.#opts = opts;
    this.#pool = new Piscina({
      filename: workerFile(import.meta.url, 'parquet-worker.js'),
      execArgv: WORKER_EXEC_ARGV,
      minThreads: 1,
      maxThreads: opts.encodeThreads,
      // wasm memory never shrinks: recycle an idle encoder so a burst's peak does not stay resident.
      idleTimeout: 60_000,
    });
  }

  /**
   * `ready`: work that must succeed before the commit point (it runs meanwhile); when it fails nothing is
   * committed and the temporary files go. `commit`: the commit's number, when its messages were claimed under it,
   * and whether the claims may have lapsed (then it is not published: `CommitJournal.commit`).
   */
  async write(
    partitions: PartitionBatch[],
    deliveries: readonly Delivery[],
    ready?: Promise<void>,
    commit?: { no: number; lapsed: () => boolean },
  ): Promise<WriteStats> {
    // Awaited below; handled now so a failure before that is not an unhandled rejection.
    ready?.catch(() => {});
    const journal = this.#opts.journal;
    const commitNo = commit?.no ?? journal.nextCommitNo();
    const fileName = commitId(journal.writerId, commitNo);
    const planned = partitions.map((p) => {
      const dir = partitionDir(this.#opts.dataDir, p.dataset, p.workspaceId, p.mode, p.hour);
      return {
        part: p,
        tmpPath: path.join(dir, fileName + TMP_SUFFIX),
        finalPath: path.join(dir, fileName + PARQUET_SUFFIX),
      };
    });
    // The journal's entry is known before the files are encoded: its temporary file is written meanwhile.
    const prepared = journal.prepare({
      writerId: journal.writerId,
      commitNo,
      seqs: deliveries.map((d) => d.seq),
      ids: deliveries.map((d) => d.id),
      storedAt: deliveries.map((d) => d.storedAt),
      files: planned.map((p) => ({ tmpPath: p.tmpPath, finalPath: p.finalPath })),
    });
    const encoded = await Promise.allSettled(
      planned.map((p) =>
        this.#pool.run(
          {
            codec: this.#opts.codec,
            dictionary: this.#opts.dictionary ?? true,
            partitions: [{ dataset: p.part.dataset, tmpPath: p.tmpPath, chunks: p.part.chunks }],
          },
          { transferList: p.part.chunks.flatMap(chunkBuffers) },
        ),
      ),
    );
    // Nothing is committed when a step before the commit point fails (a full disk, a failed issue upsert): the
    // temporary files go at once, not after the orphan age, so a full disk does not fill further with retries.
    const removeTemporary = () =>
      Promise.all([journal.discard(prepared), ...planned.map((p) => fs.rm(p.tmpPath, { force: true }))]);
    try {
      for (const r of encoded) if (r.status === 'rejected') throw r.reason;
      // The temporary files are fsynced; their directory entries (and any directory mkdir just made) must be
      // durable too before the journal says they exist.
      const made = encoded.flatMap((r) =>
        (r as PromiseFulfilledResult<EncodeResult>).value.files.flatMap((f) =>
          f.madeDir ? [f.madeDir] : [],
        ),
      );
      const dirs = new Set<string>();
      const chained: string[] = [];
      for (const p of planned) {
        const dir = path.dirname(p.tmpPath);
        dirs.add(dir);
        const remade = made.some((m) => dir === m || dir.startsWith(m + path.sep));
        if (this.#durableDirs.has(dir) && !remade) continue;
        chained.push(dir);
        for (let d = path.dirname(dir); d.length > this.#opts.dataDir.length; d = path.dirname(d))
          dirs.add(d);
        dirs.add(this.#opts.dataDir);
      }
      await Promise.all([...dirs].map(fsyncDir));
      if (this.#durableDirs.size > 100_000) this.#durableDirs.clear();
      for (const d of chained) this.#durableDirs.add(d);
      await ready;
      // A journal entry that could not be written (a full disk) fails the batch here, like its files.
      await prepared.written;
      this.#opts.beforeCommitPoint?.();
    } catch (err) {
      for (const p of planned) this.#durableDirs.delete(path.dirname(p.tmpPath));
      await removeTemporary();
      throw err;
    }
    try {
      await journal.commit(prepared, commit?.lapsed);
    } catch (err) {
      // Past the commit point (only its renames failed) the files are the batch's: they stay for recovery.
      if (err instanceof NotCommitted) await removeTemporary();
      throw err;
    }
    const files = encoded.flatMap((r) => (r.status === 'fulfilled' ? r.value.files : []));
    return {
      files: files.length,
      rows: files.reduce((s, f) => s + f.rows, 0),
      bytes: files.reduce((s, f) => s + f.bytes, 0),
      executions: partitions
        .filter((p) => p.dataset === 'executions')
        .reduce((s, p) => s + p.chunks.reduce((n, c) => n + c.rows, 0), 0),
    };
  }

  async close(): Promise<void> {
    await this.#pool.destroy();
  }
}
