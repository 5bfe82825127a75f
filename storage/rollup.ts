import { CONTEXT_COLUMN_PREFIX } from './context-columns.js';
import { parquetCopyOptions, type QueryEngine } from './duckdb.js';

/**
 * The baseline rollup of a compacted executions file: what an issue's common factors compare its failures with
 * (CONTRACT §9), counted once when the file is made instead of on every issue detail. Without it the baseline of a
 * busy endpoint is a scan of its successes: 1.4M rows, 270–310 ms at 10M executions.
 *
 * One row per (service, endpoint template, field, value) of the file's successful executions, with how many have
 * it. Fields: '' (all of them), 'environment', 'method', 'statusCode', 'durationBand', 'd' (a duration histogram:
 * `n` is the bucket, DURATION_BUCKET_SQL), and 'context.<key>' for each indexed context key the file has typed
 * columns of. Every value is kept, so the counts are exact; only the median duration is approximate (the
 * histogram's buckets are 2 % wide).
 *
 * The rows are sorted by (kind, service, endpoint, field, value): kind 0 holds everything but the context keys with
 * more than DENSE_VALUES values in their group (kind 1, a customer id…), so one scan of an endpoint's kind 0 rows
 * reads a few hundred rows an hour, and a value of a dense key is a lookup that the min/max statistics of the
 * sorted rows narrow to one row group.
 *
 * The file lives beside its data file as `<data>.rollup` (not `.parquet`: no listing takes it for data), named by
 * the partition's manifest once written, and deleted with its data file.
 */

const ROLLUP_SUFFIX = '.rollup';
export const rollupName = (dataName: string) => `${dataName}${ROLLUP_SUFFIX}`;

/**
 * An id path segment, as pipeline/fingerprint.ts's endpointTemplate sees one: digits, hex of 8 or more, a UUID.
 * (Its hand scanner and this pattern are held to the same answers by test/unit/fingerprint.test.ts.)
 */
export const ID_SEGMENT =
  '(?:[0-9]+|[0-9a-fA-F]{8,}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})';
/** The placeholder of an id segment in an endpoint template. */
export const ID_PLACEHOLDER = ':id';

/** In SQL, endpointTemplate of the column `col` (without request.route, which executions do not keep). */
export const endpointTemplateSql = (col: string) => `array_to_string(list_transform(
    string_split(regexp_replace(${col}, '[?#].*$', ''), '/'),
    x -> CASE WHEN regexp_full_match(x, '${ID_SEGMENT}') THEN '${ID_PLACEHOLDER}' ELSE x END), '/')`;

/** Histogram buckets 2 % wide: bucket b holds the durations d with round(ln(1 + d) / ln(1.02)) = b. */
const BUCKET_BASE = 1.02;
export const DURATION_BUCKET_SQL = `round(ln(1 + greatest(duration_ms, 0)) / ln(${BUCKET_BASE}))::DOUBLE`;
/** A duration that bucket b stands for (the middle of the bucket, in log terms): within 1 % of every one in it. */
export const bucketDurationMs = (b: number) => Math.max(0, BUCKET_BASE ** b - 1);

/** The duration bands of CONTRACT §9's common factors. */
export const DURATION_BAND_SQL = `CASE WHEN duration_ms < 100 THEN '<100ms' WHEN duration_ms < 1000 THEN '100ms-1s'
      WHEN duration_ms < 5000 THEN '1s-5s' ELSE '>=5s' END`;

/** A context key with more values than this in one (service, endpoint) group of a file is dense (kind 1). */
export const DENSE_VALUES = 64;

/** The indexed context keys a file has typed columns of (`ctx_<kind>:<path>`), from its column names. */
function contextKeysOf(columns: Iterable<string>): string[] {
  const keys = new Set<string>();
  for (const c of columns) {
    if (c.startsWith(CONTEXT_COLUMN_PREFIX) && c[CONTEXT_COLUMN_PREFIX.length + 1] === ':')
      keys.add(c.slice(CONTEXT_COLUMN_PREFIX.length + 2));
  }
  return [...keys].sort();
}

const quoteIdent = (s: string) => `"${s.replace(/"/g, '""')}"`;
const quoteLiteral = (s: string) => `'${s.replace(/'/g, "''")}'`;

