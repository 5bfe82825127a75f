import type { CellValue } from './columns.js';
import type { ColumnDef } from './datasets.js';

/**
 * Indexed context keys (CONTRACT §6.3) are stored as typed columns of their own beside the context JSON:
 * `ctx_s:<path>`, `ctx_n:<path>`, `ctx_b:<path>` for a string, number or boolean value, so a context filter is a
 * plain column comparison (several times faster than extracting from JSON) and matches by type. Files written
 * before a key was indexed lack its columns: the key is searchable for executions ingested after it was added.
 */

export type ContextKind = 's' | 'n' | 'b';

/** An indexed string longer than this is not indexed (CONTRACT §4). */
export const MAX_INDEXED_STRING = 256;

/** Paths are validated dotted paths ([A-Za-z0-9_.-]), so the name is safe inside a quoted SQL identifier. */
/** Every typed context column's name starts with it; no stored column of a dataset does. */
export const CONTEXT_COLUMN_PREFIX = 'ctx_';
export const contextColumn = (path: string, kind: ContextKind) => `${CONTEXT_COLUMN_PREFIX}${kind}:${path}`;

export function contextColumnDefs(paths: readonly string[]): ColumnDef[] {
  return paths.flatMap((p) => [
    { name: contextColumn(p, 's'), type: 'utf8' as const, nullable: true },
    { name: contextColumn(p, 'n'), type: 'f64' as const, nullable: true },
    { name: contextColumn(p, 'b'), type: 'bool' as const, nullable: true },
  ]);
}

function leaf(tree: unknown, parts: readonly string[]): unknown {
  let node = tree;
  for (const part of parts) {
    if (typeof node !== 'object' || node === null || Array.isArray(node)) return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}

/** Indexed paths split into their parts, once per batch of rows (splitting per row was 4 % of the parse stage). */
export const splitPaths = (paths: readonly string[]): string[][] => paths.map((p) => p.split('.'));

/** The cells of `contextColumnDefs(paths)` for one execution's (scrubbed) context; `split`: splitPaths(paths). */
export function contextCells(tree: unknown, split: readonly (readonly string[])[]): CellValue[] {
  const out: CellValue[] = [];
  for (const parts of split) {
    const v = leaf(tree, parts);
    out.push(
      typeof v === 'string' && v.length <= MAX_INDEXED_STRING ? v : null,
      typeof v === 'number' && Number.isFinite(v) ? v : null,
      typeof v === 'boolean' ? v : null,
    );
  }
  return out;
}
