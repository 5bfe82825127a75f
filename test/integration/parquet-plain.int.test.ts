import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CellValue, ChunkSet, type ColumnChunk, columnsOf } from '../../storage/columns.js';
import { DATASETS } from '../../storage/datasets.js';
import { QueryEngine } from '../../storage/duckdb.js';
import { encodeParquet } from '../../storage/parquet-encode.js';
import { encodePlainParquet } from '../../storage/parquet-plain.js';
import { tempDir } from '../support/env.js';

let dir: string;
let engine: QueryEngine;

beforeAll(async () => {
  dir = await tempDir('parquet-plain');
  engine = await QueryEngine.open(dir, 1);
});
afterAll(async () => {
  engine?.close();
  await fs.rm(dir, { recursive: true, force: true });
});

const T0 = Date.UTC(2026, 10, 28, 6, 0);

/** A deterministic generator, so a failure can be replayed. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/**
 * Strings of every shape the columns hold: empty, ASCII, non-ASCII (2-, 3- and 4-byte UTF-8), long (so the lengths'
 * deltas need wide miniblocks), or null where the column allows it.
 */
function text(r: () => number, nullable: boolean): string | null {
  const x = r();
  if (nullable && x < 0.2) return null;
  if (x < 0.3) return '';
  if (x < 0.5) return `é—𝄞 ${Math.floor(r() * 1e6)}`;
  if (x < 0.55) return 'x'.repeat(Math.floor(r() * 70_000));
  return `v${Math.floor(r() * 1e9).toString(36)}`;
}

/** One row of a dataset's columns (then `extra`'s), values drawn to cover each type's range and its nulls. */
function row(r: () => number, dataset: keyof typeof DATASETS, extra: number): CellValue[] {
  const cells: CellValue[] = DATASETS[dataset].map((d) => {
    if (d.nullable && r() < 0.15) return null;
    switch (d.type) {
      case 'utf8':
        return text(r, d.nullable);
      case 'ts':
        return T0 + Math.floor(r() * 3_600_000);
      case 'i64':
        return Math.floor(r() * 2 ** 45);
      case 'i32':
        return Math.floor((r() - 0.5) * 2 ** 31);
      case 'f64':
        return (r() - 0.5) * 1e6;
      default:
        return r() < 0.5;
    }
  });
  for (let e = 0; e < extra; e++) cells.push(r() < 0.3 ? null : text(r, false));
  return cells;
}

const EXTRA = (names: string[]) => names.map((name) => ({ name, type: 'utf8' as const, nullable: true }));

/** Chunks of `count` messages of up to `rows` rows; every other message has a second extra column. */
function chunksOf(dataset: keyof typeof DATASETS, count: number, rows: number, seed: number): ColumnChunk[] {
  const r = rng(seed);
  const out: ColumnChunk[] = [];
  for (let m = 0; m < count; m++) {
    const names = m % 2 === 0 ? ['ctx_s:a'] : ['ctx_s:a', 'ctx_s:b'];
    const set = new ChunkSet({ [dataset]: EXTRA(names) });
    const n = 1 + Math.floor(r() * rows);
    for (let i = 0; i < n; i++) set.add(dataset, T0, row(r, dataset, names.length));
    out.push(...set.finish());
  }
  return out;
}

async function write(name: string, bytes: Uint8Array): Promise<string> {
  const file = path.join(dir, name);
  await fs.writeFile(file, bytes);
  return file;
}

/** Rows in one file and not the other, both ways (a multiset difference), and each file's row count. */
async function difference(a: string, b: string) {
  const count = async (sql: string) =>
    Number((await engine.all(`SELECT count(*)::DOUBLE AS n FROM (${sql})`, { a, b }))[0]!.n);
  return {
    onlyA: await count('SELECT * FROM read_parquet($a) EXCEPT ALL SELECT * FROM read_parquet($b)'),
    onlyB: await count('SELECT * FROM read_parquet($b) EXCEPT ALL SELECT * FROM read_parquet($a)'),
    rowsA: await count('SELECT * FROM read_parquet($a)'),
    rowsB: await count('SELECT * FROM read_parquet($b)'),
  };
}

