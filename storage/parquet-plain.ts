import { type ColumnChunk, type ColumnData, columnsOf } from './columns.js';
import { type ColumnDef, DATASETS, type DatasetName } from './datasets.js';

/**
 * Column chunks → Parquet bytes, written directly: PLAIN values, no compression, one data page per column and
 * row group. The files each flush writes live until the next merge (storage/compaction.ts, DuckDB's own writer,
 * compressed), so they need to be cheap to write and quick to read, not small. Against parquet-wasm (Arrow
 * record batch → IPC → wasm → parquet-rs, Snappy) this skips three copies and every encoding step: the chunks'
 * typed arrays are laid out once, value by value, into the output. The schema is parquet-wasm's, type for type
 * (strings UTF8, timestamps TIMESTAMP_MILLIS not adjusted to UTC, sequence numbers INT64), so DuckDB reads
 * both kinds of file, and the merged ones, as one table. Numeric columns carry min/max statistics (pruning).
 */

/** A file's rows are split into row groups of about this many (at chunk boundaries). */
const ROW_GROUP_ROWS = 122_880;

// parquet.thrift's enums.
const TYPE = { BOOLEAN: 0, INT32: 1, INT64: 2, DOUBLE: 5, BYTE_ARRAY: 6 } as const;
const REQUIRED = 0;
const OPTIONAL = 1;
const CONVERTED_UTF8 = 0;
const CONVERTED_TIMESTAMP_MILLIS = 9;
const ENCODING_PLAIN = 0;
const ENCODING_RLE = 3;
const ENCODING_DELTA_LENGTH_BYTE_ARRAY = 6;
const CODEC_UNCOMPRESSED = 0;
const PAGE_DATA = 0;

// Thrift compact protocol's field types.
const T_TRUE = 1;
const T_FALSE = 2;
const T_I32 = 5;
const T_I64 = 6;
const T_BINARY = 8;
const T_LIST = 9;
const T_STRUCT = 12;

const physicalType = (def: ColumnDef): number =>
  def.type === 'utf8'
    ? TYPE.BYTE_ARRAY
    : def.type === 'bool'
      ? TYPE.BOOLEAN
      : def.type === 'i32'
        ? TYPE.INT32
        : def.type === 'f64'
          ? TYPE.DOUBLE
          : TYPE.INT64;

if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1)
  throw new Error('parquet-plain needs a little-endian host');

/** Thrift compact protocol, the encoding of Parquet's footer and page headers. */
class Thrift {
  bytes = new Uint8Array(256);
  at = 0;
  #last: number[] = [0];

  #room(n: number): void {
    if (this.at + n <= this.bytes.length) return;
    const next = new Uint8Array(Math.max(this.bytes.length * 2, this.at + n));
    next.set(this.bytes.subarray(0, this.at));
    this.bytes = next;
  }
  #byte(b: number): void {
    this.#room(1);
    this.bytes[this.at++] = b;
  }
  #varint(n: number): void {
    this.#room(10);
    this.at = uleb(this.bytes, this.at, n);
  }
  #zigzag(n: number): void {
    this.#varint(n >= 0 ? n * 2 : -n * 2 - 1);
  }
  #field(id: number, type: number): void {
    const last = this.#last[this.#last.length - 1]!;
    const delta = id - last;
    if (delta > 0 && delta <= 15) this.#byte((delta << 4) | type);
    else {
      this.#byte(type);
      this.#zigzag(id);
    }
    this.#last[this.#last.length - 1] = id;
  }
  i32(id: number, v: number): this {
    this.#field(id, T_I32);
    this.#zigzag(v);
    return this;
  }
  i64(id: number, v: number): this {
    this.#field(id, T_I64);
    this.#zigzag(v);
    return this;
  }
  bool(id: number, v: boolean): this {
    this.#field(id, v ? T_TRUE : T_FALSE);
    return this;
  }
  binary(id: number, v: Uint8Array): this {
    this.#field(id, T_BINARY);
    this.#varint(v.length);
    this.#room(v.length);
    this.bytes.set(v, this.at);
    this.at += v.length;
    return this;
  }
  string(id: number, v: string): this {
    return this.binary(id, Buffer.from(v, 'utf8'));
  }
  /** A struct field; `body` writes its fields. */
  struct(id: number, body: (t: this) => void): this {
    this.#field(id, T_STRUCT);
    this.#last.push(0);
    body(this);
    this.#byte(0);
    this.#last.pop();
    return this;
  }
  #listHeader(id: number, size: number, elem: number): void {
    this.#field(id, T_LIST);
    if (size < 15) this.#byte((size << 4) | elem);
    else {
      this.#byte(0xf0 | elem);
      this.#varint(size);
    }
  }
  i32List(id: number, values: number[]): this {
    this.#listHeader(id, values.length, T_I32);
    for (const v of values) this.#zigzag(v);
    return this;
  }
  stringList(id: number, values: string[]): this {
    this.#listHeader(id, values.length, T_BINARY);
    for (const v of values) {
      const b = Buffer.from(v, 'utf8');
      this.#varint(b.length);
      this.#room(b.length);
      this.bytes.set(b, this.at);
      this.at += b.length;
    }
    return this;
  }
  structList<T>(id: number, items: readonly T[], body: (t: this, item: T) => void): this {
    this.#listHeader(id, items.length, T_STRUCT);
    for (const item of items) {
      this.#last.push(0);
      body(this, item);
      this.#byte(0);
      this.#last.pop();
    }
    return this;
  }
  /** Ends the top-level struct. */
  end(): Uint8Array {
    this.#byte(0);
    return this.bytes.subarray(0, this.at);
  }
}

