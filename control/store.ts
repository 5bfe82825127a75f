import type { KV } from '@nats-io/kv';
import type { Broker } from '../broker/connection.js';
import { BUCKETS } from '../broker/provision.js';

/** The control plane's buckets, opened once per process. */
export type ControlStore = Readonly<Record<keyof typeof BUCKETS, KV>>;

export async function openControlStore(broker: Broker): Promise<ControlStore> {
  const names = Object.keys(BUCKETS) as (keyof typeof BUCKETS)[];
  const kvs = await Promise.all(names.map((n) => broker.kvm.open(BUCKETS[n])));
  return Object.freeze(Object.fromEntries(names.map((n, i) => [n, kvs[i]!]))) as ControlStore;
}
