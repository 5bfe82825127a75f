import fs from 'node:fs/promises';
import path from 'node:path';
import type { KV } from '@nats-io/kv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMMIT_CLAIM_TTL_MS, COMMIT_CLAIMS_BUCKET } from '../../broker/provision.js';
import { CommitClaims } from '../../pipeline/commit-claims.js';
import { type CommitEntry, CommitJournal, commitId, NotCommitted } from '../../storage/commit-journal.js';
import { startTestBroker, type TestBroker } from '../support/env.js';

/**
 * Two pipeline processes, W and X, sharing one journal and one claims bucket (a real nats-server, a real
 * directory): what each may commit when both hold a copy of one message, W's commit in progress or stalled.
 */

const silent = { info() {}, warn() {}, error() {}, debug() {} };

let env: TestBroker;
let dir: string;
let kv: KV;

beforeAll(async () => {
  env = await startTestBroker('claims');
  dir = env.dir;
  kv = await env.broker.kvm.create(COMMIT_CLAIMS_BUCKET, { history: 1, ttl: COMMIT_CLAIM_TTL_MS });
});
afterAll(async () => {
  await env?.close();
});

let run = 0;

/** A writer: its journal and its claims, in one data directory shared with the other. */
async function writer(dataDir: string, id: string, staleMs: number) {
  const journal = new CommitJournal(dataDir, id);
  await journal.recover();
  return { journal, claims: new CommitClaims({ kv, journal, staleMs, log: silent }) };
}

/** A commit of one message with one file, as BatchWriter makes it. */
async function entryFor(
  dataDir: string,
  journal: CommitJournal,
  no: number,
  d: { seq: number; id: string; storedAt: number },
): Promise<CommitEntry> {
  const tmpPath = path.join(dataDir, `${commitId(journal.writerId, no)}.parquet.tmp`);
  await fs.writeFile(tmpPath, 'rows');
  return {
    writerId: journal.writerId,
    commitNo: no,
    seqs: [d.seq],
    ids: [d.id],
    storedAt: [d.storedAt],
    files: [{ tmpPath, finalPath: tmpPath.replace(/\.tmp$/, '') }],
  };
}

async function setUp() {
  const dataDir = path.join(dir, `data-${++run}`);
  await fs.mkdir(dataDir, { recursive: true });
  // The same request, delivered to W first, then (redelivered) to X.
  const m = { seq: 7, id: `request-${run}`, storedAt: Date.now() };
  return { dataDir, m };
}

