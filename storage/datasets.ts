/**
 * The stored datasets and their columns, in file order. The parse workers build columns in this order and
 * the Parquet writer encodes them by it; queries name these columns. A new column is appended and nullable:
 * files written before it lack it (queries read with union_by_name).
 */

export type ColumnType = 'utf8' | 'f64' | 'i32' | 'i64' | 'ts' | 'bool';

export interface ColumnDef {
  readonly name: string;
  readonly type: ColumnType;
  readonly nullable: boolean;
}

const col = (name: string, type: ColumnType, nullable = true): ColumnDef => ({ name, type, nullable });

export const DATASETS = {
  executions: [
    col('execution_id', 'utf8', false),
    col('trace_id', 'utf8'),
    col('span_id', 'utf8'),
    col('parent_span_id', 'utf8'),
    col('service', 'utf8', false),
    col('environment', 'utf8', false),
    col('source', 'utf8', false),
    col('endpoint', 'utf8', false),
    col('method', 'utf8'),
    col('started_at', 'ts', false),
    col('duration_ms', 'f64', false),
    col('status_code', 'i32'),
    col('outcome', 'utf8', false),
    col('outcome_reason', 'utf8', false),
    col('exception_type', 'utf8'),
    col('exception_message', 'utf8'),
    col('issue_id', 'utf8'),
    col('context', 'utf8'),
    col('request', 'utf8'),
    col('response', 'utf8'),
    col('exception', 'utf8'),
    col('outcome_evidence', 'utf8'),
    col('fingerprint', 'utf8'),
    col('truncated', 'bool', false),
    col('request_id', 'utf8', false),
    col('received_at', 'ts', false),
    col('ingest_seq', 'i64', false),
    /** CONTRACT §9, for failed executions. */
    col('failure_type', 'utf8'),
  ],
  /**
   * One narrow row per failed execution grouped into an issue: what an issue's counts, first and last occurrence
   * and common factors' scope are read from, a fraction of the executions' bytes. Written in the same commit as
   * the execution; when its hour ends, rebuilt from the hour's deduplicated executions (storage/compaction.ts),
   * so it always holds exactly the stored failed executions.
   */
  failures: [
    col('started_at', 'ts', false),
    col('issue_id', 'utf8', false),
    col('execution_id', 'utf8', false),
    col('service', 'utf8', false),
    /** The endpoint template. */
    col('endpoint', 'utf8', false),
    col('environment', 'utf8', false),
    col('received_at', 'ts', false),
    col('ingest_seq', 'i64', false),
    // What the common factors read of an issue's own executions (query/issues.ts), so that pass reads a few row
    // groups of these files instead of every row group of the executions that holds one of them. The indexed
    // context keys follow as typed columns, as in executions.
    col('method', 'utf8'),
    col('status_code', 'i32'),
    col('duration_ms', 'f64'),
  ],
  logs: [
    col('timestamp', 'ts', false),
    col('level', 'utf8', false),
    /** trace=1 … fatal=6: "at least this level" is a range filter. */
    col('level_num', 'i32', false),
    col('message', 'utf8', false),
    col('service', 'utf8', false),
    col('environment', 'utf8', false),
    col('execution_id', 'utf8'),
    col('trace_id', 'utf8'),
    col('span_id', 'utf8'),
    col('logger', 'utf8'),
    col('attributes', 'utf8'),
    col('exception', 'utf8'),
    col('truncated', 'bool', false),
    col('request_id', 'utf8', false),
    col('ingest_seq', 'i64', false),
  ],
  metrics: [
    col('timestamp', 'ts', false),
    col('name', 'utf8', false),
    col('type', 'utf8', false),
    col('value', 'f64'),
    col('hist_count', 'f64'),
    col('hist_sum', 'f64'),
    col('hist_min', 'f64'),
    col('hist_max', 'f64'),
    col('unit', 'utf8'),
    col('service', 'utf8', false),
    col('environment', 'utf8', false),
    col('tags', 'utf8'),
    col('request_id', 'utf8', false),
    col('ingest_seq', 'i64', false),
  ],
  /**
   * OTLP spans that are not executions (CONTRACT §12), shown in their execution's detail. An hour's final file is
   * sorted by trace, so the spans of one trace are a row group or two that the rest can be skipped for.
   */
  spans: [
    col('started_at', 'ts', false),
    col('trace_id', 'utf8', false),
    col('span_id', 'utf8', false),
    col('parent_span_id', 'utf8'),
    col('name', 'utf8', false),
    col('kind', 'utf8', false),
    col('duration_ms', 'f64', false),
    col('status', 'utf8', false),
    col('attributes', 'utf8'),
    col('service', 'utf8', false),
    col('environment', 'utf8', false),
    col('truncated', 'bool', false),
    col('request_id', 'utf8', false),
    col('received_at', 'ts', false),
    col('ingest_seq', 'i64', false),
  ],
  /** Items the pipeline refused (CONTRACT §5), partitioned by the time the request was received. */
  rejections: [
    col('received_at', 'ts', false),
    col('request_id', 'utf8', false),
    col('kind', 'utf8', false),
    col('item_index', 'i32', false),
    col('code', 'utf8', false),
    col('details', 'utf8', false),
    col('ingest_seq', 'i64', false),
  ],
} as const satisfies Record<string, readonly ColumnDef[]>;

export type DatasetName = keyof typeof DATASETS;
export const DATASET_NAMES = Object.keys(DATASETS) as DatasetName[];
