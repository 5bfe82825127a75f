import { parentPort, workerData } from 'node:worker_threads';

/** The worker of http-timer.ts: sequential GETs of one URL, the timed ones' milliseconds posted back. */

const { url, headers, runs, warmup } = workerData as {
  url: string;
  headers: Record<string, string>;
  runs: number;
  warmup: number;
};

const once = async (): Promise<number> => {
  const started = performance.now();
  const res = await fetch(url, { headers });
  const body = await res.arrayBuffer();
  const ms = performance.now() - started;
  if (res.status !== 200)
    throw new Error(`GET ${url}: ${res.status} ${Buffer.from(body).toString().slice(0, 300)}`);
  return ms;
};

for (let i = 0; i < warmup; i++) await once();
const ms: number[] = [];
for (let i = 0; i < runs; i++) ms.push(await once());
parentPort!.postMessage(ms);