describe('commit claims', () => {
  it('hold a message for the commit in progress: the other process waits for it, then finds it committed', async () => {
    const { dataDir, m } = await setUp();
    const w = await writer(dataDir, 'wW', 60_000);
    const x = await writer(dataDir, 'wX', 60_000);
    const wNo = w.journal.nextCommitNo();
    const wClaim = await w.claims.claim([m], commitId('wW', wNo));
    expect(wClaim.contested.size).toBe(0);

    // X, holding a copy, cannot claim it while W's commit is in progress (and not stale).
    const xNo = x.journal.nextCommitNo();
    const xFirst = await x.claims.claim([m], commitId('wX', xNo));
    expect([...xFirst.contested]).toEqual([m.seq]);

    await w.journal.commit(await entryFor(dataDir, w.journal, wNo, m), wClaim.lapsed);
    // Once W's commit is published its claim is taken over, and the journal says the request is committed.
    const xAgain = await x.claims.claim([m], commitId('wX', x.journal.nextCommitNo()));
    expect(xAgain.contested.size).toBe(0);
    expect([...(await x.journal.committedAmong([m]))]).toEqual([m.seq]);
    expect(x.claims.stats).toMatchObject({ contested: 1, takenOver: 1, fenced: 0 });
  });

  it('fence a commit that stalled past its claim: its writer then cannot publish it, and the message is committed once', async () => {
    const { dataDir, m } = await setUp();
    const w = await writer(dataDir, 'wW', 60_000);
    // X judges a claim stale at once (in the service: after the ack wait).
    const x = await writer(dataDir, 'wX', 0);
    const wNo = w.journal.nextCommitNo();
    const wClaim = await w.claims.claim([m], commitId('wW', wNo));
    const wEntry = await entryFor(dataDir, w.journal, wNo, m);
    // W stalls here, between its checks and its commit point. X takes the message over.
    const xNo = x.journal.nextCommitNo();
    const xClaim = await x.claims.claim([m], commitId('wX', xNo));
    expect(xClaim.contested.size).toBe(0);
    expect(x.claims.stats.fenced).toBe(1);
    expect(await x.journal.state(commitId('wW', wNo))).toBe('fenced');
    expect((await x.journal.committedAmong([m])).size).toBe(0);
    await x.journal.commit(await entryFor(dataDir, x.journal, xNo, m), xClaim.lapsed);

    // W resumes: its commit point is refused, and its temporary file never becomes visible.
    await expect(w.journal.commit(wEntry, wClaim.lapsed)).rejects.toBeInstanceOf(NotCommitted);
    const visible = (await fs.readdir(dataDir)).filter((f) => f.endsWith('.parquet'));
    expect(visible).toEqual([`${commitId('wX', xNo)}.parquet`]);
    // A third process reading the journal finds the request in X's commit only.
    const reader = new CommitJournal(dataDir, 'wR');
    expect(await reader.recover()).toMatchObject({ entries: 1, lost: 0 });
    expect([...(await reader.committedAmong([m]))]).toEqual([m.seq]);
  });

  it('fence at once a commit of this process it gave up, whose claim was left behind', async () => {
    const { dataDir, m } = await setUp();
    const w = await writer(dataDir, 'wW', 60_000);
    // A claim made, its answer lost, the batch given up: the claim stays under commit 1.
    await w.claims.claim([m], commitId('wW', w.journal.nextCommitNo()));
    const again = await w.claims.claim([m], commitId('wW', w.journal.nextCommitNo()));
    expect(again.contested.size).toBe(0);
    expect(w.claims.stats).toMatchObject({ fenced: 1, takenOver: 1 });
    expect(await w.journal.state(commitId('wW', 1))).toBe('fenced');
  });

  it('do not fence a commit published first: the other process finds the name taken by the entry', async () => {
    const { dataDir, m } = await setUp();
    const w = await writer(dataDir, 'wW', 60_000);
    const x = await writer(dataDir, 'wX', 0);
    const wNo = w.journal.nextCommitNo();
    await w.journal.commit(await entryFor(dataDir, w.journal, wNo, m));
    expect(await x.journal.fence(commitId('wW', wNo))).toBe('committed');
    expect(await x.journal.state(commitId('wW', wNo))).toBe('committed');
  });

  it('refuse a commit point past the claims’ life, and give claims back when a commit is given up', async () => {
    const { dataDir, m } = await setUp();
    const w = await writer(dataDir, 'wW', 60_000);
    const x = await writer(dataDir, 'wX', 60_000);
    const wNo = w.journal.nextCommitNo();
    const wClaim = await w.claims.claim([m], commitId('wW', wNo));
    await expect(
      w.journal.commit(await entryFor(dataDir, w.journal, wNo, m), () => true),
    ).rejects.toBeInstanceOf(NotCommitted);
    expect(await w.journal.state(commitId('wW', wNo))).toBe('absent');
    w.claims.release(wClaim.held);
    // Released: X claims it at once, without waiting for W's claim to go stale.
    let contested = 1;
    for (let i = 0; i < 50 && contested > 0; i++) {
      contested = (await x.claims.claim([m], commitId('wX', x.journal.nextCommitNo()))).contested.size;
      if (contested > 0) await new Promise((r) => setTimeout(r, 20));
    }
    expect(contested).toBe(0);
    expect(x.claims.stats.fenced).toBe(0);
  });
});
