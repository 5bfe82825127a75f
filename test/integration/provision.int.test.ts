import fs from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Broker, connectBroker } from '../../broker/connection.js';
import type { NatsServerHandle } from '../../broker/nats-server.js';
import { INGEST_STREAM, PIPELINE_CONSUMER, provision } from '../../broker/provision.js';
import { eventually, startTestNats, tempDir } from '../support/env.js';

const silent = { info() {}, warn() {}, error() {}, debug() {} };

let dir: string;
let nats: NatsServerHandle;
let broker: Broker;

beforeAll(async () => {
  dir = await tempDir('provision');
  nats = await startTestNats(dir);
  broker = await connectBroker(nats.url, silent, 'provision-test');
});
afterAll(async () => {
  await broker?.close();
  await nats?.stop();
  await fs.rm(dir, { recursive: true, force: true });
});

const opts = { maxAgeHours: 0, maxBytes: -1, maxMsgBytes: 1 << 20, ackWaitMs: 60_000, maxAckPending: 1000 };

describe('provision', () => {
  it('gives back at once, to a process that embeds the broker, what a killed process held unacked', async () => {
    await provision(broker.jsm, broker.kvm, opts);
    await broker.js.publish('ingest.ws_a.test', new TextEncoder().encode('{}'), { msgID: 'held-1' });
    const consumer = () => broker.js.consumers.get(INGEST_STREAM, PIPELINE_CONSUMER);
    // Delivered and never acked: as a process killed mid-batch leaves it.
    const first = await (await consumer()).next({ expires: 5000 });
    expect(first?.seq).toBe(1);

    // Another process may hold it: a shared consumer waits for the ack wait (a minute here) before redelivering.
    await provision(broker.jsm, broker.kvm, opts);
    expect(await (await consumer()).next({ expires: 1500 })).toBeNull();

    // The sole user of its embedded broker knows the holder is gone: the message comes back now.
    const notes: string[] = [];
    await provision(broker.jsm, broker.kvm, { ...opts, soleConsumer: true, log: (m) => notes.push(m) });
    const again = await (await consumer()).next({ expires: 5000 });
    expect(again?.seq).toBe(1);
    again!.ack();
    expect(notes).toEqual(['1 payloads held by a stopped process are delivered again now']);
    // Nothing held: a restart keeps the consumer as it is.
    await eventually(
      async () => (await broker.jsm.consumers.info(INGEST_STREAM, PIPELINE_CONSUMER)).num_ack_pending,
      (n) => n === 0,
    );
    await provision(broker.jsm, broker.kvm, { ...opts, soleConsumer: true, log: (m) => notes.push(m) });
    expect(notes).toHaveLength(1);
    expect((await broker.jsm.streams.info(INGEST_STREAM)).state.messages).toBe(0);
  });
});
