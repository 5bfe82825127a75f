import type { ErrorDetail, ItemKind, ItemRejection, Mode } from '../schemas/records.js';
import type { BuiltQuery, QueryEngine, SqlParam } from '../storage/duckdb.js';
import { listPartitionFiles } from '../storage/layout.js';

/** SQL for `GET /api/ingest/rejections` (CONTRACT §5): the items the pipeline refused, newest request first. */

export interface RejectionFilter {
  workspaceId: string;
  mode: Mode;
  /** Epoch ms of the request's receipt: from inclusive, to exclusive. */
  from: number;
  to: number;
}

export interface RejectionItem {
  requestId: string;
  kind: ItemKind;
  index: number;
  code: ItemRejection['code'];
  details: ErrorDetail[];
  receivedAt: string;
}

// Newest request first; within one request (one ingest_seq) the order the pipeline refused its items in: by
// kind (executions, logs, metrics sort alphabetically) and index. The file and row within it only break the tie
// of an execution refused more than once (several of its inline logs), so pages never repeat or skip a row.
const ORDER_BY =
  'received_at DESC, ingest_seq DESC, kind ASC, item_index ASC, filename ASC, file_row_number ASC';

export function buildRejectionListQuery(
  f: RejectionFilter,
  p: { page: number; pageSize: number },
): { list: BuiltQuery; count: BuiltQuery } {
  const where = 'received_at >= epoch_ms($from::BIGINT)\n  AND received_at < epoch_ms($to::BIGINT)';
  const params: Record<string, SqlParam> = { from: f.from, to: f.to };
  return {
    list: {
      sql: `SELECT epoch_ms(received_at)::DOUBLE AS received_at_ms, request_id, kind, item_index, code, details
FROM read_parquet($files, union_by_name = true, hive_partitioning = false, filename = true, file_row_number = true)
WHERE ${where}
ORDER BY ${ORDER_BY}
LIMIT $limit OFFSET $offset`,
      params: { ...params, limit: p.pageSize, offset: (p.page - 1) * p.pageSize },
    },
    count: {
      sql: `SELECT count(*)::DOUBLE AS total\nFROM read_parquet($files, union_by_name = true, hive_partitioning = false)\nWHERE ${where}`,
      params,
    },
  };
}

export async function listRejections(
  engine: QueryEngine,
  dataDir: string,
  f: RejectionFilter,
  p: { page: number; pageSize: number },
): Promise<{ data: RejectionItem[]; total: number }> {
  // Partitioned by the time the request was received, so the window prunes the same way it filters.
  const files = await listPartitionFiles(dataDir, 'rejections', f.workspaceId, f.mode, f.from, f.to);
  if (files.length === 0) return { data: [], total: 0 };
  const q = buildRejectionListQuery(f, p);
  const [rows, count] = await Promise.all([
    engine.all(q.list.sql, { ...q.list.params, files }),
    engine.all(q.count.sql, { ...q.count.params, files }),
  ]);
  const data = rows.map(
    (r): RejectionItem => ({
      requestId: r.request_id as string,
      kind: r.kind as ItemKind,
      index: Number(r.item_index),
      code: r.code as ItemRejection['code'],
      details: JSON.parse(r.details as string) as ErrorDetail[],
      receivedAt: new Date(Number(r.received_at_ms)).toISOString(),
    }),
  );
  return { data, total: Number(count[0]?.total ?? 0) };
}
