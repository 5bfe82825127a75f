import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { HOUR_MS } from '../../schemas/time.js';
import * as compaction from '../../storage/compaction.js';
import * as datasets from '../../storage/datasets.js';
import * as duckdb from '../../storage/duckdb.js';
import * as layout from '../../storage/layout.js';
import { type DiskParts, diskParts } from './dataset.js';

export interface HourEndCost {
  /** Wall seconds of the whole pass. */
  seconds: number;
  /** CPU seconds of the pass (this process: DuckDB's threads are its own), in all and by dataset. */
  cpuSeconds: number;
  cpuSecondsByDataset: Record<string, number>;
  /** What executions and logs keep on disk afterwards. */
  disk: Record<'executions' | 'logs', DiskParts>;
}

/** The compactor of one build: this one's, or another's compiled `dist/` (compactorOf). */
export interface Compactor {
  compactPartition: typeof compaction.compactPartition;
  QueryEngine: typeof duckdb.QueryEngine;
  DATASET_NAMES: typeof datasets.DATASET_NAMES;
  modeDirs: typeof layout.modeDirs;
  datePartitions: typeof layout.datePartitions;
  hourPartitions: typeof layout.hourPartitions;
}

const THIS_BUILD: Compactor = { ...compaction, ...duckdb, ...datasets, ...layout };

/** This build's compactor, or the one compiled under `dist` (another checkout's, to compare on the same data). */
export async function compactorOf(dist?: string): Promise<Compactor> {
  if (!dist) return THIS_BUILD;
  const load = (file: string) => import(pathToFileURL(path.resolve(dist, file)).href);
  const [c, d, ds, l] = await Promise.all([
    load('storage/compaction.js'),
    load('storage/duckdb.js'),
    load('storage/datasets.js'),
    load('storage/layout.js'),
  ]);
  return { ...c, ...d, ...ds, ...l } as Compactor;
}

/** The compactor's settings a pass takes from the service's configuration. */
export interface CompactorSettings {
  memoryMb: number;
  codec: compaction.CompactionCodec;
  /** The running hour's: its memory limit and how many small files make a merge (pipeline/pipeline.ts). */
  runningMemoryMb?: number;
  minFiles?: number;
  /** The sidecars merged executions files get (default: all). */
  sidecars?: compaction.CompactionOptions['sidecars'];
}

/**
 * What the hours an ingest run wrote cost once they end, which a run of a minute never sees: the compactor's pass
 * over a stopped service's DATA_DIR as if every hour had ended (the final merges with their deduplication, by-id
 * copies and rollups), on one DuckDB thread with the compactor's memory limit as the service runs it
 * (pipeline/pipeline.ts) and its codec, timed by this process's CPU.
 */
export function hourEndCost(
  dataDir: string,
  compactor: CompactorSettings,
  build: Compactor = THIS_BUILD,
): Promise<HourEndCost> {
  return timedPass(dataDir, compactor, build, async (engine, hour, dataset) => {
    await build.compactPartition(engine, hour.dir, dataset, hour.start, {
      minFiles: 2,
      graceMs: 0,
      now: hour.start + HOUR_MS + 1,
      codec: compactor.codec,
      sidecars: compactor.sidecars,
    });
  });
}

/**
 * The running hour's merges that a run stopped before they were due (the compactor passes every
 * COMPACTION_INTERVAL_MS, so a run of 20 s pays none of them and one of 90 s only some): the passes the service's
 * compactor makes while the hour is written, over what they left, as the service runs them (its running memory
 * limit, its minimum of small files, merged again while enough are left), timed like hourEndCost. Each execution
 * pays one of these before its hour ends, so ingest + these + the hour's end is what an execution costs.
 */
export function runningMergesCost(
  dataDir: string,
  compactor: CompactorSettings,
  build: Compactor = THIS_BUILD,
): Promise<HourEndCost> {
  const minFiles = compactor.minFiles ?? 16;
  const running = Math.min(compactor.runningMemoryMb ?? compactor.memoryMb, compactor.memoryMb);
  return timedPass(dataDir, compactor, build, async (engine, hour, dataset) => {
    for (;;) {
      const r = await build.compactPartition(engine, hour.dir, dataset, hour.start, {
        minFiles,
        graceMs: 0,
        // Within the hour: the merge of an hour still written.
        now: hour.start + 1,
        codec: compactor.codec,
        sidecars: compactor.sidecars,
        memory: { full: compactor.memoryMb, running },
      });
      if (r.compacted === 0 || r.left < minFiles) return;
    }
  });
}

/** `merge` over every hour partition of every dataset, on one DuckDB thread, timed by this process's CPU. */
async function timedPass(
  dataDir: string,
  compactor: CompactorSettings,
  build: Compactor,
  merge: (
    engine: duckdb.QueryEngine,
    hour: { dir: string; start: number },
    dataset: datasets.DatasetName,
  ) => Promise<void>,
): Promise<HourEndCost> {
  const engine = await build.QueryEngine.open(dataDir, 1, compactor.memoryMb);
  const cpuSecondsByDataset: Record<string, number> = {};
  const started = performance.now();
  const cpuStart = process.cpuUsage();
  try {
    for (const dataset of build.DATASET_NAMES) {
      const cpu0 = process.cpuUsage();
      for (const { dir: modeDir } of await build.modeDirs(dataDir, dataset))
        for (const date of await build.datePartitions(modeDir))
          for (const hour of await build.hourPartitions(date)) await merge(engine, hour, dataset);
      const cpu = process.cpuUsage(cpu0);
      cpuSecondsByDataset[dataset] = (cpu.user + cpu.system) / 1e6;
    }
  } finally {
    engine.close();
  }
  const cpu = process.cpuUsage(cpuStart);
  return {
    seconds: (performance.now() - started) / 1000,
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
    cpuSecondsByDataset,
    disk: { executions: await diskParts(dataDir, 'executions'), logs: await diskParts(dataDir, 'logs') },
  };
}
