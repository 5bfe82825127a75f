import fs from 'node:fs/promises';
import path from 'node:path';

/**
 * Splits the CPU profiles a `--cpu-prof` run wrote (one `.cpuprofile` per thread) into the service's stages.
 * A sample is charged to the innermost frame of the stack that belongs to a known stage (the service's own code
 * by folder and file, or a library by package), so the JSON parse a route calls is the route's, and the NATS
 * client's protocol parsing under no service frame is the client's. GC and time outside JS are their own stages.
 *
 * V8 samples by the wall clock: a thread that is runnable but waiting for a core is charged to the frame it was
 * preempted in. On a saturated 2-core machine that favours the frames that wake another thread (a worker's
 * `Atomics.notify`, a socket write to nats-server), so the shares are where a thread spends its time, not only
 * its CPU; the groups' totals (from /proc) are CPU. For CPU alone by function, `perf record` the service started
 * with `--env NODE_OPTIONS=--perf-basic-prof-only-functions` (perf sees JIT frames by name then).
 */

export interface ThreadProfile {
  /** `main`, or the worker's group as thread-cpu.ts names it (`svc-parse`, `svc-encode`, `svc-otlp-check`). */
  group: string;
  /** Milliseconds sampled busy (not idle), by stage. */
  stages: Map<string, number>;
  busyMs: number;
}

interface CpuProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}

interface CpuProfile {
  nodes: CpuProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** The main thread's stages, by where the code lives. */
const MAIN_STAGES: [RegExp, string][] = [
  [/\/dist\/api\//, 'HTTP routes, auth, envelope check'],
  [
    /\/node_modules\/(fastify|@fastify|find-my-way|avvio|light-my-request|fast-json-stringify|pino|zod)\//,
    'HTTP framework, logging',
  ],
  [/\/dist\/broker\//, 'publish'],
  [/\/dist\/pipeline\//, 'consume, batch, claims'],
  [/\/dist\/storage\/(compaction|rollup|minutes|sidecars|retention|sketch)\.js/, 'compaction'],
  [/\/dist\/storage\//, 'commit (journal, files)'],
  [/\/dist\/control\//, 'control plane'],
  [/\/dist\/query\//, 'queries'],
  [/\/node_modules\/@nats-io\//, 'NATS client'],
  [/\/node_modules\/piscina\//, 'worker hand-off'],
  [/\/node_modules\/@duckdb\//, 'DuckDB calls'],
  [/\/node_modules\/prom-client\//, 'metrics'],
  [/\/dist\/main\.js/, 'process'],
];

/** A worker's stages: the service's file, or the library's package. */
function workerStage(url: string): string | null {
  const own = /\/dist\/((?:pipeline|storage|schemas)\/(?:otlp\/)?[\w-]+)\.js/.exec(url);
  if (own) return own[1]!;
  const lib = /\/node_modules\/((?:@[\w.-]+\/)?[\w.-]+)\//.exec(url);
  return lib ? lib[1]! : null;
}

function groupOf(profile: CpuProfile, threadId: number): string {
  if (threadId === 0) return 'main';
  const urls = profile.nodes.map((n) => n.callFrame.url).join('\n');
  if (urls.includes('parse-worker.js')) return 'svc-parse';
  if (urls.includes('parquet-worker.js')) return 'svc-encode';
  if (urls.includes('check-worker.js')) return 'svc-otlp-check';
  return 'other';
}

export function breakdown(profile: CpuProfile, group: string): ThreadProfile {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const named = (n: CpuProfileNode): string | null => {
    const url = n.callFrame.url;
    if (!url) return null;
    if (group !== 'main') return workerStage(url);
    return MAIN_STAGES.find(([re]) => re.test(url))?.[1] ?? null;
  };
  const memo = new Map<number, string | null>();
  const stageOf = (id: number): string | null => {
    if (memo.has(id)) return memo.get(id)!;
    const n = byId.get(id)!;
    const p = parent.get(id);
    const s = named(n) ?? (p === undefined ? null : stageOf(p));
    memo.set(id, s);
    return s;
  };
  const stages = new Map<string, number>();
  let busyMs = 0;
  profile.samples.forEach((id, i) => {
    const ms = (profile.timeDeltas[i] ?? 0) / 1000;
    const leaf = byId.get(id)!.callFrame;
    // A piscina worker waiting for its next task blocks in Atomics.wait: sampled as JS, but it spends no CPU.
    if (leaf.functionName === '(idle)' || leaf.functionName === 'atomicsWaitLoop') return;
    let stage: string;
    if (leaf.functionName === '(garbage collector)') stage = 'GC';
    else if (leaf.functionName === '(program)') stage = 'native, outside JS';
    else stage = stageOf(id) ?? (leaf.url.startsWith('node:') ? 'node internals' : 'other JS');
    stages.set(stage, (stages.get(stage) ?? 0) + ms);
    busyMs += ms;
  });
  return { group, stages, busyMs };
}

/** Every profile in `dir` written by process `pid` (Node names them CPU.<date>.<time>.<pid>.<thread>.<seq>). */
export async function profilesOf(dir: string, pid: number): Promise<ThreadProfile[]> {
  const files = (await fs.readdir(dir)).filter((f) => f.endsWith('.cpuprofile'));
  const out: ThreadProfile[] = [];
  for (const f of files) {
    const m = /^CPU\.\d+\.\d+\.(\d+)\.(\d+)\.\d+\.cpuprofile$/.exec(f);
    if (!m || Number(m[1]) !== pid) continue;
    const profile = JSON.parse(await fs.readFile(path.join(dir, f), 'utf8')) as CpuProfile;
    out.push(breakdown(profile, groupOf(profile, Number(m[2]))));
  }
  return out;
}

/**
 * Each group's measured CPU split by its profiles' shares: µs per execution by group and stage. A group without
 * a profile (native threads, nats-server) is one stage of its own.
 */
export function stageTable(
  cpuByGroup: Map<string, number>,
  profiles: ThreadProfile[],
  executions: number,
): { group: string; stage: string; microsPerExecution: number }[] {
  const rows: { group: string; stage: string; microsPerExecution: number }[] = [];
  for (const [group, seconds] of [...cpuByGroup].sort((a, b) => b[1] - a[1])) {
    const perExec = (seconds * 1e6) / executions;
    const mine = profiles.filter((p) => p.group === group);
    const busy = mine.reduce((s, p) => s + p.busyMs, 0);
    if (busy === 0) {
      rows.push({ group, stage: '(all)', microsPerExecution: perExec });
      continue;
    }
    const stages = new Map<string, number>();
    for (const p of mine) for (const [s, ms] of p.stages) stages.set(s, (stages.get(s) ?? 0) + ms);
    for (const [stage, ms] of [...stages].sort((a, b) => b[1] - a[1]))
      rows.push({ group, stage, microsPerExecution: (perExec * ms) / busy });
  }
  return rows;
}
