import { type Client, createClient, type InitOptions } from './client.js';

export type { Client, InitOptions } from './client.js';
export type { DeliveryStats } from './delivery.js';
export { Delivery } from './delivery.js';
export type { IgnoreRule } from './paths.js';

let instance: Client | null = null;

/**
 * Starts capturing (CONTRACT §13): every inbound request of this process's node:http and node:https servers, with
 * outbound propagation, logs and metrics through the returned client. Once per process: a second call answers the
 * client of the first (close() it first to start over).
 */
export function init(options: InitOptions = {}): Client {
  if (instance) return instance;
  const client = createClient(options);
  const close = client.close.bind(client);
  instance = {
    ...client,
    close: async (timeoutMs?: number) => {
      instance = null;
      return close(timeoutMs);
    },
  };
  return instance;
}

/** The client init() made, or null. */
export function getClient(): Client | null {
  return instance;
}
