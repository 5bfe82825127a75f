import fs from 'node:fs/promises';
import { Pool } from 'undici';
import { quantile } from './stats.js';

/**
 * The load driver's parts: request loops (closed or open loop), the marked-execution prober that times 202 →
 * visible, and the per-second sampler of the service's figures.
 */

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export interface DriveResult {
  accepted: number;
  refused: number;
  seconds: number;
  lastAcceptAt: number;
}

/**
 * Runs `send` from `concurrency` loops until the deadline or `maxRequests`; counts what each call reports
 * accepted. With `requestsPerSec` the load is open-loop: request n is due at start + n / rate (sent at once when
 * the loops are behind, so a slow service shows up as latency, not as a lower offered rate).
 */
export async function drive(opts: {
  concurrency: number;
  seconds: number;
  maxRequests?: number;
  requestsPerSec?: number;
  send: (requestNo: number) => Promise<boolean>;
  onAccepted?: (requestNo: number) => void;
}): Promise<DriveResult> {
  let next = 0;
  let accepted = 0;
  let refused = 0;
  let lastAcceptAt = 0;
  const start = performance.now();
  const deadline = start + opts.seconds * 1000;
  const max = opts.maxRequests ?? Number.POSITIVE_INFINITY;
  await Promise.all(
    Array.from({ length: opts.concurrency }, async () => {
      while (performance.now() < deadline && next < max) {
        const n = next++;
        if (opts.requestsPerSec) {
          const due = start + (n * 1000) / opts.requestsPerSec;
          if (due >= deadline) break;
          const wait = due - performance.now();
          if (wait > 0) await sleep(wait);
        }
        if (await opts.send(n)) {
          accepted++;
          lastAcceptAt = performance.now();
          opts.onAccepted?.(n);
        } else refused++;
      }
    }),
  );
  return { accepted, refused, seconds: (performance.now() - start) / 1000, lastAcceptAt };
}

/**
 * Marked executions: every `everyMs` one execution with a known id is sent, through the same API, stream and
 * pipeline as the load, under its own key (its own workspace, so looking for it reads a few small files, not
 * the load's); the newest executions of that workspace are listed after each flush (the service's flush count
 * is watched every `pollMs`), and the time from each marked execution's 202 to the poll that first lists it is
 * one sample. Resolution: the poll period plus the list query.
 */
export class Prober {
  readonly #pool: Pool;
  readonly #headers: Record<string, string>;
  readonly #run: string;
  readonly #url: string;
  readonly #sent = new Map<string, number>();
  readonly #samples: { at: number; ms: number }[] = [];
  #timers: NodeJS.Timeout[] = [];
  /** Marked executions sent and not yet answered: `stop` waits for them before it waits for their listing. */
  readonly #sending = new Set<Promise<void>>();
  #polling = false;
  /** Marked executions answered 202 so far (they are stored too, in their own workspace). */
  accepted = 0;
  /** Marked executions never listed that their detail finds: a listing problem, not a lost execution. */
  readonly unseenButStored: string[] = [];
  #k = 0;
  readonly #t0: number;

  constructor(
    url: string,
    key: string,
    run: string,
    readonly everyMs = 200,
    readonly pollMs = 100,
  ) {
    this.#url = url;
    this.#pool = new Pool(url, { connections: 2 });
    this.#headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    this.#run = run;
    this.#t0 = performance.now();
  }

  start(): void {
    this.#timers.push(
      setInterval(() => {
        const sent = this.#send();
        this.#sending.add(sent);
        void sent.finally(() => this.#sending.delete(sent));
      }, this.everyMs),
    );
    this.#timers.push(setInterval(() => void this.#poll(), this.pollMs));
  }

