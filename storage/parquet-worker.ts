import fs from 'node:fs/promises';
import path from 'node:path';
import type { ColumnChunk } from './columns.js';
import type { DatasetName } from './datasets.js';
import type { Codec } from './parquet-encode.js';
import { encodePlainParquet } from './parquet-plain.js';
import { nameThread } from './worker-file.js';

nameThread('svc-encode');

/** Piscina worker: encodes each partition of a batch and writes it, fsynced, under its temporary name. */

/**
 * parquet-wasm (and apache-arrow) only when a compressed codec is configured: loading them instantiates the wasm
 * module in every encoder thread, memory it never gives back, for the default codec that does not use them.
 */
let compressed: Promise<typeof import('./parquet-encode.js').encodeParquet> | null = null;
const compressedEncoder = () => {
  compressed ??= import('./parquet-encode.js').then((m) => m.encodeParquet);
  return compressed;
};

export interface EncodeTask {
  codec: Codec;
  /** Dictionary-encode columns (smaller files, more encoding work). */
  dictionary?: boolean;
  partitions: { dataset: DatasetName; tmpPath: string; chunks: ColumnChunk[] }[];
}

export interface EncodeResult {
  /** `madeDir`: the first directory the file's mkdir created (its parent's entry for it is not durable yet). */
  files: { tmpPath: string; rows: number; bytes: number; madeDir?: string }[];
}

export default async function encodeAndWrite(task: EncodeTask): Promise<EncodeResult> {
  const files: EncodeResult['files'] = [];
  for (const p of task.partitions) {
    const bytes =
      task.codec === 'uncompressed'
        ? encodePlainParquet(p.dataset, p.chunks)
        : (await compressedEncoder())(p.dataset, p.chunks, task.codec, task.dictionary ?? true);
    const madeDir = await fs.mkdir(path.dirname(p.tmpPath), { recursive: true });
    const fh = await fs.open(p.tmpPath, 'w');
    try {
      await fh.writeFile(bytes);
      await fh.sync();
    } finally {
      await fh.close();
    }
    files.push({
      tmpPath: p.tmpPath,
      rows: p.chunks.reduce((s, c) => s + c.rows, 0),
      bytes: bytes.length,
      ...(madeDir ? { madeDir } : {}),
    });
  }
  return { files };
}
