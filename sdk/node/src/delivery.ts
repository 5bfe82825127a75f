import { randomUUID } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { promisify } from 'node:util';
import zlib from 'node:zlib';

const gzip = promisify(zlib.gzip);
/** zlib level 1: about a third of the default's CPU for a body some 15 % larger (telemetry JSON compresses well). */
const GZIP_LEVEL = 1;

/**
 * Delivery (CONTRACT §13): items wait in one bounded queue (the oldest dropped, and counted, when it is full), go
 * out in batches of at most 1,000 executions, 5,000 logs, 5,000 metric points and 5 MiB, gzip-compressed, one
 * request at a time, each batch under an idempotency key of its own that its resends keep. 429, 502, 503, 504 and
 * network errors are retried after a backoff with jitter, and never sooner than `retry-after`; a 413 splits the
 * batch in two; any other answer drops it (counted). Nothing here throws into the application.
 */

export type ItemKind = 'executions' | 'logs' | 'metrics';

export interface QueuedItem {
  kind: ItemKind;
  /**
   * The item as built: serialized with its whole batch, in one JSON.stringify, when the batch goes (one call per
   * item cost the application several times more). The SDK builds items of plain values only, and never changes
   * one once it is queued.
   */
  item: Record<string, unknown>;
  /** An execution's inline logs: the service counts them with the batch's logs. */
  logs: number;
}

export interface DeliveryOptions {
  endpoint: string;
  apiKey: string;
  /** Items queued at most (executions, logs and points alike); past it the oldest go. */
  maxQueueSize: number;
  flushIntervalMs: number;
  /** The envelope's `sdk` and `resource`. */
  envelope: Record<string, unknown>;
  /** Told what went wrong (never thrown): a dropped batch, a refusal. */
  onProblem: (message: string) => void;
  /** First retry after about this long, doubling up to maxBackoffMs. */
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /** Runs each request outside any request scope, so capture and propagation never see the SDK's own traffic. */
  untraced?: <T>(fn: () => T) => T;
}

export interface DeliveryStats {
  queued: number;
  sent: number;
  dropped: number;
}

const LIMITS: Record<ItemKind, number> = { executions: 1000, logs: 5000, metrics: 5000 };
const MAX_BODY = 5 * 2 ** 20;
/** Items serialized in one go (about 0.1 ms), between which the event loop runs. */
const SLICE = 100;
const RETRIED = new Set([429, 502, 503, 504]);
export const USER_AGENT = 'telemetry-service-node/0.1.0';

interface Answer {
  status: number;
  retryAfterMs: number | null;
}

/** `retry-after` in seconds or as an HTTP date, as milliseconds from now. */
function retryAfterOf(value: string | string[] | undefined): number | null {
  const v = Array.isArray(value) ? value[0] : value;
  if (!v) return null;
  const seconds = Number(v);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(v);
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : null;
}

export class Delivery {
  readonly #o: DeliveryOptions & { minBackoffMs: number; maxBackoffMs: number };
  readonly #url: URL;
  #queue: QueuedItem[] = [];
  /** Index of the first live item (shifting a large array per item would be quadratic). */
  #head = 0;
  #sending: Promise<void> | null = null;
  #timer: NodeJS.Timeout | null = null;
  #closed = false;
  /** Wakes a backoff wait early (close, flush with a deadline). */
  #wake: (() => void) | null = null;
  readonly #agent: http.Agent;
  readonly stats: DeliveryStats = { queued: 0, sent: 0, dropped: 0 };

  constructor(options: DeliveryOptions) {
    this.#o = { minBackoffMs: 500, maxBackoffMs: 30_000, ...options };
    this.#url = new URL('/api/ingest', options.endpoint);
    const Agent = this.#url.protocol === 'https:' ? https.Agent : http.Agent;
    this.#agent = new Agent({ keepAlive: true, maxSockets: 1 });
    this.#timer = setInterval(() => this.#kick(true), options.flushIntervalMs);
    this.#timer.unref();
  }

  /** Items queued, not counting the batch being sent. */
  get pending(): number {
    return this.#queue.length - this.#head;
  }

  /** Nothing queued and nothing being sent. */
  get idle(): boolean {
    return this.pending === 0 && this.#sending === null;
  }

