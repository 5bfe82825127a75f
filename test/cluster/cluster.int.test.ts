import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INGEST_STREAM, PIPELINE_CONSUMER } from '../../broker/provision.js';
import { type Cluster, startCluster } from '../../cluster.js';
import { tempDir } from '../support/env.js';

/**
 * Scale-out under faults (CONTRACT §15): the cluster `npm run cluster` starts (3 NATS nodes, streams and buckets
 * replicated three times, two api and two pipeline processes on one DATA_DIR), under a steady load sent through
 * both api processes by senders that resend every unanswered or refused request under its idempotency key, as an
 * SDK does. Meanwhile one NATS node is SIGKILLed, then one pipeline process, then both are started again; then the
 * other pipeline process is stalled past the ack wait at a commit point, several times, and resumed. In the end
 * every accepted execution must be listed exactly once by each api process; a key revoked on one api process must
 * be refused by the other within a second.
 */

const here = path.dirname(fileURLToPath(import.meta.url));
const mainJs = path.resolve(here, '..', '..', 'dist', 'main.js');

const SENDERS = 4;
const PER_REQUEST = 50;
/** How many times a pipeline process is stalled past the ack wait. */
const STALLS = 4;

let dir: string;
let cluster: Cluster;

beforeAll(async () => {
  dir = await tempDir('cluster');
  cluster = await startCluster({
    dataDir: path.join(dir, 'data'),
    mainJs,
    restartNodes: false,
    env: {
      FLUSH_INTERVAL_MS: '100',
      // A killed or stalled pipeline's messages come back after this (the live ones are marked in progress every
      // second).
      CONSUMER_ACK_WAIT_MS: '3000',
      // SIGUSR2 stalls a pipeline process at its next commit point (main.ts): the test's fault injection.
      FAULT_STALL_ON_SIGUSR2: '1',
      PIPELINE_WORKERS: '1',
      // The checks read every page of the list: not limited as a person's session is.
      READ_RATE_PER_SEC: '100000',
      READ_BURST: '100000',
      INGEST_RATE_PER_SEC: '100000',
      INGEST_BURST: '100000',
    },
  });
}, 120_000);
afterAll(async () => {
  await cluster?.stop();
  if (dir && !process.env.KEEP_TEST_DIR) await fs.rm(dir, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function call<T>(
  base: string,
  method: string,
  url: string,
  token: string,
  body?: unknown,
): Promise<{ status: number; json: T }> {
  const res = await fetch(`${base}${url}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(15_000),
  });
  const text = await res.text();
  return { status: res.status, json: (text ? JSON.parse(text) : null) as T };
}

/**
 * Every execution id the api process lists in [from, to), page by page (with repeats, if any), a second at a time
 * (a list pages through at most 10,000 rows; `to` is exclusive, so no row is in two windows).
 */
async function listAll(base: string, token: string, from: number, to: number): Promise<string[]> {
  const ids: string[] = [];
  for (let t = from; t < to; t += 1000) {
    const window = `from=${new Date(t).toISOString()}&to=${new Date(Math.min(to, t + 1000)).toISOString()}`;
    for (let page = 1; ; page++) {
      const r = await call<{ data: { executionId: string }[]; hasMore: boolean }>(
        base,
        'GET',
        `/api/executions?${window}&pageSize=200&page=${page}&sort=startedAt`,
        token,
      );
      expect(r.status, JSON.stringify(r.json)).toBe(200);
      ids.push(...r.json.data.map((e) => e.executionId));
      if (!r.json.hasMore) break;
    }
  }
  return ids;
}

/** Whether the process is stopped (state T in /proc) within `ms`. */
async function stoppedWithin(pid: number, ms: number): Promise<boolean> {
  for (const deadline = Date.now() + ms; Date.now() < deadline; await sleep(20)) {
    const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
    // The state follows the command name, which is in parentheses.
    if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('T')) return true;
  }
  return false;
}

describe('the cluster', () => {
  it('keeps every accepted execution exactly once through a NATS node and a pipeline process killed and restarted', async () => {
    const api1 = cluster.api[0]!.url!;
    const api2 = cluster.api[1]!.url!;
    const signup = await fetch(`${api1}/api/auth/signup`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'cluster@example.com', password: 'long enough password' }),
    });
    expect(signup.status).toBe(201);
    const { session, testKey } = (await signup.json()) as {
      session: { token: string };
      testKey: { key: string };
    };
    const from = Date.now();

    // The senders: each request resent (to either api process, under its idempotency key) until it is accepted.
    const accepted = new Set<string>();
    const refusals: Record<string, number> = {};
    let stopSending = false;
    let requests = 0;
    const acceptedAt: number[] = [];
    const sender = async (s: number) => {
      for (let n = 0; !stopSending; n++) {
        const ids = Array.from({ length: PER_REQUEST }, (_, i) => `c${s}-${n}-${i}`);
        const body = {
          resource: { service: 'cluster' },
          executions: ids.map((id, i) => ({
            executionId: id,
            endpoint: `/items/${i}`,
            startedAt: Date.now(),
            durationMs: 5,
            statusCode: 200,
          })),
        };
        const key = `k-${s}-${n}`;
        for (let attempt = 0; ; attempt++) {
          const base = (n + attempt) % 2 === 0 ? api1 : api2;
          let status: number | string;
          try {
            const res = await fetch(`${base}/api/ingest`, {
              method: 'POST',
              headers: {
                authorization: `Bearer ${testKey.key}`,
                'content-type': 'application/json',
                'idempotency-key': key,
              },
              body: JSON.stringify(body),
              signal: AbortSignal.timeout(10_000),
            });
            await res.arrayBuffer();
            status = res.status;
          } catch (err) {
            // The connection reset or timed out: resent, as an SDK does.
            status = (err as Error).name;
          }
          if (status === 202) break;
          refusals[status] = (refusals[status] ?? 0) + 1;
          // A lost node may cost a 503 (retry-after) or a connection; anything else is a failure of the test.
          if (typeof status === 'number' && status !== 503)
            throw new Error(`ingest answered ${status} during the faults`);
          await sleep(Math.min(1000, 50 * 2 ** attempt));
        }
        requests++;
        acceptedAt.push(Date.now());
        for (const id of ids) accepted.add(id);
        // A steady load, not the most the machine takes: about 4 × 50 executions every 50–100 ms.
        await sleep(50);
      }
    };
    const senders = Array.from({ length: SENDERS }, (_, s) => sender(s));

    const mark = (what: string) => ({ what, at: Date.now(), accepted: accepted.size });
    const timeline = [mark('load started')];
    await sleep(3000);
    // The node that leads the ingest stream: its death moves the stream's leadership (the hard case).
    const nc = await connect({ servers: cluster.natsUrl.split(',') });
    const leader = (await (await jetstreamManager(nc)).streams.info(INGEST_STREAM)).cluster?.leader ?? 'n1';
    await nc.close();
    const node = cluster.nats[Number(leader.slice(1)) - 1]!;
    await node.kill();
    timeline.push(mark(`NATS node ${leader} (the stream's leader) killed`));
    await sleep(4000);
    const pipeline = cluster.pipeline[0]!;
    await pipeline.stop('SIGKILL');
    timeline.push(mark('pipeline 1 killed'));
    await sleep(4000);
    await node.start();
    timeline.push(mark(`NATS node ${leader} restarted`));
    await pipeline.start();
    timeline.push(mark('pipeline 1 restarted'));
    await sleep(3000);
    // A pipeline process that stalls (a long pause, a hung disk) for longer than the ack wait while it holds
    // messages, in a batch past its checks and about to be committed: they go to the other process, which commits
    // them; the stalled one then resumes where it stopped. SIGUSR2 asks it to stop itself (SIGSTOP) right there.
    const stalled = cluster.pipeline[1]!;
    for (let i = 0; i < STALLS; i++) {
      process.kill(stalled.pid!, 'SIGUSR2');
      expect(await stoppedWithin(stalled.pid!, 15_000)).toBe(true);
      timeline.push(mark('pipeline 2 stalled at a commit point'));
      await sleep(5000);
      process.kill(stalled.pid!, 'SIGCONT');
      timeline.push(mark('pipeline 2 resumed'));
      await sleep(1000);
    }
    stopSending = true;
    await Promise.all(senders);
    const loadEnded = Date.now();
    // When the pipelines have nothing left (pending or held), measured beside the lists' wait.
    const watch = await connect({ servers: cluster.natsUrl.split(',') });
    const jsm = await jetstreamManager(watch);
    const drained = (async () => {
      for (const deadline = Date.now() + 150_000; Date.now() < deadline; await sleep(250)) {
        const c = await jsm.consumers.info(INGEST_STREAM, PIPELINE_CONSUMER);
        if (c.num_pending === 0 && c.num_ack_pending === 0) return Date.now() - loadEnded;
      }
      return -1;
    })();
    timeline.push(mark('load stopped'));

    // Every accepted execution listed, exactly once, by each api process.
    let lists: string[][] = [];
    // A pass reads every page of both lists (some seconds for 100k executions): the figure is when the pass that
    // found everything began.
    let passStarted = Date.now();
    for (const deadline = Date.now() + 90_000; Date.now() < deadline; await sleep(500)) {
      passStarted = Date.now();
      lists = await Promise.all(
        [api1!, api2!].map((base) => listAll(base, session.token, from, loadEnded + 1)),
      );
      if (lists.every((l) => new Set(l).size >= accepted.size)) break;
    }
    const visibleAfterMs = passStarted - loadEnded;
    const listPassMs = Date.now() - passStarted;
    // Then, once nothing is left for the pipelines (a late second commit of one request would land now), the
    // lists that are checked.
    const drainedAfterMs = await drained;
    await watch.close();
    await sleep(2000);
    lists = await Promise.all(
      [api1!, api2!].map((base) => listAll(base, session.token, from, loadEnded + 1)),
    );
    const figures = lists.map((ids) => {
      const seen = new Set(ids);
      return {
        listed: ids.length,
        lost: [...accepted].filter((id) => !seen.has(id)).length,
        duplicated: ids.length - seen.size,
        unknown: [...seen].filter((id) => !accepted.has(id)).length,
      };
    });
    const longestGap = acceptedAt.reduce((g, t, i) => (i === 0 ? g : Math.max(g, t - acceptedAt[i - 1]!)), 0);
    console.log(
      JSON.stringify({
        requests,
        accepted: accepted.size,
        refusals,
        longestGapWithoutAnAcceptMs: longestGap,
        allVisibleMsAfterLoadStopped: visibleAfterMs,
        pipelinesDrainedMsAfterLoadStopped: drainedAfterMs,
        listPassMs,
        timeline: timeline.map((t) => ({ ...t, at: t.at - timeline[0]!.at })),
        perApi: figures,
      }),
    );
    expect(accepted.size).toBeGreaterThan(0);
    for (const f of figures) {
      expect(f.lost).toBe(0);
      expect(f.duplicated).toBe(0);
      // An id listed that no answer accepted: a request accepted whose answer was lost, then resent and accepted.
      expect(f.unknown).toBe(0);
    }

    // A key made on one api process works on the other at once; revoked there, the other refuses it within 1 s.
    const made = await call<{ key: string; id: string }>(api1, 'POST', '/api/keys', session.token, {
      name: 'across',
      mode: 'test',
      permissions: ['ingest'],
    });
    expect(made.status).toBe(201);
    const empty = { resource: { service: 'cluster' }, executions: [] };
    const ingestWith = (base: string) =>
      fetch(`${base}/api/ingest`, {
        method: 'POST',
        headers: { authorization: `Bearer ${made.json.key}`, 'content-type': 'application/json' },
        body: JSON.stringify(empty),
      }).then((r) => r.status);
    expect(await ingestWith(api2)).toBe(202);
    expect((await call(api1, 'DELETE', `/api/keys/${made.json.id}`, session.token)).status).toBe(204);
    const revokedAt = Date.now();
    let refusedAfter = -1;
    while (Date.now() - revokedAt < 5000) {
      if ((await ingestWith(api2)) === 401) {
        refusedAfter = Date.now() - revokedAt;
        break;
      }
      await sleep(10);
    }
    console.log(JSON.stringify({ revokedKeyRefusedByTheOtherApiAfterMs: refusedAfter }));
    // Refused (the figure, printed above, is milliseconds; the bound here is loose for a loaded machine).
    expect(refusedAfter).toBeGreaterThanOrEqual(0);
  }, 240_000);
});