  async #send(): Promise<void> {
    const id = `probe-${this.#run}-${this.#k++}`;
    const body = JSON.stringify({
      executions: [
        {
          executionId: id,
          service: 'bench-probe',
          endpoint: '/probe',
          method: 'GET',
          startedAt: Date.now(),
          durationMs: 1,
          statusCode: 200,
        },
      ],
    });
    try {
      const res = await this.#pool.request({
        method: 'POST',
        path: '/api/ingest',
        headers: this.#headers,
        body,
      });
      await res.body.dump();
      if (res.statusCode === 202) {
        this.#sent.set(id, performance.now());
        this.accepted++;
      }
    } catch {
      // a refused probe is no sample
    }
  }

  #lastFlushes: number | null = null;

  async #poll(): Promise<void> {
    if (this.#polling || this.#sent.size === 0) return;
    this.#polling = true;
    try {
      // A marked execution can only have become visible with a flush: ask the service's flush count (cheap)
      // every period, and list the marked workspace (a query over each of its files) only when it moved.
      const flushes = await fetch(`${this.#url}/metrics`)
        .then((r) => (r.ok ? r.text() : ''))
        .then((t) => promValue(t, 'svc_pipeline_flushes_total'))
        .catch(() => null);
      if (flushes !== null && flushes === this.#lastFlushes) return;
      const res = await this.#pool.request({
        method: 'GET',
        path: '/api/executions?pageSize=200&sort=-startedAt',
        headers: this.#headers,
      });
      const now = performance.now();
      if (res.statusCode !== 200) {
        await res.body.dump();
        return;
      }
      const page = (await res.body.json()) as { data: { executionId: string }[] };
      // Only a listing that was read counts for this flush count: after a failed one the next poll lists again
      // (after the last flush of a run, nothing else would).
      this.#lastFlushes = flushes;
      for (const e of page.data) {
        const sentAt = this.#sent.get(e.executionId);
        if (sentAt === undefined) continue;
        this.#sent.delete(e.executionId);
        this.#samples.push({ at: (now - this.#t0) / 1000, ms: now - sentAt });
      }
    } catch {
      // the next poll tries again
    } finally {
      this.#polling = false;
    }
  }

  /** Stops sending; keeps polling until every sent probe was seen or `timeoutMs` passed. */
  async stop(timeoutMs = 30_000): Promise<void> {
    clearInterval(this.#timers[0]);
    // One answered after this point would otherwise count as never seen: nothing would look for it.
    await Promise.allSettled([...this.#sending]);
    const deadline = Date.now() + timeoutMs;
    while (this.#sent.size > 0 && Date.now() < deadline) await sleep(this.pollMs);
    for (const t of this.#timers) clearInterval(t);
    // A marked execution never listed: asked for by id, to tell one the list missed from one never stored.
    for (const id of this.#sent.keys()) {
      const res = await this.#pool
        .request({ method: 'GET', path: `/api/executions/${encodeURIComponent(id)}`, headers: this.#headers })
        .catch(() => null);
      await res?.body.dump();
      if (res?.statusCode === 200) this.unseenButStored.push(id);
    }
    await this.#pool.close();
  }

  /** Samples so far, and probes never seen (a lost probe would be a lost execution). */
  summary(): {
    samples: number;
    unseen: number;
    p50Ms: number | null;
    p99Ms: number | null;
    maxMs: number | null;
  } {
    const ms = this.#samples.map((s) => s.ms).sort((a, b) => a - b);
    return {
      samples: ms.length,
      unseen: this.#sent.size,
      p50Ms: quantile(ms, 0.5),
      p99Ms: quantile(ms, 0.99),
      maxMs: ms.length > 0 ? ms[ms.length - 1]! : null,
    };
  }

  /** The 202 → visible samples since the prober started: [seconds, ms]. */
  timeline(): [number, number][] {
    return this.#samples.map((s) => [s.at, s.ms]);
  }

  /** p50 of the samples taken in the last `seconds`. */
  recentP50(seconds: number): number | null {
    const since = (performance.now() - this.#t0) / 1000 - seconds;
    return quantile(
      this.#samples
        .filter((s) => s.at >= since)
        .map((s) => s.ms)
        .sort((a, b) => a - b),
      0.5,
    );
  }
}

/** CPU seconds (user + system) and peak RSS of a process, from /proc. */
/** User + system CPU seconds from a `/proc/<pid>/stat` or `/proc/<pid>/task/<tid>/stat` line (clock ticks of 10 ms). */
export function statCpuSeconds(stat: string): number {
  // Fields after the command name, which is in parentheses and may hold spaces: utime and stime are 14th and 15th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

export async function procStats(
  pid: number,
): Promise<{ cpuSeconds: number; rssMiB: number; peakRssMiB: number }> {
  const [stat, status] = await Promise.all([
    fs.readFile(`/proc/${pid}/stat`, 'utf8'),
    fs.readFile(`/proc/${pid}/status`, 'utf8'),
  ]);
  const kib = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0);
  return { cpuSeconds: statCpuSeconds(stat), rssMiB: kib('VmRSS') / 1024, peakRssMiB: kib('VmHWM') / 1024 };
}

/** Executions the list API counts for `key`'s workspace: a query over every file written, not to be asked often. */
export async function listedTotal(url: string, key: string): Promise<number> {
  const res = await fetch(`${url}/api/executions?pageSize=1`, { headers: { 'x-api-key': key } });
  if (!res.ok) throw new Error(`list answered ${res.status}`);
  return ((await res.json()) as { total: number }).total;
}

/** POSTs one body to /api/ingest under `idempotencyKey`; true when it was accepted (202). */
export async function postIngest(
  pool: Pool,
  headers: Record<string, string>,
  body: Buffer,
  idempotencyKey: string,
): Promise<boolean> {
  const res = await pool.request({
    method: 'POST',
    path: '/api/ingest',
    headers: { ...headers, 'idempotency-key': idempotencyKey },
    body,
  });
  await res.body.dump();
  return res.statusCode === 202;
}

/** A service's /metrics text ('' when it does not answer: a token is required, say). */
const metricsText = (url: string): Promise<string> =>
  fetch(`${url}/metrics`)
    .then((r) => (r.ok ? r.text() : ''))
    .catch(() => '');

/** svc_pipeline_lag_messages from a service's /metrics: ingest messages not yet committed; null when none. */
export async function pipelineLag(url: string): Promise<number | null> {
  return promValue(await metricsText(url), 'svc_pipeline_lag_messages');
}

/** One second of a run, as the sampler saw it. */
export interface Sample {
  /** Seconds since the load started. */
  t: number;
  /** Executions answered 202 so far. */
  accepted: number;
  /** Executions stored (committed, so visible to queries): see Sampler.#stored. */
  visible: number;
  /** svc_pipeline_lag_messages: ingest messages accepted, not yet committed. */
  lagMessages: number | null;
  /** CPU seconds of the service (and its embedded nats-server) since the load started; null for --url. */
  cpuSeconds: number | null;
  rssMiB: number | null;
  /** The pipeline's batch flushes so far, and their summed duration in seconds (/metrics; null for an older build). */
  flushes: number | null;
  flushSeconds: number | null;
  /** The compactor's passes so far, their summed duration in seconds and its memory fallbacks (/metrics). */
  compactions: number | null;
  compactionSeconds: number | null;
  compactionFallbacks: number | null;
}

/** The service's own figure `name` from its Prometheus text, or null. */
export function promValue(text: string, name: string): number | null {
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.eE+-]+)$`, 'm').exec(text);
  return m ? Number(m[1]) : null;
}

/**
 * Every second: the visible count (the list API's total for the load's key), the pipeline lag from /metrics,
 * and the CPU and memory of the service's processes.
 */
export class Sampler {
  readonly samples: Sample[] = [];
  #timer: NodeJS.Timeout | null = null;
  #busy = false;
  #cpu0: number | null = null;
  /** The most the service's processes held at one time, their current RSS summed each sample (not their peaks'). */
  peakRssTogetherMiB = 0;

  constructor(
    private readonly url: string,
    private readonly key: string,
    private readonly pids: () => number[],
    private readonly accepted: () => number,
    private readonly t0: number,
    private readonly onSample?: (s: Sample) => void,
    /** Executions stored for other workspaces meanwhile (the marked ones), left out of the service's count. */
    private readonly others: () => number = () => 0,
  ) {}

  /** Executions the key had stored before the measured load (ingest --warmup), left out of visible(). */
  visibleBase = 0;

  async visible(): Promise<number> {
    return (await listedTotal(this.url, this.key)) - this.visibleBase;
  }

  /** CPU seconds of each process since the sampler started, by pid. */
  readonly cpuByPid = new Map<number, number>();
  readonly cpu0ByPid = new Map<number, number>();
  /** Peak RSS of each process seen (VmHWM), by pid. */
  readonly peakRssByPid = new Map<number, number>();

  async cpuAndRss(): Promise<{ cpuSeconds: number; rssMiB: number } | null> {
    const pids = this.pids();
    if (pids.length === 0) return null;
    const all = await Promise.all(pids.map((p) => procStats(p).catch(() => null)));
    pids.forEach((p, i) => {
      const s = all[i];
      if (!s) return;
      this.peakRssByPid.set(p, Math.max(this.peakRssByPid.get(p) ?? 0, s.peakRssMiB));
      if (!this.cpu0ByPid.has(p)) this.cpu0ByPid.set(p, s.cpuSeconds);
      this.cpuByPid.set(p, s.cpuSeconds - this.cpu0ByPid.get(p)!);
    });
    const ok = all.filter((s) => s !== null);
    return {
      cpuSeconds: ok.reduce((s, x) => s + x.cpuSeconds, 0),
      rssMiB: ok.reduce((s, x) => s + x.rssMiB, 0),
    };
  }

  async start(): Promise<void> {
    this.#cpu0 = (await this.cpuAndRss())?.cpuSeconds ?? null;
    const metrics = await this.#metricsText();
    this.#written0 = promValue(metrics, 'svc_pipeline_executions_written_total');
    this.flushes0 = {
      flushes: promValue(metrics, 'svc_pipeline_flushes_total'),
      flushSeconds: promValue(metrics, 'svc_pipeline_flush_seconds_total'),
      ...compactionCounters(metrics),
    };
    this.#timer = setInterval(() => void this.sample(), 1000);
  }

  /** The flush and compaction counters when the load started: flushSummary's and compactionSummary's first point. */
  flushes0: Pick<Sample, 'flushes' | 'flushSeconds' | CompactionCounter> = {
    flushes: null,
    flushSeconds: null,
    compactions: null,
    compactionSeconds: null,
    compactionFallbacks: null,
  };

  #written0: number | null = null;

  #metricsText(): Promise<string> {
    return metricsText(this.url);
  }

  /**
   * Executions stored so far, for the per-second timeline: the service's count of executions committed (every
   * committed row is visible to queries) when /metrics has it, which costs nothing; otherwise the list total,
   * a query over every file written that, asked every second, took CPU from the service being measured. The
   * run's final figure is always the list total.
   */
  async #stored(metrics: string): Promise<number> {
    const written = promValue(metrics, 'svc_pipeline_executions_written_total');
    if (written !== null && this.#written0 !== null) return written - this.#written0 - this.others();
    return this.visible();
  }

  async sample(): Promise<Sample | null> {
    if (this.#busy) return null;
    this.#busy = true;
    try {
      const accepted = this.accepted();
      const [metrics, proc] = await Promise.all([this.#metricsText(), this.cpuAndRss()]);
      const visible = await this.#stored(metrics);
      const lagMessages = promValue(metrics, 'svc_pipeline_lag_messages');
      if (proc) this.peakRssTogetherMiB = Math.max(this.peakRssTogetherMiB, proc.rssMiB);
      const s: Sample = {
        t: (performance.now() - this.t0) / 1000,
        accepted,
        visible,
        lagMessages,
        cpuSeconds: proc && this.#cpu0 !== null ? proc.cpuSeconds - this.#cpu0 : null,
        rssMiB: proc?.rssMiB ?? null,
        flushes: promValue(metrics, 'svc_pipeline_flushes_total'),
        flushSeconds: promValue(metrics, 'svc_pipeline_flush_seconds_total'),
        ...compactionCounters(metrics),
      };
      this.samples.push(s);
      this.onSample?.(s);
      return s;
    } catch {
      return null;
    } finally {
      this.#busy = false;
    }
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
  }
}

type CompactionCounter = 'compactions' | 'compactionSeconds' | 'compactionFallbacks';

function compactionCounters(metrics: string): Pick<Sample, CompactionCounter> {
  return {
    compactions: promValue(metrics, 'svc_compaction_passes_total'),
    compactionSeconds: promValue(metrics, 'svc_compaction_seconds_total'),
    compactionFallbacks: promValue(metrics, 'svc_compaction_memory_fallbacks_total'),
  };
}

/**
 * The compactor's passes from `start` (the counters when the load started) to the timeline's last sample: how many,
 * their summed duration, and how many of its running-hour statements ran again at the full memory limit (each
 * raises the service's memory while it runs). Null without the metrics (an older build).
 */
export function compactionSummary(
  start: Pick<Sample, CompactionCounter>,
  timeline: readonly Sample[],
): { passes: number; seconds: number; memoryFallbacks: number } | null {
  const last = timeline.at(-1);
  if (!last || start.compactions === null || last.compactions === null) return null;
  return {
    passes: last.compactions - start.compactions,
    seconds: (last.compactionSeconds ?? 0) - (start.compactionSeconds ?? 0),
    memoryFallbacks: (last.compactionFallbacks ?? 0) - (start.compactionFallbacks ?? 0),
  };
}

/**
 * The pipeline's batch flushes from `start` (the counters when the load started) over a timeline (the load and its
 * drain): how many, their mean duration, and the largest mean of the flushes between two samples, about a second
 * apart (while a merge runs, a batch's files and journal commit wait longer). Null without the metrics.
 */
export function flushSummary(
  start: Pick<Sample, 'flushes' | 'flushSeconds'>,
  timeline: readonly Sample[],
): { flushes: number; meanMs: number; worstSecondMeanMs: number } | null {
  const known = [start, ...timeline].filter((s) => s.flushes !== null && s.flushSeconds !== null);
  const first = known[0];
  const last = known.at(-1);
  if (!first || !last || last.flushes === first.flushes) return null;
  let worst = 0;
  for (let i = 1; i < known.length; i++) {
    const n = known[i]!.flushes! - known[i - 1]!.flushes!;
    if (n > 0) worst = Math.max(worst, ((known[i]!.flushSeconds! - known[i - 1]!.flushSeconds!) * 1000) / n);
  }
  const flushes = last.flushes! - first.flushes!;
  return {
    flushes,
    meanMs: ((last.flushSeconds! - first.flushSeconds!) * 1000) / flushes,
    worstSecondMeanMs: worst,
  };
}
