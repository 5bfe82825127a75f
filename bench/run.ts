import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { main as cluster } from './cluster.js';
import { main as crashRecovery } from './crash-recovery.js';
import { main as dashboard } from './dashboard.js';
import { main as fuzz } from './fuzz.js';
import { main as hourEnd } from './hour-end.js';
import { main as ingest } from './ingest.js';
import { main as metrics } from './metrics.js';
import { main as otlp } from './otlp.js';
import { main as parseStage } from './parse-stage.js';
import { main as query } from './query.js';
import { main as sdkOverhead } from './sdk-overhead.js';

/**
 * `npm run bench`: every scenario in turn, each also runnable alone
 * (`npm run bench -- ingest --duration 30`, `npm run bench -- cluster --rounds 3`).
 */
const SCENARIOS: Record<string, (args: string[]) => Promise<unknown>> = {
  ingest,
  parse: parseStage,
  cluster,
  'crash-recovery': crashRecovery,
  'hour-end': hourEnd,
  query,
  metrics,
  dashboard,
  otlp,
  'sdk-overhead': sdkOverhead,
  fuzz,
};

export async function main(argv: string[] = process.argv.slice(2)): Promise<void> {
  const [first, ...rest] = argv;
  if (first && SCENARIOS[first]) {
    await SCENARIOS[first](rest);
    return;
  }
  if (first) {
    process.stderr.write(`unknown scenario ${first}; one of: ${Object.keys(SCENARIOS).join(', ')}\n`);
    process.exitCode = 2;
    return;
  }
  // All of them, each on its defaults, except the query benchmark on 1M executions rather than 10M (the full
  // dataset takes minutes to write and several GiB: run `npm run bench -- query` for it).
  for (const [name, run] of Object.entries(SCENARIOS)) {
    // It ends the hours of data an ingest run kept: there is none to give it here (ingest measures its own).
    if (name === 'hour-end') continue;
    // A tool for comparing builds' parse stage (--compare), not a figure of the service.
    if (name === 'parse') continue;
    process.stdout.write(`\n=== ${name} ===\n`);
    await run(
      name === 'query'
        ? ['--quick']
        : name === 'metrics' || name === 'dashboard'
          ? ['--executions', '1000000']
          : [],
    );
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  main().catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
