import { HOUR_MS } from '../schemas/time.js';
import type { ColumnDef, ColumnType, DatasetName } from './datasets.js';
import { DATASETS } from './datasets.js';

/**
 * Column chunks: the rows of one dataset partition that one ingest message produced, as typed arrays. Workers
 * build them and move (transfer) their buffers; nothing on the main thread walks rows.
 */

export type ColumnData =
  | { t: 'utf8'; offsets: Int32Array; data: Uint8Array; valid: Uint8Array | null }
  | { t: 'f64' | 'ts' | 'i64'; values: Float64Array; valid: Uint8Array | null }
  | { t: 'i32'; values: Int32Array; valid: Uint8Array | null }
  | { t: 'bool'; values: Uint8Array; valid: Uint8Array | null };

export interface ColumnChunk {
  dataset: DatasetName;
  /** Start of the UTC hour the rows fall in (epoch ms): the partition. */
  hour: number;
  rows: number;
  /**
   * Every array of every column, back to back: one buffer to move between threads per chunk, and a handful of
   * objects for postMessage to clone, where separate arrays made a flush's task thousands of each (measured:
   * 20 ms of the main thread per 30,000 executions). `columnsOf` gives the columns back as views.
   */
  buffer: ArrayBuffer;
  /** Per column (the dataset's, then `extra`'s), LAYOUT_INTS byte positions in `buffer`; see `pack`. */
  layout: Int32Array;
  /** Columns beyond the dataset's fixed ones (indexed context), which differ from workspace to workspace. */
  extra: ColumnDef[];
}

/** Per column: values (or utf8 offsets) at, bytes; utf8 data at, bytes; validity at, bytes (at -1: none). */
const LAYOUT_INTS = 6;

export type CellValue = string | number | boolean | null;

/** Accumulates rows of one dataset partition, column by column. */
class PartitionBuilder {
  readonly cells: CellValue[][];
  rows = 0;
  constructor(readonly defs: readonly ColumnDef[]) {
    this.cells = defs.map(() => []);
  }
}

// Any UTF-16 code unit that is not ASCII (lone surrogates included).
const NON_ASCII_RE = /[\u0080-\uffff]/;

/**
 * A string column, measured: the common column is all ASCII, its UTF-8 is its Latin-1 byte for byte, so its
 * strings are joined (`ascii`) to be written with one call, and their offsets are their lengths; one call per
 * string (two, with the byte length) cost a fifth of the parse worker's time. Any other column is encoded string
 * by string, in one pass, into bytes of its own (`encoded`). The offsets and whether a cell is null come from the
 * same pass over the cells as the joining (a pass each had cost ~0.1 µs per execution of the parse stage).
 */
interface SizedUtf8 {
  ascii: string | null;
  bytes: number;
  /** The column's offsets, values.length + 1 of them. */
  offsets: Int32Array;
  /** With `ascii` null: the column's UTF-8 bytes. */
  encoded: Uint8Array | null;
  hasNull: boolean;
}

function sizeUtf8(values: readonly CellValue[]): SizedUtf8 {
  const offsets = new Int32Array(values.length + 1);
  let text = '';
  let at = 0;
  let hasNull = false;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (typeof v === 'string') {
      text += v;
      at += v.length;
    } else if (v === null) hasNull = true;
    offsets[i + 1] = at;
  }
  if (!NON_ASCII_RE.test(text)) return { ascii: text, bytes: at, offsets, encoded: null, hasNull };
  // Each string is encoded into the scratch buffer (room for its worst case, 3 bytes per UTF-16 unit), then the
  // bytes are copied once into an array of their own (the scratch serves the next column).
  at = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (typeof v === 'string' && v.length > 0) {
      if (at + v.length * 3 > scratch.length) growScratch(at, at + v.length * 3);
      at += scratch.write(v, at, 'utf8');
    }
    offsets[i + 1] = at;
  }
  // A copy (Buffer#slice would be a view of the scratch, which the next column overwrites).
  return { ascii: null, bytes: at, offsets, encoded: new Uint8Array(scratch.subarray(0, at)), hasNull };
}

/** Writes a measured string column's UTF-8 bytes. */
function writeUtf8(s: SizedUtf8, data: Buffer): void {
  if (s.ascii === null) data.set(s.encoded!);
  else data.write(s.ascii, 0, s.bytes, 'latin1');
}

