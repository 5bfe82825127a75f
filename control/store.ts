import type { KV } from '@nats-io/kv';
import type { Broker } from '../broker/connection.js';
import { BUCKETS } from '../broker/provision.js';

/** The control plane's buckets, opened once per process. */
export interface ControlStore {
  readonly workspaces: KV;
  readonly apiKeys: KV;
  readonly meta: KV;
}

export async function openControlStore(broker: Broker): Promise<ControlStore> {
  const [workspaces, apiKeys, meta] = await Promise.all([
    broker.kvm.open(BUCKETS.workspaces),
    broker.kvm.open(BUCKETS.apiKeys),
    broker.kvm.open(BUCKETS.meta),
  ]);
  return { workspaces, apiKeys, meta };
}
