import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import { HOUR_MS } from '../schemas/time.js';
import type { QueryEngine } from './duckdb.js';

/**
 * A Bloom filter of the execution ids in each part of a by-id copy of executions or logs (storage/compaction.ts), so
 * that a lookup by id opens only the hours that hold it (a logs part's filter has each id once, however many logs
 * it has). The parts' id ranges are no help when ids are random (the Node SDK's and OTLP's are span ids, 16 hex
 * digits): every hour's copy then has a part whose range holds any id, and a detail decoded one row group of each
 * hour it kept (about 0.8 ms an hour at p50 with two DuckDB threads: 550 ms at 30 days). With the filters a lookup
 * decodes the hour that holds the id (and, rarely, another).
 *
 * Both sides hash the id's MD5, which DuckDB computes at the hour's end (md5_number_lower: bytes 8–15 of the
 * digest, little-endian) and node:crypto at lookup: h1 and h2 are its two 32-bit words, and the filter's bits are
 * (h1 + i·h2) mod m for i < HASHES (double hashing). Twenty bits per id and fourteen hashes: about 0.005 % false
 * positives for a part of 32k ids, 0.01–0.05 % for a few hundred, 2.5 bytes per execution. The first filters had
 * ten and seven (0.8 %, 1.25 bytes): a lookup probes a part in every hour kept, so with 48 hours a third of lookups
 * read one hour's part in vain, and then (two hours in hand) the detail read its row and its logs in two statements
 * (p50 13.5, p95 18.8 ms, against about 11 and 14 with one hour); at 30 days about six parts a lookup would have
 * been read in vain.
 */

export const ID_FILTER_SUFFIX = '.idfilter';
/** The filters of the by-id copy of the data file `dataPath`, one after the other. */
export const idFilterPath = (dataPath: string) => `${dataPath}${ID_FILTER_SUFFIX}`;
/** The data file a filter file belongs to, or null for another name. */
export const idFilterDataName = (name: string) =>
  name.endsWith(ID_FILTER_SUFFIX) ? name.slice(0, -ID_FILTER_SUFFIX.length) : null;

/**
 * How long after its hour starts a copy may still get filters (storage/compaction.ts idsInterleave: when the next
 * hour's copy shows the ids interleave, at that hour's end); lookups look such a copy's parts up again meanwhile.
 */
export const FILTERS_SETTLE_MS = 3 * HOUR_MS;

const HASHES = 14;
const BITS_PER_ID = 20;

/**
 * Where one part's filter is in its copy's filter file, its size in bits (a multiple of 8) and its number of hashes
 * (absent: seven, the filters written before it was recorded).
 */
export interface IdFilterSlice {
  at: number;
  bytes: number;
  bits: number;
  hashes?: number;
}

/** The number of hashes a filter was built with. */
const hashesOf = (slice: Pick<IdFilterSlice, 'hashes'>): number => slice.hashes ?? 7;

/** The two hash words of an id, as ID_HASHES_SQL gives them. */
export function idHashes(id: string): [number, number] {
  const d = crypto.createHash('md5').update(id, 'utf8').digest();
  return [d.readUInt32LE(8), d.readUInt32LE(12)];
}

/** The same words of the ids of the parts bound as `$file`, computed by DuckDB (the digest once per id). */
const ID_HASHES_SQL = `SELECT (h & 4294967295)::DOUBLE AS h1, (h >> 32)::DOUBLE AS h2
  FROM (SELECT md5_number_lower(execution_id) AS h
    FROM (SELECT DISTINCT execution_id FROM read_parquet($file, hive_partitioning = false)
      WHERE execution_id IS NOT NULL))`;

export function buildFilter(
  h1: Float64Array,
  h2: Float64Array,
  bits: number,
  hashes: number = HASHES,
): Uint8Array {
  const filter = new Uint8Array(bits / 8);
  for (let j = 0; j < h1.length; j++) {
    const a = h1[j]!;
    const b = h2[j]!;
    for (let i = 0; i < hashes; i++) {
      const bit = (a + i * b) % bits;
      filter[bit >>> 3]! |= 1 << (bit & 7);
    }
  }
  return filter;
}

/** False only when the id is not among those the filter was built from. */
export function mayContain(
  filter: Uint8Array,
  slice: Pick<IdFilterSlice, 'bits' | 'hashes'>,
  [a, b]: [number, number],
): boolean {
  const { bits } = slice;
  const hashes = hashesOf(slice);
  for (let i = 0; i < hashes; i++) {
    const bit = (a + i * b) % bits;
    if ((filter[bit >>> 3]! & (1 << (bit & 7))) === 0) return false;
  }
  return true;
}

/**
 * Builds the filter of each part in `parts` (their paths, with their row counts) from the ids DuckDB reads back,
 * and writes them one after the other to `target` (not synced: the caller syncs it with the parts; not written when
 * no part has rows). Answers each part's slice, or null for a part without rows.
 */
export async function writeIdFilters(
  engine: QueryEngine,
  parts: { path: string; rows: number }[],
  target: string,
): Promise<(IdFilterSlice | null)[]> {
  const filters: Uint8Array[] = [];
  const slices: (IdFilterSlice | null)[] = [];
  let at = 0;
  for (const part of parts) {
    if (part.rows <= 0) {
      slices.push(null);
      continue;
    }
    const [h1, h2] = await engine.numericColumns(ID_HASHES_SQL, { file: part.path });
    const bits = Math.max(64, Math.ceil((h1!.length * BITS_PER_ID) / 64) * 64);
    const filter = buildFilter(h1!, h2!, bits);
    filters.push(filter);
    slices.push({ at, bytes: filter.length, bits, hashes: HASHES });
    at += filter.length;
  }
  if (filters.length > 0) await fs.writeFile(target, Buffer.concat(filters));
  return slices;
}