/** One column's rows within a row group: slices of the chunks' columns, in order. */
type Parts = { column: ColumnData | null; rows: number }[];

const isValid = (c: ColumnData | null, i: number) => c !== null && (c.valid === null || c.valid[i] === 1);

/**
 * A page's values, encoded but for the bytes of strings: the strings' lengths (DELTA_BINARY_PACKED, as
 * DELTA_LENGTH_BYTE_ARRAY begins) or nothing for other types; and how many bytes follow.
 */
interface Encoded {
  nonNull: number;
  /** Strings: their lengths, encoded. */
  lengths: Uint8Array | null;
  /** Bytes after `lengths`: the strings' bytes back to back, or the PLAIN values. */
  valueBytes: number;
}

function encodeLengths(parts: Parts, nonNull: number): Uint8Array {
  const lengths = new Int32Array(nonNull);
  let n = 0;
  for (const { column: c, rows } of parts) {
    if (c === null || c.t !== 'utf8') continue;
    const { offsets, valid } = c;
    for (let i = 0; i < rows; i++)
      if (valid === null || valid[i] === 1) lengths[n++] = offsets[i + 1]! - offsets[i]!;
  }
  return deltaBinaryPacked(lengths);
}

function encode(def: ColumnDef, parts: Parts): Encoded {
  let nonNull = 0;
  let strBytes = 0;
  for (const { column: c, rows } of parts) {
    if (c === null) continue;
    if (c.valid === null) nonNull += rows;
    else for (let i = 0; i < rows; i++) nonNull += c.valid[i]!;
    // A null string has no bytes (columns.ts): a column's bytes are its non-null strings'.
    if (c.t === 'utf8') strBytes += c.offsets[rows]! - c.offsets[0]!;
  }
  if (def.type === 'utf8') return { nonNull, lengths: encodeLengths(parts, nonNull), valueBytes: strBytes };
  const valueBytes =
    def.type === 'bool' ? (nonNull + 7) >> 3 : def.type === 'i32' ? nonNull * 4 : nonNull * 8;
  return { nonNull, lengths: null, valueBytes };
}

/** Unsigned LEB128 of a non-negative integer below 2^53 (sizes, offsets, counts: all are); returns where it ends. */
function uleb(out: Uint8Array, at: number, n: number): number {
  let p = at;
  let v = n;
  while (v >= 0x80) {
    out[p++] = (v % 0x80) | 0x80;
    v = Math.floor(v / 0x80);
  }
  out[p++] = v;
  return p;
}

const zigzag = (n: number) => (n >= 0 ? n * 2 : -n * 2 - 1);

/** Values per block and miniblocks per block of DELTA_BINARY_PACKED: the format's usual 128 and 4. */
const DELTA_BLOCK = 128;
const DELTA_MINIBLOCKS = 4;
const DELTA_MINIBLOCK = DELTA_BLOCK / DELTA_MINIBLOCKS;