  add(kind: ItemKind, item: Record<string, unknown>): void {
    if (this.#closed) {
      this.stats.dropped++;
      return;
    }
    const logs = kind === 'executions' && Array.isArray(item.logs) ? item.logs.length : 0;
    this.#queue.push({ kind, item, logs });
    while (this.pending > this.#o.maxQueueSize) {
      this.#head++;
      this.stats.dropped++;
    }
    this.#compact();
    this.stats.queued = this.pending;
    // A full batch goes at once; a smaller one waits for the interval (many small requests would cost the
    // application more than the seconds they save).
    if (this.pending >= LIMITS.executions) this.#kick(false);
  }

  #compact() {
    if (this.#head > 1024 && this.#head * 2 > this.#queue.length) {
      this.#queue = this.#queue.slice(this.#head);
      this.#head = 0;
    }
  }

  /**
   * Starts sending when nothing is being sent: every batch queued (`all`: the interval's tick, a flush), or only
   * full ones.
   */
  #kick(all: boolean): void {
    if (all) this.#sendAll = true;
    if (this.#sending || this.pending === 0) return;
    this.#sending = this.#drain().finally(() => {
      this.#sending = null;
    });
  }
  #sendAll = false;

  /** Takes the next batch off the queue. */
  #take(): QueuedItem[] {
    const counts: Record<ItemKind, number> = { executions: 0, logs: 0, metrics: 0 };
    const batch: QueuedItem[] = [];
    while (this.#head < this.#queue.length) {
      const next = this.#queue[this.#head]!;
      if (counts[next.kind] >= LIMITS[next.kind]) break;
      if (batch.length > 0 && counts.logs + next.logs > LIMITS.logs) break;
      batch.push(next);
      counts[next.kind]++;
      counts.logs += next.logs;
      this.#head++;
    }
    this.#compact();
    this.stats.queued = this.pending;
    return batch;
  }

  async #drain(): Promise<void> {
    while (this.pending > 0 && (this.#sendAll || this.pending >= LIMITS.executions)) {
      const batch = this.#take();
      if (this.pending === 0) this.#sendAll = false;
      await this.#deliver(batch);
    }
  }

  /** One batch, until it is stored, split, or given up (closed and out of time, or refused). */
  async #deliver(batch: QueuedItem[]): Promise<void> {
    const key = randomUUID();
    const body = await this.#body(batch);
    if (body === null) return;
    const text = body.text;
    if (text.length > MAX_BODY) {
      // Over 5 MiB of JSON: halves, as a 413 would have it (an item that alone is over it cannot be sent).
      if (batch.length === 1) return this.#drop(batch, 'an item is larger than the service takes; dropped');
      const half = Math.ceil(batch.length / 2);
      await this.#deliver(batch.slice(0, half));
      await this.#deliver(batch.slice(half));
      return;
    }
    let compressed: Buffer;
    try {
      compressed = await gzip(text, { level: GZIP_LEVEL });
    } catch (err) {
      this.#drop(batch, `a batch could not be compressed: ${(err as Error).message}`);
      return;
    }
    for (let attempt = 0; ; attempt++) {
      if (this.#closed) {
        this.#drop(batch, 'closed while the service was unavailable; a batch was dropped');
        return;
      }
      const answer = await this.#post(compressed, key);
      if (answer.status === 202 || answer.status === 200) {
        this.stats.sent += batch.length - body.dropped;
        return;
      }
      if (answer.status === 413) {
        if (batch.length === 1) {
          this.#drop(batch, 'an item is larger than the service takes; dropped');
          return;
        }
        const half = Math.ceil(batch.length / 2);
        await this.#deliver(batch.slice(0, half));
        await this.#deliver(batch.slice(half));
        return;
      }
      if (answer.status !== 0 && !RETRIED.has(answer.status)) {
        this.#drop(batch, `the service refused a batch (HTTP ${answer.status}); dropped`);
        return;
      }
      // Full jitter over an exponential backoff, never below the service's retry-after.
      const ceiling = Math.min(this.#o.maxBackoffMs, this.#o.minBackoffMs * 2 ** Math.min(attempt, 16));
      const wait = Math.max(answer.retryAfterMs ?? 0, Math.random() * ceiling);
      await this.#sleep(wait);
    }
  }

  #drop(batch: QueuedItem[], message: string): void {
    this.stats.dropped += batch.length;
    this.#o.onProblem(message);
  }

  /**
   * The batch's request body; null when nothing of it can be serialized. Serialized a slice of items at a time,
   * yielding to the event loop between slices: a whole batch at once would stall the application's requests for a
   * millisecond or more. An item that cannot be serialized (which the SDK's own builders never make) is dropped and
   * counted, and the rest is sent.
   */
  async #body(batch: QueuedItem[]): Promise<{ text: string; dropped: number } | null> {
    let out = JSON.stringify(this.#o.envelope).slice(0, -1);
    let sent = 0;
    let dropped = 0;
    for (const kind of ['executions', 'logs', 'metrics'] as const) {
      const items = batch.filter((q) => q.kind === kind);
      const parts: string[] = [];
      for (let i = 0; i < items.length; i += SLICE) {
        if (i > 0) await new Promise<void>((r) => setImmediate(r));
        const slice = items.slice(i, i + SLICE);
        try {
          parts.push(JSON.stringify(slice.map((q) => q.item)).slice(1, -1));
        } catch {
          for (const q of slice) {
            try {
              parts.push(JSON.stringify(q.item));
            } catch {
              this.#drop([q], 'an item could not be serialized; dropped');
              dropped++;
            }
          }
        }
      }
      if (parts.length === 0) continue;
      out += `${out.endsWith('{') ? '' : ','}"${kind}":[${parts.join(',')}]`;
      sent += parts.length;
    }
    return sent > 0 ? { text: `${out}}`, dropped } : null;
  }

  /** The request being sent, for close() to abort once its time is up. */
  #inFlight: http.ClientRequest | null = null;

  #post(body: Buffer, key: string): Promise<Answer> {
    const send = () =>
      new Promise<Answer>((resolve) => {
        const lib = this.#url.protocol === 'https:' ? https : http;
        const req = lib.request(
          this.#url,
          {
            method: 'POST',
            agent: this.#agent,
            headers: {
              authorization: `Bearer ${this.#o.apiKey}`,
              'content-type': 'application/json',
              'content-encoding': 'gzip',
              'content-length': body.length,
              'idempotency-key': key,
              'user-agent': USER_AGENT,
            },
            timeout: 30_000,
          },
          (res) => {
            res.resume();
            res.on('end', () =>
              resolve({
                status: res.statusCode ?? 0,
                retryAfterMs: retryAfterOf(res.headers['retry-after']),
              }),
            );
            res.on('error', () => resolve({ status: 0, retryAfterMs: null }));
          },
        );
        req.on('timeout', () => req.destroy(new Error('timed out')));
        req.on('error', () => resolve({ status: 0, retryAfterMs: null }));
        req.on('close', () => {
          if (this.#inFlight === req) this.#inFlight = null;
        });
        this.#inFlight = req;
        req.end(body);
      });
    return this.#o.untraced ? this.#o.untraced(send) : send();
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      timer.unref();
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = done;
    });
  }

  /**
   * Sends everything queued so far; resolves true when it all went, false when `timeoutMs` passed first (what is
   * left stays queued, and goes on being retried).
   */
  async flush(timeoutMs = 10_000): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      this.#kick(true);
      const sending = this.#sending;
      if (!sending) return this.pending === 0;
      const left = deadline - Date.now();
      if (left <= 0) return false;
      let timer: NodeJS.Timeout | undefined;
      const timedOut = await Promise.race([
        sending.then(() => false),
        new Promise<boolean>((r) => {
          timer = setTimeout(() => r(true), left);
        }),
      ]);
      clearTimeout(timer);
      if (timedOut) return false;
    }
  }

  /** Flushes for at most `timeoutMs`, then stops: later items are dropped (counted). */
  async close(timeoutMs = 10_000): Promise<boolean> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    const ok = await this.flush(timeoutMs);
    // Out of time: the batch being sent is abandoned (its request aborted, not waited for) and dropped.
    this.#closed = true;
    this.#wake?.();
    this.#inFlight?.destroy();
    if (!ok) {
      // What is still queued will not be sent.
      this.stats.dropped += this.pending;
      this.#head = this.#queue.length;
      this.stats.queued = 0;
    }
    await this.#sending;
    this.#agent.destroy();
    return ok;
  }
}
