import type { KV } from '@nats-io/kv';
import type { z } from 'zod';

export interface MirrorLog {
  warn(obj: object, msg: string): void;
}

/**
 * An in-memory copy of a bucket, kept current by a watch: lookups cost no round trip, and a change made by any
 * process (a revoked key, an ended session, new settings) reaches every process within milliseconds. A key
 * missing from the copy is read from the bucket directly, so a record created a moment ago on another process
 * is never refused.
 */
export class BucketMirror<T> {
  readonly #kv: KV;
  readonly #schema: z.ZodType<T>;
  readonly #log: MirrorLog;
  readonly #map = new Map<string, T>();
  /** The revision each key was last set at: an older event never overwrites a newer value. */
  readonly #revisions = new Map<string, number>();
  #stop: (() => void) | null = null;
  readonly #listeners = new Set<(key: string, value: T | null) => void>();

  constructor(kv: KV, schema: z.ZodType<T>, log: MirrorLog) {
    this.#kv = kv;
    this.#schema = schema;
    this.#log = log;
  }

  /** Resolves once the bucket's current values are loaded. */
  async start(): Promise<void> {
    const iter = await this.#kv.watch();
    this.#stop = () => iter.stop();
    let resolveReady: () => void = () => {};
    const ready = new Promise<void>((r) => {
      resolveReady = r;
    });
    // An empty bucket sends nothing before its first update: ask how many values there are.
    const status = await this.#kv.status();
    let pending = status.values;
    if (pending === 0) resolveReady();
    (async () => {
      for await (const e of iter) {
        if ((this.#revisions.get(e.key) ?? 0) < e.revision) {
          if (e.operation === 'PUT') {
            const parsed = this.#schema.safeParse(e.json());
            if (parsed.success) this.#set(e.key, parsed.data, e.revision);
            else this.#log.warn({ bucket: e.bucket, key: e.key }, 'unreadable record skipped');
          } else this.#set(e.key, null, e.revision);
        }
        if (pending > 0 && --pending === 0) resolveReady();
        if (e.delta === 0) resolveReady();
      }
    })().catch((err) => this.#log.warn({ err }, 'bucket watch ended'));
    // Belt and braces: a snapshot count that raced with a write must not hang the start.
    await Promise.race([ready, new Promise((r) => setTimeout(r, 5000))]);
  }

  #set(key: string, value: T | null, revision: number): void {
    this.#revisions.set(key, revision);
    if (value === null) this.#map.delete(key);
    else this.#map.set(key, value);
    for (const l of this.#listeners) l(key, value);
  }

  /**
   * Read-your-writes: this process's own write is in its copy at once, not a watch round trip later. A
   * deletion is final (the buckets never reuse a deleted key), so no late event can bring the key back.
   */
  remember(key: string, value: T | null, revision = Number.MAX_SAFE_INTEGER): void {
    if ((this.#revisions.get(key) ?? 0) < revision) this.#set(key, value, revision);
  }

  /** Called on every change after start (value null: deleted). */
  onChange(listener: (key: string, value: T | null) => void): void {
    this.#listeners.add(listener);
  }

  peek(key: string): T | undefined {
    return this.#map.get(key);
  }

  /** The copy's value, or the bucket's when the copy has not seen the key yet. */
  async get(key: string): Promise<T | null> {
    const mine = this.#map.get(key);
    if (mine !== undefined) return mine;
    const entry = await this.#kv.get(key);
    if (entry?.operation !== 'PUT') return null;
    const parsed = this.#schema.safeParse(entry.json());
    return parsed.success ? parsed.data : null;
  }

  /** Every value whose key starts with `prefix`. */
  withPrefix(prefix: string): [string, T][] {
    const out: [string, T][] = [];
    for (const [k, v] of this.#map) if (k.startsWith(prefix)) out.push([k, v]);
    return out;
  }

  stop(): void {
    this.#stop?.();
  }
}
