import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { checkBody } from '../api/ingest-envelope.js';
import { wholeNumber } from './support/options.js';
import { median } from './support/stats.js';
import { type BodyTemplate, buildTemplate, stampBody } from './traffic.js';

type ParseFn = typeof import('../pipeline/parse-worker.js').default;

/**
 * The parse workers' stage alone: the function a parse worker runs on one ingest message (JSON in groups,
 * validation, scrubbing, classification, fingerprints, column chunks), called in one thread on the ingest
 * benchmark's bodies, timed by the process's CPU (its one JavaScript thread, and V8's compiler threads), not the
 * clock: on these shared VMs the clock also counts time the machine gave to others. CPU time moves with the
 * machine too (by 2× within minutes on a busy host), so compare builds by pairs run back to back.
 * Beside it, `JSON.parse` of the same bodies in the same process: the ceiling the ingest benchmark reports too.
 * Each run is a child process of its own (`--single-threaded-gc`, as the service runs on two cores), timing the
 * stage in a worker thread as the service runs it (a worker's heap is not the main thread's), so builds
 * compared with --compare never share a heap; runs alternate between them, and the bodies and their cuts are
 * this build's for both (only the parse worker's module is loaded from DIST).
 *
 *   npm run bench -- parse [--plain] [--compare DIST] [--runs N]
 */

const USAGE = `usage: npm run bench -- parse [--plain] [--compare DIST] [--runs N]
  --plain          executions without logs or metric points (the ingest benchmark's --no-logs --metrics 0)
  --compare DIST   alternate with the parse stage compiled under DIST (another checkout's dist/)
  --runs N         runs per build (4)
`;

const BODIES = 16;
/** Bodies parsed before measuring (the JIT's warm-up), then per measured slice. */
const WARM_UP = 400;
const SLICE = 150;
const SLICES = 7;

interface ChildResult {
  parseMicrosPerExecution: number;
  jsonParseMicrosPerExecution: number;
}

const fmt = (n: number) => n.toFixed(2);

function cpuMillis(run: () => void): number {
  const start = process.cpuUsage();
  run();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000;
}

/** In the child: the median over SLICES slices of CPU per execution, for the stage and for JSON.parse. */
function measure(parse: ParseFn, plain: boolean): ChildResult {
  const templates: BodyTemplate[] = [];
  for (let i = 0; i < BODIES; i++) {
    templates.push(
      buildTemplate(1000 + i, 'parse', 500, {
        firstFingerprint: templates.at(-1)?.nextFingerprint ?? 0,
        noLogs: plain,
        metrics: plain ? 0 : undefined,
      }),
    );
  }
  const bodies = templates.map((t, i) => stampBody(t, i));
  const executions = templates[0]!.executions;
  const limits = { executions: 1_000_000, logs: 10_000_000, metrics: 1_000_000 };
  const cuts = bodies.map((b) => checkBody(b, 'test', limits).cuts);
  let n = 0;
  const parseSome = (count: number) => {
    for (let k = 0; k < count; k++, n++) {
      const i = n % BODIES;
      const moved = parse({
        body: bodies[i]!,
        jsonCuts: cuts[i],
        encoding: 'identity',
        format: 'ingest',
        maxDecodedBytes: 64 * 1024 * 1024,
        mode: 'test',
        workspaceId: 'ws_benchparse',
        requestId: `req_${n}`,
        receivedAt: Date.now(),
        seq: n,
        indexedKeys: ['customer.id', 'region'],
      });
      // The worker returns its result wrapped for piscina to move: a body it failed would be timed on the
      // quick path of a rejection.
      const counts = (moved as unknown as Record<symbol, ReturnType<ParseFn>>)[Piscina.valueSymbol]!.counts;
      if (counts.rejected > 0 || counts.executions !== executions)
        throw new Error(`body ${i}: ${counts.executions} executions stored, ${counts.rejected} rejected`);
    }
  };
  const jsonParseSome = (count: number) => {
    for (let k = 0; k < count; k++, n++) JSON.parse(bodies[n % BODIES]!.toString('utf8'));
  };
  parseSome(WARM_UP);
  jsonParseSome(WARM_UP);
  const perExecution = (some: (count: number) => void) =>
    median(
      Array.from({ length: SLICES }, () => (cpuMillis(() => some(SLICE)) * 1000) / (SLICE * executions)),
    );
  return {
    parseMicrosPerExecution: perExecution(parseSome),
    jsonParseMicrosPerExecution: perExecution(jsonParseSome),
  };
}

