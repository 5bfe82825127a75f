import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idsOverlap } from '../../storage/compaction.js';
import { QueryEngine } from '../../storage/duckdb.js';
import { buildFilter, idHashes, mayContain, writeIdFilters } from '../../storage/id-filter.js';

let dir: string;
let engine: QueryEngine;
beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'id-filter-'));
  engine = await QueryEngine.open(dir);
});
afterAll(async () => {
  engine?.close();
  await fs.rm(dir, { recursive: true, force: true });
});

/** Ids as senders make them: span ids (16 hex digits), ULIDs, and the test helpers' own. */
const ids = (n: number, salt: string) =>
  Array.from({ length: n }, (_, i) => {
    const h = crypto.createHash('sha1').update(`${salt}${i}`).digest('hex');
    return i % 3 === 0
      ? h.slice(0, 16)
      : i % 3 === 1
        ? `01${h.slice(0, 24).toUpperCase()}`
        : `ex-${salt}-${i}`;
  });

/** A part of the ids as the compactor writes one: a Parquet file with an execution_id column. */
async function part(name: string, values: string[]): Promise<string> {
  const file = path.join(dir, name);
  await engine.all(
    `COPY (SELECT unnest($ids::VARCHAR[]) AS execution_id ORDER BY 1) TO '${file}' (FORMAT parquet)`,
    { ids: values },
  );
  return file;
}

describe('id filters', () => {
  it('hash an id as DuckDB does at the hour’s end', async () => {
    const some = ids(300, 'hash');
    const [h1, h2] = await engine.numericColumns(
      `SELECT (md5_number_lower(id) & 4294967295)::DOUBLE, (md5_number_lower(id) >> 32)::DOUBLE
       FROM (SELECT unnest($ids::VARCHAR[]) AS id, generate_subscripts($ids::VARCHAR[], 1) AS k) ORDER BY k`,
      { ids: some },
    );
    expect(some.map(idHashes)).toEqual(some.map((_, k) => [h1![k], h2![k]]));
  });

  it('hold every id written and leave out nearly all others', async () => {
    const a = ids(20_000, 'a');
    const b = ids(300, 'b');
    const file = path.join(dir, 'x.idfilter');
    const slices = await writeIdFilters(
      engine,
      [
        { path: await part('a.parquet', a), rows: a.length },
        { path: path.join(dir, 'none.parquet'), rows: 0 },
        { path: await part('b.parquet', b), rows: b.length },
      ],
      file,
    );
    expect(slices[1]).toBeNull();
    const [sa, sb] = [slices[0]!, slices[2]!];
    expect(sa).toEqual({ at: 0, bytes: sa.bits / 8, bits: 400_000, hashes: 14 });
    expect(sb.at).toBe(sa.bytes);
    const bytes = await fs.readFile(file);
    expect(bytes.length).toBe(sa.bytes + sb.bytes);
    const fa = bytes.subarray(sa.at, sa.at + sa.bytes);
    const fb = bytes.subarray(sb.at, sb.at + sb.bytes);
    expect(a.every((id) => mayContain(fa, sa, idHashes(id)))).toBe(true);
    expect(b.every((id) => mayContain(fb, sb, idHashes(id)))).toBe(true);
    // Twenty bits an id, fourteen hashes: about 0.01 % of absent ids pass (2 of these 20,000), more through the
    // filter of a few hundred ids (10 here); ten bits and seven hashes let 0.8 % through.
    const absent = ids(20_000, 'absent');
    expect(absent.filter((id) => mayContain(fa, sa, idHashes(id))).length).toBeLessThan(20);
    expect(absent.filter((id) => mayContain(fb, sb, idHashes(id))).length).toBeLessThan(40);
  });

  it('an empty filter holds nothing', () => {
    const bits = 64;
    const empty = buildFilter(new Float64Array(0), new Float64Array(0), bits);
    expect(ids(100, 'e').some((id) => mayContain(empty, { bits }, idHashes(id)))).toBe(false);
  });

  it('a filter written before slices recorded their hashes is probed with the seven it was built with', () => {
    const present = ids(2_000, 'p');
    const hashes = present.map(idHashes);
    const bits = 20_000;
    const old = buildFilter(
      Float64Array.from(hashes, (h) => h[0]),
      Float64Array.from(hashes, (h) => h[1]),
      bits,
      7,
    );
    expect(present.every((id) => mayContain(old, { bits }, idHashes(id)))).toBe(true);
    // Probed with today's fourteen, most of its ids would be missed: the count decides.
    expect(present.filter((id) => mayContain(old, { bits, hashes: 14 }, idHashes(id))).length).toBeLessThan(
      present.length / 2,
    );
    // About 0.8 % of absent ids pass ten bits an id and seven hashes.
    const absent = ids(20_000, 'absent');
    const passed = absent.filter((id) => mayContain(old, { bits }, idHashes(id))).length;
    expect(passed / absent.length).toBeGreaterThan(0.002);
    expect(passed / absent.length).toBeLessThan(0.02);
  });
  it('are built from each id once, nulls left out', async () => {
    const some = ids(300, 'd');
    const file = path.join(dir, 'repeated.parquet');
    await engine.all(
      `COPY (SELECT unnest($ids::VARCHAR[]) AS execution_id UNION ALL SELECT NULL ORDER BY 1) TO '${file}' (FORMAT parquet)`,
      { ids: [...some, ...some, ...some] },
    );
    const [slice] = await writeIdFilters(
      engine,
      [{ path: file, rows: 901 }],
      path.join(dir, 'repeated.idfilter'),
    );
    // 300 distinct ids at 20 bits each, in whole 64-bit words: not 901 rows' worth.
    expect(slice!.bits).toBe(6016);
    const filter = await fs.readFile(path.join(dir, 'repeated.idfilter'));
    expect(some.every((id) => mayContain(filter, slice!, idHashes(id)))).toBe(true);
  });
});

describe('which copies want filters (idsOverlap)', () => {
  const part = (min: string, max: string) => ({ name: `${min}.parquet`, min, max, rows: 10 });
  // Three parts of ids that sort by time, and one or two parts alone.
  const three = [part('a0', 'a9'), part('b0', 'b9'), part('c0', 'c9')];
  it('leaves out a copy the neighbour’s range touches at its first or last part only', () => {
    expect(idsOverlap(three, { min: '0', max: 'a5' })).toBe(false);
    expect(idsOverlap(three, { min: 'c5', max: 'z' })).toBe(false);
    expect(idsOverlap(three, { min: 'd0', max: 'z' })).toBe(false);
  });
  it('takes a copy the neighbour’s range reaches into, however few ids it has', () => {
    expect(idsOverlap(three, { min: '0', max: 'z' })).toBe(true);
    expect(idsOverlap(three, { min: 'b5', max: 'b5' })).toBe(true);
    expect(idsOverlap(three, { min: 'a5', max: 'b0' })).toBe(true);
  });
  it('takes a copy of one or two parts the neighbour’s range touches at all', () => {
    expect(idsOverlap(three.slice(0, 1), { min: 'a9', max: 'z' })).toBe(true);
    expect(idsOverlap(three.slice(0, 2), { min: 'b9', max: 'z' })).toBe(true);
    expect(idsOverlap(three.slice(0, 2), { min: 'c0', max: 'z' })).toBe(false);
  });
});