/** DELTA_BINARY_PACKED (parquet-format Encodings.md) of 32-bit integers. */
export function deltaBinaryPacked(values: Int32Array): Uint8Array {
  const n = values.length;
  const blocks = Math.ceil(Math.max(0, n - 1) / DELTA_BLOCK);
  // Worst case per block: a 10-byte min delta, the widths, and every miniblock 33 bits wide. Not zeroed: what is
  // or-ed into is zeroed first.
  const out = Buffer.allocUnsafeSlow(32 + blocks * (10 + DELTA_MINIBLOCKS + DELTA_BLOCK * 5));
  let p = uleb(out, 0, DELTA_BLOCK);
  p = uleb(out, p, DELTA_MINIBLOCKS);
  p = uleb(out, p, n);
  p = uleb(out, p, zigzag(n > 0 ? values[0]! : 0));
  const deltas = new Float64Array(DELTA_BLOCK);
  for (let first = 1; first < n; first += DELTA_BLOCK) {
    const count = Math.min(DELTA_BLOCK, n - first);
    let min = Number.POSITIVE_INFINITY;
    for (let j = 0; j < count; j++) {
      const d = values[first + j]! - values[first + j - 1]!;
      deltas[j] = d;
      if (d < min) min = d;
    }
    p = uleb(out, p, zigzag(min));
    const widthsAt = p;
    // The widths of miniblocks a short last block does not need stay 0.
    out.fill(0, widthsAt, widthsAt + DELTA_MINIBLOCKS);
    p += DELTA_MINIBLOCKS;
    for (let m = 0; m * DELTA_MINIBLOCK < count; m++) {
      const from = m * DELTA_MINIBLOCK;
      const to = Math.min(count, from + DELTA_MINIBLOCK);
      let max = 0;
      for (let j = from; j < to; j++) if (deltas[j]! - min > max) max = deltas[j]! - min;
      // Deltas of int32 values less their minimum fit in 32 bits, unsigned.
      const width = max === 0 ? 0 : 32 - Math.clz32(max >>> 0);
      out[widthsAt + m] = width;
      if (width === 0) continue;
      out.fill(0, p, p + ((DELTA_MINIBLOCK * width) >> 3));
      let bit = 0;
      for (let j = from; j < to; j++) {
        let v = (deltas[j]! - min) >>> 0;
        for (let left = width; left > 0; ) {
          const take = Math.min(8 - (bit & 7), left);
          out[p + (bit >> 3)]! |= (v & ((1 << take) - 1)) << (bit & 7);
          v = v >>> take;
          left -= take;
          bit += take;
        }
      }
      // A miniblock takes its full 32 values' bits, the last one padded.
      p += (DELTA_MINIBLOCK * width) >> 3;
    }
  }
  return out.subarray(0, p);
}

/**
 * Definition levels (bit width 1) in the RLE/bit-packed hybrid, with their 4-byte length: one RLE run when every
 * value is present (or none is), else one bit-packed run.
 */
function definitionLevels(parts: Parts, rows: number, nonNull: number): Uint8Array {
  // An RLE run: its length, then the level in one byte. A bit-packed run: its count of 8-value groups, then them.
  const run = nonNull === rows || nonNull === 0;
  const bodyBytes = run ? 1 : (rows + 7) >> 3;
  const out = new Uint8Array(4 + 10 + bodyBytes);
  const at = uleb(out, 4, run ? rows * 2 : ((rows + 7) >> 3) * 2 + 1);
  new DataView(out.buffer).setInt32(0, at - 4 + bodyBytes, true);
  if (run) out[at] = nonNull === 0 ? 0 : 1;
  else {
    let row = 0;
    for (const { column: c, rows: n } of parts) {
      for (let i = 0; i < n; i++, row++) if (isValid(c, i)) out[at + (row >> 3)]! |= 1 << (row & 7);
    }
  }
  return out.subarray(0, at + bodyBytes);
}

/** Min and max of a numeric column's non-null values (the statistics). */
interface Range {
  min: number;
  max: number;
}

/**
 * Writes the non-null values of `parts` at `at`: strings' bytes back to back (their lengths went before), other
 * types PLAIN. Returns the numeric range, when there is one.
 */
