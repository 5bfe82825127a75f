import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { utf8Column } from '../../storage/columns.js';

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