/** A string column's Arrow offsets and UTF-8 bytes, in arrays of their own (the chunks write theirs in place). */
export function utf8Column(values: readonly CellValue[]): { offsets: Int32Array; data: Uint8Array } {
  const s = sizeUtf8(values);
  // Own ArrayBuffer (not Node's shared pool) so it can be transferred.
  const data = Buffer.allocUnsafeSlow(s.bytes);
  writeUtf8(s, data);
  return { offsets: s.offsets, data: new Uint8Array(data.buffer, data.byteOffset, s.bytes) };
}

/** Encoding space for non-ASCII string columns, reused (each worker thread has its own module instance). */
let scratch = Buffer.allocUnsafeSlow(1 << 16);

function growScratch(keep: number, need: number): void {
  const next = Buffer.allocUnsafeSlow(Math.max(scratch.length * 2, need));
  scratch.copy(next, 0, 0, keep);
  scratch = next;
}

/** Groups rows by (dataset, hour) and turns each group into a ColumnChunk. */
export class ChunkSet {
  readonly #parts = new Map<string, { dataset: DatasetName; hour: number; builder: PartitionBuilder }>();
  readonly #extra: Partial<Record<DatasetName, ColumnDef[]>>;
  #last: { dataset: DatasetName; hour: number; builder: PartitionBuilder } | null = null;

  /** `extra`: per dataset, columns every row of it gets after the fixed ones (cells in that order). */
  constructor(extra: Partial<Record<DatasetName, ColumnDef[]>> = {}) {
    this.#extra = extra;
  }

  /** `cells` in the dataset's column order (then its extra columns); `at` (epoch ms) picks the partition. */
  add(dataset: DatasetName, at: number, cells: CellValue[]): void {
    const b = this.#builder(dataset, at);
    for (let c = 0; c < b.cells.length; c++) b.cells[c]!.push(cells[c] ?? null);
    b.rows++;
  }

  /**
   * A new row of `dataset` at `at`: its partition's columns, for the caller to push exactly one cell to each, in
   * order (pipeline/to-columns.ts), without a row's array of cells between.
   */
  row(dataset: DatasetName, at: number): CellValue[][] {
    const b = this.#builder(dataset, at);
    b.rows++;
    return b.cells;
  }

