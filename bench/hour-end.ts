import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../schemas/config.js';
import { compactionOptions } from '../storage/compaction.js';
import { QueryEngine } from '../storage/duckdb.js';
import { totalBytes } from './support/dataset.js';
import { compactorOf, type HourEndCost, hourEndCost } from './support/hour-end.js';
import { wholeNumber } from './support/options.js';

/**
 * The hour's end alone, on the data an ingest run kept (`npm run bench -- ingest --keep --no-hour-end` prints
 * where), to compare compactors on the same data: each run copies the directory and ends all its hours as the
 * service's compactor would (support/hour-end.ts). With --compare DIST the runs alternate between this build and
 * the one compiled under DIST (another checkout's `dist/`, after its `npx tsc -p tsconfig.build.json`).
 *
 *   npm run bench -- hour-end --data-dir DIR [--compare DIST] [--runs N]
 */

const USAGE = `usage: npm run bench -- hour-end --data-dir DIR [--compare DIST] [--runs N]
  --data-dir DIR   a stopped service's DATA_DIR (never changed: each run works on a copy)
  --compare DIST   alternate with the compactor compiled under DIST
  --runs N         runs per build (2)
The compactor's memory and codec are the service's defaults, or COMPACTION_MEMORY_MB and COMPACTION_COMPRESSION
from the environment.
`;

const fmt = (n: number, digits = 1) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

export async function main(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      'data-dir': { type: 'string' },
      compare: { type: 'string' },
      runs: { type: 'string', default: '2' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help || !values['data-dir']) {
    process.stdout.write(USAGE);
    if (!values.help) process.exitCode = 2;
    return;
  }
  const source = path.resolve(values['data-dir']);
  const runs = wholeNumber('runs', values.runs, 1, 100);
  const builds = [
    { name: 'this build', compactor: await compactorOf() },
    ...(values.compare ? [{ name: values.compare, compactor: await compactorOf(values.compare) }] : []),
  ];
  // The compactor's two settings from the environment, as the service takes them (COMPACTION_MEMORY_MB=256 npm
  // run bench -- hour-end …); nothing else of it.
  const options = compactionOptions(
    loadConfig({
      COMPACTION_MEMORY_MB: process.env.COMPACTION_MEMORY_MB,
      COMPACTION_COMPRESSION: process.env.COMPACTION_COMPRESSION,
    }),
  );
  const work = await fs.mkdtemp(path.join(os.tmpdir(), 'svc-bench-hour-end-'));
  try {
    for (let run = 0; run < runs; run++) {
      for (const build of builds) {
        const copy = path.join(work, 'data');
        await fs.rm(copy, { recursive: true, force: true });
        await fs.cp(source, copy, { recursive: true });
        const cost = await hourEndCost(copy, options, build.compactor);
        process.stdout.write(`${build.name}, run ${run + 1}: ${describe(cost, await executionsIn(copy))}\n`);
      }
    }
  } finally {
    await fs.rm(work, { recursive: true, force: true });
  }
}

/** The executions a compacted data directory holds (its hour files: the by-id copies are not `.parquet`). */
async function executionsIn(dataDir: string): Promise<number> {
  const engine = await QueryEngine.open(dataDir, 1);
  try {
    const [r] = await engine.all(
      `SELECT count(*)::DOUBLE AS n FROM read_parquet('${path.join(dataDir, 'executions').replace(/'/g, "''")}/**/*.parquet')`,
    );
    return Number(r?.n ?? 0);
  } finally {
    engine.close();
  }
}

function describe(c: HourEndCost, executions: number): string {
  const per = (s: number) => fmt((s * 1e6) / Math.max(executions, 1));
  const parts = Object.entries(c.cpuSecondsByDataset)
    .filter(([, s]) => s > 0.05)
    .map(([d, s]) => `${d} ${fmt(s)} s`)
    .join(', ');
  return (
    `${fmt(c.cpuSeconds)} s CPU (${parts}) for ${executions.toLocaleString('en-US')} executions: ${per(c.cpuSeconds)} µs each; ` +
    `on disk per execution: executions ${fmt(totalBytes(c.disk.executions) / executions)} B, logs ${fmt(totalBytes(c.disk.logs) / executions)} B`
  );
}