function writeValues(def: ColumnDef, parts: Parts, out: Uint8Array, at: number): Range | null {
  let p = at;
  if (def.type === 'utf8') {
    for (const { column: c, rows } of parts) {
      if (c === null || c.t !== 'utf8') continue;
      const bytes = c.data.subarray(c.offsets[0]!, c.offsets[rows]!);
      out.set(bytes, p);
      p += bytes.length;
    }
    return null;
  }
  if (def.type === 'bool') {
    let bit = 0;
    for (const { column: c, rows } of parts) {
      if (c === null || c.t !== 'bool') continue;
      for (let i = 0; i < rows; i++) {
        if (c.valid !== null && c.valid[i] === 0) continue;
        // The output is not zeroed: each byte is, as its first bit is written.
        if ((bit & 7) === 0) out[p + (bit >> 3)] = 0;
        if (c.values[i]) out[p + (bit >> 3)]! |= 1 << (bit & 7);
        bit++;
      }
    }
    return null;
  }
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  for (const { column: c, rows } of parts) {
    if (c === null || c.t === 'utf8' || c.t === 'bool') continue;
    const { values, valid } = c;
    for (let i = 0; i < rows; i++) {
      if (valid !== null && valid[i] === 0) continue;
      const v = values[i]!;
      if (v < min) min = v;
      if (v > max) max = v;
    }
    if (valid === null && def.type !== 'ts' && def.type !== 'i64') {
      // PLAIN is the values' little-endian bytes: the array as it is.
      out.set(new Uint8Array(values.buffer, values.byteOffset, rows * values.BYTES_PER_ELEMENT), p);
      p += rows * values.BYTES_PER_ELEMENT;
      continue;
    }
    for (let i = 0; i < rows; i++) {
      if (valid !== null && valid[i] === 0) continue;
      const v = values[i]!;
      if (def.type === 'i32') {
        view.setInt32(p, v, true);
        p += 4;
      } else if (def.type === 'f64') {
        view.setFloat64(p, v, true);
        p += 8;
      } else {
        // Timestamps and sequence numbers travel as float64 (whole, exact below 2^53): int64 as two halves.
        const hi = Math.floor(v / 0x1_0000_0000);
        view.setUint32(p, v - hi * 0x1_0000_0000, true);
        view.setInt32(p + 4, hi, true);
        p += 8;
      }
    }
  }
  return min <= max ? { min, max } : null;
}

function statValue(def: ColumnDef, v: number): Uint8Array {
  const b = new Uint8Array(def.type === 'i32' ? 4 : 8);
  const view = new DataView(b.buffer);
  if (def.type === 'i32') view.setInt32(0, v, true);
  else if (def.type === 'f64') view.setFloat64(0, v, true);
  else view.setBigInt64(0, BigInt(v), true);
  return b;
}

/** The schema's leaf for a column, as parquet-wasm writes it. */
function schemaElement(t: Thrift, def: ColumnDef, optional: boolean): void {
  t.i32(1, physicalType(def))
    .i32(3, optional ? OPTIONAL : REQUIRED)
    .string(4, def.name);
  if (def.type === 'utf8') t.i32(6, CONVERTED_UTF8).struct(10, (l) => l.struct(1, () => {}));
  else if (def.type === 'ts')
    t.i32(6, CONVERTED_TIMESTAMP_MILLIS).struct(10, (l) =>
      l.struct(8, (ts) => ts.bool(1, false).struct(2, (u) => u.struct(1, () => {}))),
    );
}

/**
 * Strings as DELTA_LENGTH_BYTE_ARRAY: their lengths packed, then their bytes as the chunk holds them, one copy per
 * chunk, where PLAIN puts each string's length before it (one copy per value: measured 2.5× the time).
 */
const encodingOf = (def: ColumnDef) =>
  def.type === 'utf8' ? ENCODING_DELTA_LENGTH_BYTE_ARRAY : ENCODING_PLAIN;

const MAGIC = [0x50, 0x41, 0x52, 0x31]; // PAR1

/**
 * Encodes the chunks of one partition (all of one dataset) as one Parquet file's bytes, with the dataset's
 * columns and every extra column any chunk has (by name), null where a chunk lacks it.
 */