/**
 * The statement that makes the rollup of `$file`, whose columns are `columns`. The fields that are not context keys
 * are counted from one grouping of the successes by all of them at once, not from a pass over the rows each: its
 * groups are endpoint templates × methods × statuses × 2 % duration buckets, which do not grow with the rows (85k
 * groups for the 1.67M successes of the ingest benchmark's running file; in a small file nearly a group a row, and
 * nothing gained). A context key's values are counted from the rows (a key like a customer id has about as many
 * groups as rows). Measured on one DuckDB thread over that file (1.76M plain executions, no context keys): 0.37 µs
 * per row, against 0.80–0.87 when each field grouped the rows.
 */
function rollupSql(columns: ReadonlySet<string>): string {
  const keys = contextKeysOf(columns);
  const typed = (key: string, kind: 's' | 'n' | 'b', type: string) => {
    const name = `${CONTEXT_COLUMN_PREFIX}${kind}:${key}`;
    return columns.has(name) ? quoteIdent(name) : `NULL::${type}`;
  };
  const ctx = keys
    .map(
      (k, i) =>
        `, ${typed(k, 's', 'VARCHAR')} AS s${i}, ${typed(k, 'n', 'DOUBLE')} AS n${i}, ${typed(k, 'b', 'BOOLEAN')} AS b${i}`,
    )
    .join('');
  const field = (name: string, s: string, n: string) =>
    `SELECT service, endpoint, '${name}' AS field, ${s} AS s, ${n} AS n, NULL::BOOLEAN AS b, sum(c) AS count
  FROM g GROUP BY ALL`;
  const branches = [
    field('', 'NULL::VARCHAR', 'NULL::DOUBLE'),
    field('environment', 'environment', 'NULL::DOUBLE'),
    field('method', 'method', 'NULL::DOUBLE'),
    field('statusCode', 'NULL::VARCHAR', 'status_code::DOUBLE'),
    field('durationBand', 'band', 'NULL::DOUBLE'),
    field('d', 'NULL::VARCHAR', 'bucket'),
    ...keys.map(
      (k, i) => `SELECT service, endpoint, ${quoteLiteral(`context.${k}`)}, s${i}, n${i}, b${i}, count(*)
  FROM r WHERE s${i} IS NOT NULL OR n${i} IS NOT NULL OR b${i} IS NOT NULL GROUP BY ALL`,
    ),
  ];
  const rows = `SELECT service, ${endpointTemplateSql('endpoint')} AS endpoint, environment, method, status_code,
    ${DURATION_BAND_SQL} AS band, ${DURATION_BUCKET_SQL} AS bucket${ctx}
  FROM read_parquet($file, hive_partitioning = false)
  WHERE outcome = 'success'`;
  const grouped = (from: string) => `SELECT service, endpoint, environment, method, status_code, band, bucket,
    count(*) AS c
  FROM ${from} GROUP BY ALL`;
  // Without context keys the rows are grouped as they are read; with some, once kept for the keys' passes.
  const inputs =
    keys.length === 0
      ? `g AS MATERIALIZED (${grouped(`(${rows})`)})`
      : `r AS MATERIALIZED (${rows}),
g AS MATERIALIZED (${grouped('r')})`;
  return `WITH ${inputs},
v AS (
${branches.join('\nUNION ALL\n')}
)
SELECT CASE WHEN starts_with(field, 'context.')
    AND count(*) OVER (PARTITION BY service, endpoint, field) > ${DENSE_VALUES} THEN 1 ELSE 0 END::TINYINT AS kind,
  service, endpoint, field, s, n, b, count::DOUBLE AS count
FROM v
ORDER BY kind, service, endpoint, field, s, n, b`;
}

/** Rows per row group: small, so a lookup of one dense value decodes few rows. */
const ROLLUP_ROW_GROUP = 8192;

/** Writes the rollup of the executions file `source` to `target`. */
export async function writeRollup(
  engine: QueryEngine,
  source: string,
  target: string,
  codec: string,
): Promise<void> {
  const sql = rollupSql(await engine.columnsOf([source]));
  await engine.all(
    `COPY (${sql}) TO ${quoteLiteral(target)} (${parquetCopyOptions(codec, ROLLUP_ROW_GROUP)})`,
    { file: source },
  );
}