describe('the flush files written directly (storage/parquet-plain.ts)', () => {
  for (const dataset of Object.keys(DATASETS) as (keyof typeof DATASETS)[]) {
    it(`hold exactly the rows parquet-wasm writes, with its schema: ${dataset}`, async () => {
      const chunks = chunksOf(dataset, 12, 300, dataset.length * 7919);
      const rows = chunks.reduce((s, c) => s + c.rows, 0);
      const reference = await write(
        `${dataset}-wasm.parquet`,
        encodeParquet(dataset, chunks, 'snappy', false),
      );
      // Row groups of 500 rows: several per file, cut at chunk boundaries.
      const plain = await write(`${dataset}-plain.parquet`, encodePlainParquet(dataset, chunks, 500));
      expect(await difference(reference, plain)).toEqual({ onlyA: 0, onlyB: 0, rowsA: rows, rowsB: rows });
      const describe = (file: string) => engine.all('DESCRIBE SELECT * FROM read_parquet($file)', { file });
      expect(await describe(plain)).toEqual(await describe(reference));
      const groups = await engine.all(
        'SELECT count(DISTINCT row_group_id)::DOUBLE AS n FROM parquet_metadata($file)',
        { file: plain },
      );
      expect(groups[0]!.n).toBeGreaterThan(1);
    });
  }

  it('give each numeric column of each row group its minimum, maximum and nulls (what pruning reads)', async () => {
    const chunks = chunksOf('executions', 10, 200, 42);
    const file = await write('stats.parquet', encodePlainParquet('executions', chunks, 100));
    const stats = await engine.all(
      `SELECT row_group_id::DOUBLE AS g, path_in_schema AS col, stats_min_value AS lo, stats_max_value AS hi,
         stats_null_count::DOUBLE AS nulls
       FROM parquet_metadata($file) WHERE path_in_schema IN ('duration_ms', 'status_code', 'ingest_seq')`,
      { file },
    );
    // The same figures from the chunks themselves, grouped as the writer groups them: consecutive chunks until a
    // group has 100 rows.
    const groups: ColumnChunk[][] = [];
    for (const c of chunks) {
      const last = groups.at(-1);
      if (!last || last.reduce((s, x) => s + x.rows, 0) >= 100) groups.push([c]);
      else last.push(c);
    }
    expect(groups.length).toBeGreaterThan(1);
    const at = (name: string) => DATASETS.executions.findIndex((d) => d.name === name);
    groups.forEach((group, g) => {
      for (const [name, format] of [
        ['duration_ms', (v: number) => v],
        ['status_code', (v: number) => v],
        ['ingest_seq', (v: number) => v],
      ] as const) {
        const values: number[] = [];
        let nulls = 0;
        for (const c of group) {
          const col = columnsOf(c)[at(name)]!;
          if (col.t === 'utf8') throw new Error('numeric column expected');
          for (let i = 0; i < c.rows; i++) {
            if (col.valid && col.valid[i] === 0) nulls++;
            else values.push(col.values[i]!);
          }
        }
        const s = stats.find((x) => x.g === g && x.col === name)!;
        expect([Number(s.lo), Number(s.hi), s.nulls]).toEqual([
          format(Math.min(...values)),
          format(Math.max(...values)),
          nulls,
        ]);
      }
    });
  });

  it('merge with files of the other writer and with DuckDB-written ones by name', async () => {
    const a = chunksOf('logs', 4, 100, 7);
    const b = chunksOf('logs', 4, 100, 8);
    const plain = await write('mix-plain.parquet', encodePlainParquet('logs', a));
    const wasm = await write('mix-wasm.parquet', encodeParquet('logs', b, 'snappy', false));
    const merged = path.join(dir, 'mix-merged.parquet');
    await engine.all(
      `COPY (SELECT * FROM read_parquet([$plain, $wasm], union_by_name = true)) TO '${merged}' (FORMAT parquet)`,
      { plain, wasm },
    );
    const rows = a.reduce((s, c) => s + c.rows, 0) + b.reduce((s, c) => s + c.rows, 0);
    const n = await engine.all(
      `SELECT count(*)::DOUBLE AS n, count("ctx_s:b")::DOUBLE AS b FROM read_parquet([$plain, $wasm, $merged], union_by_name = true)`,
      { plain, wasm, merged },
    );
    expect(n[0]!.n).toBe(rows * 2);
    expect(n[0]!.b).toBeGreaterThan(0);
  });
});
