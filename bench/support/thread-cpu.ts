import fs from 'node:fs/promises';
import { statCpuSeconds } from './load.js';

/**
 * CPU by thread of a process, from /proc/<pid>/task (Linux). The service names its worker threads
 * (storage/worker-file.ts `nameThread`: `svc-parse`, `svc-encode`, `svc-otlp-check`); its main thread is the one
 * whose id is the process id; every other thread (V8's GC and compiler helpers, libuv's pool, which runs DuckDB's
 * compaction and the file system calls, DuckDB's own threads) is counted together as `other`.
 */

/** CPU seconds by thread id, with each thread's group. */
export type ThreadSnapshot = Map<number, { group: string; cpuSeconds: number }>;

export async function threadSnapshot(pid: number): Promise<ThreadSnapshot> {
  const out: ThreadSnapshot = new Map();
  let tids: string[];
  try {
    tids = await fs.readdir(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  await Promise.all(
    tids.map(async (t) => {
      const tid = Number(t);
      try {
        const [stat, comm] = await Promise.all([
          fs.readFile(`/proc/${pid}/task/${t}/stat`, 'utf8'),
          fs.readFile(`/proc/${pid}/task/${t}/comm`, 'utf8'),
        ]);
        const name = comm.trim();
        const group = tid === pid ? 'main' : name.startsWith('svc-') ? name : 'other';
        out.set(tid, { group, cpuSeconds: statCpuSeconds(stat) });
      } catch {
        // The thread ended between the listing and the read.
      }
    }),
  );
  return out;
}

/**
 * CPU seconds by group between two snapshots. A thread that ended meanwhile is missing from `after` and its time
 * is lost (the encoder pool retires a thread idle for a minute; during a run none is idle that long).
 */
export function cpuByGroup(before: ThreadSnapshot, after: ThreadSnapshot): Map<string, number> {
  const out = new Map<string, number>();
  for (const [tid, t] of after) {
    const spent = t.cpuSeconds - (before.get(tid)?.cpuSeconds ?? 0);
    out.set(t.group, (out.get(t.group) ?? 0) + spent);
  }
  return out;
}
