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
 * A string column's Arrow offsets and UTF-8 bytes. The common column is all ASCII: its UTF-8 is its Latin-1,
 * byte for byte, so the strings are joined and written with one call and their offsets are their lengths;
 * one call per string (two, with the byte length) cost a fifth of the parse worker's time. Any other column
 * is written string by string, in one pass.
 */
export function utf8Column(values: readonly CellValue[]): { offsets: Int32Array; data: Uint8Array } {
  const n = values.length;
  const offsets = new Int32Array(n + 1);
  let text = '';
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (typeof v === 'string') text += v;
    offsets[i + 1] = text.length;
  }
  // Own ArrayBuffer (not Node's shared pool) so it can be transferred.
  if (!NON_ASCII_RE.test(text)) {
    const buf = Buffer.allocUnsafeSlow(text.length);
    buf.write(text, 0, 'latin1');
    return { offsets, data: new Uint8Array(buf.buffer, buf.byteOffset, text.length) };
  }
  // One pass: each string is encoded into the scratch buffer (room for its worst case, 3 bytes per UTF-16 unit),
  // then the bytes are copied once into an ArrayBuffer of their own.
  let at = 0;
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (typeof v === 'string' && v.length > 0) {
      if (at + v.length * 3 > scratch.length) growScratch(at, at + v.length * 3);
      at += scratch.write(v, at, 'utf8');
    }
    offsets[i + 1] = at;
  }
  const data = new Uint8Array(at);
  data.set(scratch.subarray(0, at));
  return { offsets, data };
}

/** Encoding space for non-ASCII string columns, reused (each worker thread has its own module instance). */
let scratch = Buffer.allocUnsafeSlow(1 << 16);

function growScratch(keep: number, need: number): void {
  const next = Buffer.allocUnsafeSlow(Math.max(scratch.length * 2, need));
  scratch.copy(next, 0, 0, keep);
  scratch = next;
}

function buildColumn(type: ColumnType, values: CellValue[], nullable: boolean): ColumnData {
  const n = values.length;
  let valid: Uint8Array | null = null;
  if (nullable) {
    for (let i = 0; i < n; i++) {
      if (values[i] === null) {
        valid ??= new Uint8Array(n).fill(1);
        valid[i] = 0;
      }
    }
  }
  switch (type) {
    case 'utf8':
      return { t: 'utf8', ...utf8Column(values), valid };
    case 'i32': {
      const out = new Int32Array(n);
      for (let i = 0; i < n; i++) out[i] = (values[i] as number | null) ?? 0;
      return { t: 'i32', values: out, valid };
    }
    case 'bool': {
      const out = new Uint8Array(n);
      for (let i = 0; i < n; i++) out[i] = values[i] ? 1 : 0;
      return { t: 'bool', values: out, valid };
    }
    default: {
      const out = new Float64Array(n);
      for (let i = 0; i < n; i++) out[i] = (values[i] as number | null) ?? 0;
      return { t: type, values: out, valid };
    }
  }
}

/** Groups rows by (dataset, hour) and turns each group into a ColumnChunk. */
export class ChunkSet {
  readonly #parts = new Map<string, { dataset: DatasetName; hour: number; builder: PartitionBuilder }>();
  readonly #extra: Partial<Record<DatasetName, ColumnDef[]>>;

  /** `extra`: per dataset, columns every row of it gets after the fixed ones (cells in that order). */
  constructor(extra: Partial<Record<DatasetName, ColumnDef[]>> = {}) {
    this.#extra = extra;
  }

  /** `cells` in the dataset's column order (then its extra columns); `at` (epoch ms) picks the partition. */
  add(dataset: DatasetName, at: number, cells: CellValue[]): void {
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
    const b = part.builder;
    for (let c = 0; c < b.cells.length; c++) b.cells[c]!.push(cells[c] ?? null);
    b.rows++;
  }

  finish(): ColumnChunk[] {
    const out: ColumnChunk[] = [];
    for (const { dataset, hour, builder } of this.#parts.values()) {
      const columns = builder.defs.map((def, c) => buildColumn(def.type, builder.cells[c]!, def.nullable));
      out.push({ dataset, hour, rows: builder.rows, ...pack(columns), extra: this.#extra[dataset] ?? [] });
    }
    return out;
  }
}

type Arr = Int32Array | Float64Array | Uint8Array;

/** The columns' arrays copied into one buffer, each at an 8-byte boundary (a Float64Array view needs it). */
export function pack(columns: ColumnData[]): { buffer: ArrayBuffer; layout: Int32Array } {
  const layout = new Int32Array(columns.length * LAYOUT_INTS).fill(-1);
  const arrays: (Arr | null)[] = [];
  for (const c of columns) {
    arrays.push(c.t === 'utf8' ? c.offsets : c.values, c.t === 'utf8' ? c.data : null, c.valid);
  }
  let size = 0;
  arrays.forEach((a, i) => {
    if (a === null) return;
    layout[i * 2] = size;
    layout[i * 2 + 1] = a.byteLength;
    size += (a.byteLength + 7) & ~7;
  });
  // Not zeroed first (`new ArrayBuffer` zeroed the ~1 MB of a 500-execution message's chunks before they were
  // copied over it): every byte is written below, the padding after each array included.
  const buffer = Buffer.allocUnsafeSlow(size).buffer as ArrayBuffer;
  const bytes = new Uint8Array(buffer);
  arrays.forEach((a, i) => {
    if (a === null) return;
    const at = layout[i * 2]!;
    bytes.set(new Uint8Array(a.buffer, a.byteOffset, a.byteLength), at);
    bytes.fill(0, at + a.byteLength, at + ((a.byteLength + 7) & ~7));
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