function runChild(dist: string, plain: boolean): ChildResult {
  const script = fileURLToPath(import.meta.url);
  const r = spawnSync(
    process.execPath,
    ['--single-threaded-gc', script, '--child', dist, ...(plain ? ['--plain'] : [])],
    {
      encoding: 'utf8',
    },
  );
  if (r.status !== 0) throw new Error(`${script} failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as ChildResult;
}

export async function main(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      plain: { type: 'boolean', default: false },
      compare: { type: 'string' },
      runs: { type: 'string', default: '4' },
      child: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.child) {
    // In a worker thread, as the service's parse stage runs: a worker's heap is not the main thread's (its young
    // generation is 32 MB from the start, where the main thread's grows from 1 MB; on the main thread the same
    // stage measured 17 µs per execution against 10 in a worker).
    const worker = new Worker(fileURLToPath(import.meta.url), {
      workerData: { dist: path.resolve(values.child), plain: values.plain },
    });
    const result = await new Promise<ChildResult>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    await worker.terminate();
    process.stdout.write(JSON.stringify(result));
    return;
  }
  if (values.help) {
    process.stdout.write(USAGE);
    return;
  }
  const runs = wholeNumber('runs', values.runs, 1, 100);
  const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  const builds = [here, ...(values.compare ? [path.resolve(values.compare)] : [])];
  const results = builds.map(() => [] as ChildResult[]);
  process.stdout.write(
    `parse stage, ${values.plain ? 'plain executions' : 'the ingest benchmark’s default body'}, 500 executions a body; ` +
      `CPU µs per execution (median of ${SLICES} slices of ${SLICE} bodies)\n`,
  );
  for (let run = 0; run < runs; run++) {
    // Which goes first alternates too.
    const order = run % 2 === 0 ? builds.map((_, b) => b) : builds.map((_, b) => b).reverse();
    for (const b of order) {
      const dist = builds[b]!;
      const r = runChild(dist, values.plain);
      results[b]!.push(r);
      process.stdout.write(
        `  ${b === 0 ? 'this build' : 'compared '}  parse ${fmt(r.parseMicrosPerExecution)}  JSON.parse ${fmt(r.jsonParseMicrosPerExecution)}  ` +
          `ratio ${fmt(r.parseMicrosPerExecution / r.jsonParseMicrosPerExecution)}\n`,
      );
    }
  }
  builds.forEach((dist, b) => {
    const rs = results[b]!;
    process.stdout.write(
      `${b === 0 ? 'this build' : `compared (${dist})`}: median parse ${fmt(median(rs.map((r) => r.parseMicrosPerExecution)))} µs, ` +
        `÷ JSON.parse ${fmt(median(rs.map((r) => r.parseMicrosPerExecution / r.jsonParseMicrosPerExecution)))}\n`,
    );
  });
  if (builds.length === 2) {
    // Each run's pair ran back to back: their ratio is the comparison least moved by the machine's speed.
    const ratios = results[0]!.map(
      (r, i) => r.parseMicrosPerExecution / results[1]![i]!.parseMicrosPerExecution,
    );
    process.stdout.write(
      `this build ÷ compared, per pair: ${ratios.map(fmt).join(', ')} (median ${fmt(median(ratios))})\n`,
    );
  }
}

if (!isMainThread && parentPort && (workerData as { dist?: string } | null)?.dist) {
  const { dist, plain } = workerData as { dist: string; plain: boolean };
  const worker = pathToFileURL(path.join(dist, 'pipeline', 'parse-worker.js')).href;
  const parse = ((await import(worker)) as { default: ParseFn }).default;
  parentPort.postMessage(measure(parse, plain));
} else if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  main(process.argv.slice(2)).catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