export function encodePlainParquet(
  dataset: DatasetName,
  chunks: ColumnChunk[],
  rowGroupRows = ROW_GROUP_ROWS,
): Uint8Array {
  const fixed: readonly ColumnDef[] = DATASETS[dataset];
  const extra = new Map<string, ColumnDef>();
  for (const c of chunks) for (const d of c.extra) if (!extra.has(d.name)) extra.set(d.name, d);
  const defs = [...fixed, ...extra.values()];
  const columns = chunks.map(columnsOf);
  /** Per chunk, where each of the file's extra columns is among the chunk's (-1: it lacks it). */
  const extraAt = chunks.map((c) =>
    [...extra.keys()].map((name) => c.extra.findIndex((e) => e.name === name)),
  );
  const columnOf = (k: number, i: number): ColumnData | null => {
    if (i < fixed.length) return columns[k]![i]!;
    const at = extraAt[k]![i - fixed.length]!;
    return at === -1 ? null : columns[k]![fixed.length + at]!;
  };
  // A column some chunk lacks is null there: optional in the file whatever it is in the dataset.
  const optional = defs.map((d, i) => d.nullable || extraAt.some((a) => a[i - fixed.length] === -1));
  // Row groups: consecutive chunks, cut once they reach ROW_GROUP_ROWS.
  const groups: { from: number; to: number; rows: number }[] = [];
  for (let k = 0; k < chunks.length; k++) {
    const last = groups[groups.length - 1];
    if (!last || last.rows >= rowGroupRows) groups.push({ from: k, to: k + 1, rows: chunks[k]!.rows });
    else {
      last.to = k + 1;
      last.rows += chunks[k]!.rows;
    }
  }
  // Each column chunk is one page: its header, its definition levels (optional columns), its values.
  let at = MAGIC.length;
  const pages = groups.map((g) =>
    defs.map((def, i) => {
      const parts: Parts = [];
      for (let k = g.from; k < g.to; k++) parts.push({ column: columnOf(k, i), rows: chunks[k]!.rows });
      const { nonNull, lengths, valueBytes } = encode(def, parts);
      const levels = optional[i] ? definitionLevels(parts, g.rows, nonNull) : null;
      const size = (levels?.length ?? 0) + (lengths?.length ?? 0) + valueBytes;
      const header = new Thrift()
        .i32(1, PAGE_DATA)
        .i32(2, size)
        .i32(3, size)
        .struct(5, (h) => h.i32(1, g.rows).i32(2, encodingOf(def)).i32(3, ENCODING_RLE).i32(4, ENCODING_RLE))
        .end();
      const offset = at;
      at += header.length + size;
      return {
        def,
        parts,
        levels,
        lengths,
        header,
        offset,
        size: header.length + size,
        rows: g.rows,
        nonNull,
      };
    }),
  );
  const pagesEnd = at;
  // The statistics need the values' range, known once they are written: the values go first, the footer after.
  // Every byte of it is written (allocUnsafeSlow: not zeroed, which cost the encoder a memset of the whole file).
  const out = Buffer.allocUnsafeSlow(pagesEnd + 64 * 1024);
  out.set(MAGIC, 0);
  const ranges = pages.map((g) =>
    g.map((p) => {
      out.set(p.header, p.offset);
      let v = p.offset + p.header.length;
      for (const encoded of [p.levels, p.lengths]) {
        if (!encoded) continue;
        out.set(encoded, v);
        v += encoded.length;
      }
      return writeValues(p.def, p.parts, out, v);
    }),
  );
  const footer = new Thrift()
    .i32(1, 1)
    .structList(2, [null, ...defs.keys()], (t, i) => {
      if (i === null) t.string(4, 'schema').i32(5, defs.length);
      else schemaElement(t, defs[i]!, optional[i]!);
    })
    .i64(
      3,
      groups.reduce((s, g) => s + g.rows, 0),
    )
    .structList(4, [...pages.keys()], (t, gi) => {
      const cols = pages[gi]!;
      const bytes = cols.reduce((s, c) => s + c.size, 0);
      t.structList(1, [...cols.keys()], (cc, ci) => {
        const c = cols[ci]!;
        const range = ranges[gi]![ci]!;
        cc.i64(2, c.offset).struct(3, (m) =>
          m
            .i32(1, physicalType(c.def))
            .i32List(2, [encodingOf(c.def), ENCODING_RLE])
            .stringList(3, [c.def.name])
            .i32(4, CODEC_UNCOMPRESSED)
            .i64(5, c.rows)
            .i64(6, c.size)
            .i64(7, c.size)
            .i64(9, c.offset)
            .struct(12, (s) => {
              s.i64(3, c.rows - c.nonNull);
              if (range) s.binary(5, statValue(c.def, range.max)).binary(6, statValue(c.def, range.min));
            }),
        );
      })
        .i64(2, bytes)
        .i64(3, groups[gi]!.rows)
        .i64(5, cols[0]!.offset)
        .i64(6, bytes);
    })
    .string(6, 'telemetry-service parquet-plain')
    .structList(7, defs, (t) => t.struct(1, () => {}))
    .end();
  const total = pagesEnd + footer.length + 8;
  const file = total <= out.length ? out : Buffer.allocUnsafeSlow(total);
  if (file !== out) file.set(out.subarray(0, pagesEnd));
  file.set(footer, pagesEnd);
  new DataView(file.buffer, file.byteOffset).setInt32(pagesEnd + footer.length, footer.length, true);
  file.set(MAGIC, pagesEnd + footer.length + 4);
  return file.subarray(0, total);
}