  /** The partition's builder for a row of `dataset` at `at`; the last one used is looked up without the map. */
  #builder(dataset: DatasetName, at: number): PartitionBuilder {
    const last = this.#last;
    if (last !== null && last.dataset === dataset && at >= last.hour && at < last.hour + HOUR_MS)
      return last.builder;
    const hour = Math.floor(at / HOUR_MS) * HOUR_MS;
    const key = `${dataset}/${hour}`;
    let part = this.#parts.get(key);
    if (!part) {
      part = {
        dataset,
        hour,
        builder: new PartitionBuilder([...DATASETS[dataset], ...(this.#extra[dataset] ?? [])]),
      };
      this.#parts.set(key, part);
    }
    this.#last = part;
    return part.builder;
  }

  finish(): ColumnChunk[] {
    const out: ColumnChunk[] = [];
    for (const { dataset, hour, builder } of this.#parts.values()) {
      const columns = builder.defs.map((def, c) => {
        const values = builder.cells[c]!;
        // A writer of `row()` that pushed a cell too many or too few would shift the column against the others.
        if (values.length !== builder.rows)
          throw new Error(`${dataset}.${def.name}: ${values.length} cells for ${builder.rows} rows`);
        return { type: def.type, nullable: def.nullable, values };
      });
      out.push({ dataset, hour, rows: builder.rows, ...pack(columns), extra: this.#extra[dataset] ?? [] });
    }
    return out;
  }
}

/** One column's cells, in row order, with its definition's type. */
interface ColumnCells {
  type: ColumnType;
  nullable: boolean;
  values: readonly CellValue[];
}

/** Bytes per value of a fixed-width column. */
const WIDTH: Record<Exclude<ColumnType, 'utf8'>, number> = { f64: 8, ts: 8, i64: 8, i32: 4, bool: 1 };

const padded = (bytes: number) => (bytes + 7) & ~7;

/**
 * The columns' arrays written straight into one buffer, each at an 8-byte boundary (a Float64Array view needs
 * it): first every array is measured (a string column's strings joined, a nullable column's nulls looked for),
 * then the buffer is made and each array written in place, where each column was written into arrays of its own
 * and copied. That copy was 3.8 % of a parse thread's perf samples under the ingest benchmark; the parse stage
 * alone in a worker thread (`npm run bench -- parse`) measured no difference either way (five pairs, median
 * ratio 1.00), so this saves a copy and ~1 MB of allocations per message, not measurable CPU.
 */
function pack(columns: readonly ColumnCells[]): { buffer: ArrayBuffer; layout: Int32Array } {
  // Per column three slots (values or offsets, string bytes, validity), each (byte position, bytes); -1: none.
  const layout = new Int32Array(columns.length * LAYOUT_INTS).fill(-1);
  const strings: (SizedUtf8 | null)[] = [];
  let size = 0;
  const place = (slot: number, bytes: number) => {
    layout[slot * 2] = size;
    layout[slot * 2 + 1] = bytes;
    size += padded(bytes);
  };
  // Where a slot's array starts (-1: none) and its bytes, as columnsOf reads them.
  const at = (slot: number) => layout[slot * 2]!;
  const bytesOf = (slot: number) => layout[slot * 2 + 1]!;
  columns.forEach((c, k) => {
    const n = c.values.length;
    if (c.type === 'utf8') {
      const s = sizeUtf8(c.values);
      strings.push(s);
      place(k * 3, (n + 1) * 4);
      place(k * 3 + 1, s.bytes);
    } else {
      strings.push(null);
      place(k * 3, n * WIDTH[c.type]);
    }
    if (c.nullable && (c.type === 'utf8' ? strings[k]!.hasNull : c.values.includes(null)))
      place(k * 3 + 2, n);
  });
  // Not zeroed first: every byte is written below, the padding after each array included.
  // An ArrayBuffer of its own (not Node's shared pool), to be transferred: the layout's positions are in it.
  const bytes = Buffer.allocUnsafeSlow(size);
  const buffer = bytes.buffer as ArrayBuffer;
  // The padding after each array (0–7 bytes) zeroed by hand: Buffer#fill's checks and native call cost more than
  // the rest of the pack (7 % of the parse stage's profile, for about a hundred calls a message).
  const zero = new Uint8Array(buffer);
  for (let slot = 0; slot * 2 < layout.length; slot++)
    if (at(slot) >= 0)
      for (let i = at(slot) + bytesOf(slot), end = at(slot) + padded(bytesOf(slot)); i < end; i++)
        zero[i] = 0;
  columns.forEach((c, k) => {
    const values = c.values;
    const n = values.length;
    const main = at(k * 3);
    switch (c.type) {
      case 'utf8':
        new Int32Array(buffer, main, n + 1).set(strings[k]!.offsets);
        writeUtf8(strings[k]!, Buffer.from(buffer, at(k * 3 + 1), bytesOf(k * 3 + 1)));
        break;
      case 'i32': {
        const out = new Int32Array(buffer, main, n);
        for (let i = 0; i < n; i++) out[i] = (values[i] as number | null) ?? 0;
        break;
      }
      case 'bool': {
        const out = new Uint8Array(buffer, main, n);
        for (let i = 0; i < n; i++) out[i] = values[i] ? 1 : 0;
        break;
      }
      default: {
        const out = new Float64Array(buffer, main, n);
        for (let i = 0; i < n; i++) out[i] = (values[i] as number | null) ?? 0;
      }
    }
    if (at(k * 3 + 2) >= 0) {
      const valid = new Uint8Array(buffer, at(k * 3 + 2), n);
      for (let i = 0; i < n; i++) valid[i] = values[i] === null ? 0 : 1;
    }
  });
  return { buffer, layout };
}

/** A chunk's columns, as views into its buffer, typed by the dataset's column definitions. */
export function columnsOf(chunk: ColumnChunk): ColumnData[] {
  const defs = [...DATASETS[chunk.dataset], ...chunk.extra];
  const { buffer, layout } = chunk;
  const view = (slot: number) => {
    const at = layout[slot * 2]!;
    return at < 0 ? null : { at, bytes: layout[slot * 2 + 1]! };
  };
  return defs.map((def, c): ColumnData => {
    const main = view(c * 3)!;
    const v = view(c * 3 + 2);
    const valid = v ? new Uint8Array(buffer, v.at, v.bytes) : null;
    switch (def.type) {
      case 'utf8': {
        const d = view(c * 3 + 1)!;
        return {
          t: 'utf8',
          offsets: new Int32Array(buffer, main.at, main.bytes / 4),
          data: new Uint8Array(buffer, d.at, d.bytes),
          valid,
        };
      }
      case 'i32':
        return { t: 'i32', values: new Int32Array(buffer, main.at, main.bytes / 4), valid };
      case 'bool':
        return { t: 'bool', values: new Uint8Array(buffer, main.at, main.bytes), valid };
      default:
        return { t: def.type, values: new Float64Array(buffer, main.at, main.bytes / 8), valid };
    }
  });
}

/** The buffer a chunk owns: handed to the worker transfer list so it moves instead of being copied. */
export function chunkBuffers(chunk: ColumnChunk): ArrayBuffer[] {
  return [chunk.buffer];
}
