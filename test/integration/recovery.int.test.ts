import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectBroker } from '../../broker/connection.js';
import { INGEST_STREAM, PIPELINE_CONSUMER } from '../../broker/provision.js';
import { Pipeline } from '../../pipeline/pipeline.js';
import {
  createTenant,
  eventually,
  execution,
  get,
  ingest,
  json,
  startStack,
  type TestStack,
  type TestTenant,
} from '../support/env.js';

const silent = { info() {}, warn() {}, error() {}, debug() {} };

let stack: TestStack;
let tenant: TestTenant;

beforeAll(async () => {
  // The API alone: the pipelines are started by hand so one can die mid-commit.
  stack = await startStack('recovery', { FLUSH_INTERVAL_MS: '50' }, { role: 'api' });
  tenant = await createTenant(stack.service);
});
afterAll(async () => {
  await stack?.close();
});

const total = async (query: string) => {
  const res = await get(stack.service, tenant.keys.test!, `/api/executions${query}`);
  expect(res.statusCode).toBe(200);
  return json<{ total: number }>(res).total;
};

const issuesOf = async (service: string) => {
  const res = await get(stack.service, tenant.keys.test!, '/api/issues?sort=-occurrences');
  expect(res.statusCode).toBe(200);
  return json<{ data: { service: string; occurrences: { total: number } }[] }>(res).data.filter(
    (i) => i.service === service,
  );
};

describe('crash between file commit and ack', () => {
  it('a restarted pipeline loses nothing and adds no row twice, and neither loses an issue nor counts it twice', async () => {
    const service = `recovery-${Date.now()}`;
    // One execution in four fails the same way: one issue, 50 occurrences.
    const batches = Array.from({ length: 5 }, (_, b) =>
      Array.from({ length: 40 }, (_, i) =>
        execution({
          service,
          executionId: `rc-${b}-${i}`,
          ...(i % 4 === 0
            ? { statusCode: 500, exception: { type: 'DbError', message: `deadlock on row ${b * 100 + i}` } }
            : {}),
        }),
      ),
    );
    for (const executions of batches) {
      expect((await ingest(stack.service, tenant.keys.test!, { executions })).statusCode).toBe(202);
    }

    // First pipeline: commits its first batch, then "dies" before acking (its connection is cut).
    const broker1 = await connectBroker(stack.nats.url, silent, 'pipeline-1');
    let crashed = false;
    const p1 = new Pipeline({
      broker: broker1,
      config: stack.config,
      control: stack.service.control,
      log: silent,
      afterCommit: async () => {
        crashed = true;
        await broker1.nc.close();
        throw new Error('simulated crash after commit');
      },
    });
    await p1.start();
    await eventually(
      async () => crashed,
      (c) => c,
    );
    await p1.stop();
    // The committed rows are visible even though nothing was acked, and so is their issue: its upsert came
    // before the commit point.
    const afterCrash = await total(`?serviceName=${service}`);
    expect(afterCrash).toBeGreaterThan(0);
    const issuesAfterCrash = await issuesOf(service);
    expect(issuesAfterCrash).toHaveLength(1);
    expect(issuesAfterCrash[0]!.occurrences.total).toBe(await total(`?serviceName=${service}&status=failed`));

    // Second pipeline: gets every unacked message again (ack wait 2 s) and must skip the committed ones.
    const broker2 = await connectBroker(stack.nats.url, silent, 'pipeline-2');
    const p2 = new Pipeline({
      broker: broker2,
      config: stack.config,
      control: stack.service.control,
      log: silent,
    });
    await p2.start();
    try {
      await eventually(
        () => total(`?serviceName=${service}`),
        (n) => n === 200,
        20_000,
      );
      await p2.drained();
      expect(await total(`?serviceName=${service}`)).toBe(200);
      for (const b of [0, 4]) expect(await total(`?serviceName=${service}&executionId=rc-${b}-7`)).toBe(1);
      expect(p2.stats().redeliveredSkipped).toBeGreaterThan(0);
      // Counted from the stored rows: every occurrence once, the redelivered ones included.
      const issues = await issuesOf(service);
      expect(issues).toHaveLength(1);
      expect(issues[0]!.occurrences.total).toBe(50);
    } finally {
      await p2.stop();
      await broker2.close();
    }
  });
});

describe('a message held longer than the ack wait', () => {
  it('is not redelivered into a second copy while the pipeline still holds it', async () => {
    // A flush interval far beyond the ack wait: without in-progress signals the server would redeliver the
    // message several times before the first copy is committed.
    const slow = await startStack('held', { CONSUMER_ACK_WAIT_MS: '1000', FLUSH_INTERVAL_MS: '3500' });
    try {
      const t = await createTenant(slow.service);
      const ex = execution({ service: 'held' });
      expect((await ingest(slow.service, t.keys.test!, { executions: [ex] })).statusCode).toBe(202);
      await slow.service.pipeline!.drained();
      // Every delivery the server made (redeliveries included) has reached the pipeline: a late copy would be
      // written by now, not still on its way.
      const { delivered } = await slow.service.broker.jsm.consumers.info(INGEST_STREAM, PIPELINE_CONSUMER);
      await eventually(
        async () => {
          const s = slow.service.pipeline!.stats();
          return s.messages + s.duplicateDeliveries;
        },
        (seen) => seen >= delivered.consumer_seq,
      );
      await slow.service.pipeline!.drained();
      const res = await get(slow.service, t.keys.test!, '/api/executions?serviceName=held');
      expect(json<{ total: number }>(res).total).toBe(1);
    } finally {
      await slow.close();
    }
  });
});

describe('the compaction lease', () => {
  it('is one holder’s at a time, renewed by it, and passes to another once its holder stops renewing (its death)', async () => {
    const control = stack.service.control;
    const name = `test-lease-${Date.now()}`;
    expect(await control.tryLease(name, 'writer-a', 1500)).toBe(true);
    // Another writer is refused while it is held; the holder renews it.
    expect(await control.tryLease(name, 'writer-b', 1500)).toBe(false);
    expect(await control.tryLease(name, 'writer-a', 1500)).toBe(true);
    // The holder dies (renews no more): once the lease ran out, the other takes it ...
    expect(
      await eventually(
        () => control.tryLease(name, 'writer-b', 60_000),
        (held) => held,
        5000,
      ),
    ).toBe(true);
    // ... and the old holder, back, is refused: its next partition is not compacted (storage/compaction.ts).
    expect(await control.tryLease(name, 'writer-a', 1500)).toBe(false);
  });
});
