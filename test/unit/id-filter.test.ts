import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
});
