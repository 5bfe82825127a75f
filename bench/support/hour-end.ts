import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { HOUR_MS } from '../../schemas/time.js';
import * as compaction from '../../storage/compaction.js';
import * as datasets from '../../storage/datasets.js';
import * as duckdb from '../../storage/duckdb.js';
import * as layout from '../../storage/layout.js';
import { type DiskParts, diskParts } from './dataset.js';

/** A timed compactor pass: its CPU and wall time. */
export type PassCost = Omit<HourEndCost, 'disk'>;

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

/**
 * The compactor's options as the service passes them (storage/compaction.ts compactionOptions): its memory limits,
 * codec, minimum of small files and sidecars.
 */
export type CompactorSettings = ReturnType<typeof compaction.compactionOptions>;

/**
 * What the hours an ingest run wrote cost once they end, which a run of a minute never sees: the compactor's pass
 * over a stopped service's DATA_DIR as if every hour had ended (the final merges with their deduplication, by-id
 * copies and rollups), on one DuckDB thread with the compactor's memory limit as the service runs it
 * (pipeline/pipeline.ts) and its codec, timed by this process's CPU.
 */
export async function hourEndCost(
  dataDir: string,
  compactor: CompactorSettings,
  build: Compactor = THIS_BUILD,
): Promise<HourEndCost> {
  // After the end of the current hour: every hour has ended, and every file the service replaced is past its
  // grace (graceMs 0), whenever it was replaced.
  const now = Math.floor(Date.now() / HOUR_MS) * HOUR_MS + HOUR_MS + 1;
  const cost = await timedPass(dataDir, compactor, build, async (engine, hour, dataset) => {
    await build.compactPartition(engine, hour.dir, dataset, hour.start, {
      minFiles: 2,
      graceMs: 0,
      now,
      codec: compactor.codec,
      sidecars: compactor.sidecars,
    });
  });
  return {
    ...cost,
    disk: { executions: await diskParts(dataDir, 'executions'), logs: await diskParts(dataDir, 'logs') },
  };
}

/**
 * The running hour's merges that a run stopped before they were due (the compactor passes every
 * COMPACTION_INTERVAL_MS, so a run shorter than that pays none of them and a longer one only some): the passes the
 * service's compactor makes while an hour is written, over what the service left, with its options (its running
 * memory limit, its minimum of small files, merged again while enough are left), timed like hourEndCost. Nearly
 * every execution pays one of these before its hour ends (the fewer than minFiles small files left then are merged
 * by the hour's end alone), so ingest + these + the hour's end is what an execution costs. An hour that has already
 * ended is left to hourEndCost, as the service's next pass would end it.
 */
export function runningMergesCost(
  dataDir: string,
  compactor: CompactorSettings,
  build: Compactor = THIS_BUILD,
): Promise<PassCost> {
  const now = Date.now();
  return timedPass(dataDir, compactor, build, async (engine, hour, dataset) => {
    if (now >= hour.start + HOUR_MS) return;
    for (;;) {
      const r = await build.compactPartition(engine, hour.dir, dataset, hour.start, {
        ...compactor,
        graceMs: 0,
        now,
      });
      if (r.compacted === 0 || r.left < compactor.minFiles) return;
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
): Promise<PassCost> {
  const engine = await build.QueryEngine.open(dataDir, 1, compactor.memory.full);
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
  };
}
