import { type JetStreamClient, type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { packOutboundWithoutZeroing, presizeMessageBuffers } from './client-buffers.js';

export interface Broker {
  readonly nc: NatsConnection;
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  readonly kvm: Kvm;
  /** False between a disconnect and the reconnect that follows it: ingest answers 503 then. */
  isConnected(): boolean;
  close(): Promise<void>;
}

export interface BrokerLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** Connects and keeps reconnecting for as long as the process lives; a broker outage is never fatal. */
export async function connectBroker(url: string, log: BrokerLog, name = 'svc'): Promise<Broker> {
  if (!presizeMessageBuffers())
    log.warn(
      {},
      'the NATS client parser is not the expected one: large messages are read in growing buffers',
    );
  if (!packOutboundWithoutZeroing())
    log.warn(
      {},
      'the NATS client outbound buffer is not the expected one: publishes are packed as the client does',
    );
  const nc = await connect({
    // A cluster's nodes, comma-separated: the client connects to one and fails over to the others.
    servers: url.split(',').map((u) => u.trim()),
    name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    pingInterval: 5_000,
    // Publishes made while disconnected must fail fast (503), not sit in a buffer.
    reconnect: true,
    // By default every request (each publish's ack among them) makes an Error up front to carry the caller's
    // stack should it fail: about 1 % of the main thread under ingest load. A failed publish is answered 503 either
    // way; its log line loses the caller's stack.
    noAsyncTraces: true,
  });
  let connected = true;
  (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect') {
        connected = false;
        log.warn({ server: s.server }, 'broker disconnected');
      } else if (s.type === 'reconnect') {
        connected = true;
        log.info({ server: s.server }, 'broker reconnected');
      }
    }
  })().catch(() => {});
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  return {
    nc,
    js,
    jsm,
    kvm: new Kvm(nc),
    isConnected: () => connected && !nc.isClosed(),
    close: async () => {
      if (!nc.isClosed()) await nc.drain().catch(() => nc.close());
    },
  };
}
