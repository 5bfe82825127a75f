import type { CompactionCodec } from './compaction.js';
import type { QueryEngine } from './duckdb.js';
import { minutesName, writeMinutes } from './minutes.js';
import { rollupName, writeRollup } from './rollup.js';

/**
 * The files the compactor makes beside a merged executions file, each named in the partition's manifest under
 * its field once written and deleted with the file: the baseline rollup of the common factors (rollup.ts) and
 * the per-minute rollup of the metrics (minutes.ts). Neither ends in `.parquet`, so no listing takes them for data.
 */

export type SidecarField = 'rollups' | 'minutes';

export interface SidecarKind {
  field: SidecarField;
  name(dataName: string): string;
  write(engine: QueryEngine, source: string, target: string, codec: CompactionCodec): Promise<void>;
}

export const EXECUTION_SIDECARS: readonly SidecarKind[] = [
  { field: 'rollups', name: rollupName, write: writeRollup },
  { field: 'minutes', name: minutesName, write: writeMinutes },
];

/** The data file a sidecar belongs to, or null when `name` is none. */
export function sidecarDataName(name: string): string | null {
  for (const kind of EXECUTION_SIDECARS) {
    const suffix = kind.name('');
    if (name.endsWith(suffix) && name.length > suffix.length) return name.slice(0, -suffix.length);
  }
  return null;
}
