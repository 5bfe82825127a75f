import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type CellValue, ChunkSet, chunkBuffers, columnsOf, utf8Column } from '../../storage/columns.js';
import { type ColumnType, DATASETS } from '../../storage/datasets.js';

/** What a string column must hold: each value's UTF-8 bytes, end to end, and where each ends. */
function reference(values: readonly (string | null)[]): { offsets: number[]; data: Buffer } {
  const parts = values.map((v) => Buffer.from(v ?? '', 'utf8'));
  const offsets = [0];
  for (const part of parts) offsets.push(offsets[offsets.length - 1]! + part.length);
  return { offsets, data: Buffer.concat(parts) };
}

describe('utf8Column', () => {
  it.each([
    ['ASCII only', fc.string({ unit: 'binary-ascii', maxLength: 20 })],
    ['any text, lone surrogates included', fc.string({ unit: 'binary', maxLength: 8 })],
    [
      'ASCII and Latin-1',
      fc.string({ unit: fc.constantFrom('a', '\u007f', '\u0080', 'é', 'ÿ'), maxLength: 8 }),
    ],
  ])('gives the UTF-8 bytes and offsets of %s', (_name, text) => {
    fc.assert(
      fc.property(fc.array(fc.option(text, { nil: null }), { maxLength: 30 }), (values) => {
        const column = utf8Column(values);
        const want = reference(values);
        expect(Array.from(column.offsets)).toEqual(want.offsets);
        expect(Buffer.from(column.data)).toEqual(want.data);
        // An ArrayBuffer of its own, to be transferred.
        expect(column.data.byteLength).toBe(column.data.buffer.byteLength);
      }),
      { numRuns: 300 },
    );
  });
});

describe('chunks: one packed buffer per chunk, columns back as views', () => {
  const defs = DATASETS.logs;
  const cell = (type: ColumnType, nullable: boolean, anyText: boolean) => {
    const value =
      type === 'utf8'
        ? // An ASCII column is joined and written at once; any other is encoded string by string.
          anyText
          ? fc.string({ unit: 'binary', maxLength: 6 })
          : fc.string({ maxLength: 12 })
        : type === 'bool'
          ? fc.boolean()
          : type === 'i32'
            ? fc.integer({ min: -1000, max: 1000 })
            : fc.integer({ min: 0, max: 2 ** 40 });
    return nullable ? fc.option(value as fc.Arbitrary<CellValue>, { nil: null }) : value;
  };
  // Per column, ASCII text or any text (lone surrogates included).
  const rows = fc.array(fc.boolean(), { minLength: defs.length, maxLength: defs.length }).chain((anyText) =>
    fc.array(fc.tuple(...defs.map((d, c) => cell(d.type, d.nullable, anyText[c]!))), {
      minLength: 1,
      maxLength: 20,
    }),
  );

  it('gives back every cell of every row, nulls included', () => {
    fc.assert(
      fc.property(rows, (rows) => {
        const set = new ChunkSet();
        for (const r of rows) set.add('logs', 1_700_000_000_000, r as CellValue[]);
        const [chunk] = set.finish();
        expect(chunkBuffers(chunk!)).toEqual([chunk!.buffer]);
        // The buffer is not zeroed when made: the padding between arrays is written as zeros, so every byte outside
        // the arrays is 0 (nothing left over from memory reused).
        const covered = new Uint8Array(chunk!.buffer.byteLength);
        for (let slot = 0; slot * 2 < chunk!.layout.length; slot++) {
          const at = chunk!.layout[slot * 2]!;
          if (at >= 0) covered.fill(1, at, at + chunk!.layout[slot * 2 + 1]!);
        }
        const raw = new Uint8Array(chunk!.buffer);
        expect(raw.some((b, i) => covered[i] === 0 && b !== 0)).toBe(false);
        const columns = columnsOf(chunk!);
        defs.forEach((_def, c) => {
          const col = columns[c]!;
          // A validity array exactly when the column has a null.
          expect(col.valid !== null).toBe(rows.some((r) => r[c] === null));
          rows.forEach((r, i) => {
            const want = r[c] as CellValue;
            if (col.valid && col.valid[i] === 0) {
              expect(want).toBeNull();
              return;
            }
            if (col.t === 'utf8') {
              const text = Buffer.from(col.data.subarray(col.offsets[i], col.offsets[i + 1])).toString(
                'utf8',
              );
              expect(text).toBe(Buffer.from(want as string, 'utf8').toString('utf8'));
            } else if (col.t === 'bool') expect(col.values[i] === 1).toBe(want);
            else expect(col.values[i]).toBe(want);
          });
        });
      }),
      { numRuns: 200 },
    );
  });
});
