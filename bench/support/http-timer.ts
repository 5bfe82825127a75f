import { Worker } from 'node:worker_threads';
import { quantile } from './stats.js';

/**
 * Times GET requests from a worker thread: the client's reading of each answer, and its garbage, stay out of the
 * service's thread and heap when the service runs in the benchmark's process, as they would with any real client.
 * A request is timed from its sending to the last byte of its body (what load generators time); the body is read,
 * not parsed (the benchmark checks the answers before it times them).
 */

export interface Timing {
  p50: number;
  p95: number;
  runs: number;
}

/** `warmup` untimed requests, then `runs` timed ones, one after another; anything but 200 fails them. */
export function timeGets(
  url: string,
  headers: Record<string, string>,
  runs: number,
  warmup: number,
): Promise<Timing> {
  const worker = new Worker(new URL('./http-timer-worker.js', import.meta.url), {
    workerData: { url, headers, runs, warmup },
  });
  return new Promise<Timing>((resolve, reject) => {
    worker.once('message', (ms: number[]) => {
      const s = ms.sort((a, b) => a - b);
      resolve({ p50: quantile(s, 0.5)!, p95: quantile(s, 0.95)!, runs });
    });
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`the timing worker exited (${code}) before answering`)));
  });
}
