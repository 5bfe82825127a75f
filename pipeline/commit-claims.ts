import crypto from 'node:crypto';
import type { KV } from '@nats-io/kv';
import { isRevisionConflict } from '../broker/errors.js';
import { COMMIT_CLAIM_TTL_MS } from '../broker/provision.js';
import type { CommitJournal, Delivery } from '../storage/commit-journal.js';

/**
 * Exclusive commits across pipeline processes. A message is normally one process's alone; but a process that
 * stalls (a long pause, a hung disk, its NATS connection lost) past the ack wait while it holds messages sees them
 * handed to another, and both may reach their commit point. The journal alone cannot tell: each checks it before
 * the other has written. So before its last check a batch claims each of its messages in a key-value bucket, by
 * request id, under its commit's name (create: one claim per key):
 *   - a claim made: nobody else commits that request until this commit is published or given up;
 *   - a claim held by a commit already published (or fenced, CommitJournal.fence): taken over, compare-and-set;
 *     the journal check that follows then finds the request committed, or not;
 *   - a claim held by a commit not yet published: the other process is committing it now, and the message waits
 *     (naked, it comes again), unless the claim is older than `staleMs`: its writer stalled or died, and a fence
 *     published under its commit's name makes sure it never commits, before the claim is taken over.
 * A writer publishes its entry only while its claims cannot have lapsed (half the bucket's age limit), and
 * exclusively (a hard link): a fenced commit fails. Claims of a published commit are left to age out; those of a
 * commit given up are released at once.
 */

export interface Claimed {
  /** Sequences whose request another process is committing now: not written in this batch. */
  contested: Set<number>;
  /** The claims made or taken, key → revision, to release if the commit is given up. */
  held: Map<string, number>;
  /**
   * True once the claims may have lapsed (half their life gone, by this process's monotonic clock or by the wall
   * clock, which also runs while the host is suspended): the commit must not be published then.
   */
  lapsed: () => boolean;
}

export interface ClaimStats {
  claimed: number;
  takenOver: number;
  fenced: number;
  contested: number;
}

export interface CommitClaimsOptions {
  kv: KV;
  journal: CommitJournal;
  /** A claim this old whose commit is not published belongs to a writer that stalled or died. */
  staleMs: number;
  log: {
    info(obj: object, msg: string): void;
    warn(obj: object, msg: string): void;
    debug(obj: object, msg: string): void;
  };
}

/** The key of a request's claim: its id, hashed to the characters a key may hold. */
const claimKey = (id: string) => crypto.createHash('sha256').update(id).digest('base64url').slice(0, 32);

export class CommitClaims {
  readonly #o: CommitClaimsOptions;
  readonly stats: ClaimStats = { claimed: 0, takenOver: 0, fenced: 0, contested: 0 };

  constructor(opts: CommitClaimsOptions) {
    this.#o = opts;
  }

  /** Claims these messages' requests for the commit `commit` (a `commitId`). */
  async claim(deliveries: readonly Delivery[], commit: string): Promise<Claimed> {
    // Taken before the first claim is sent: no claim can lapse before this plus the bucket's age limit.
    const mono = performance.now();
    const wall = Date.now();
    const half = COMMIT_CLAIM_TTL_MS / 2;
    const lapsed = () => performance.now() - mono > half || Math.abs(Date.now() - wall) > half;
    const byKey = new Map<string, number[]>();
    for (const d of deliveries) {
      const key = claimKey(d.id);
      const seqs = byKey.get(key);
      if (seqs) seqs.push(d.seq);
      else byKey.set(key, [d.seq]);
    }
    const held = new Map<string, number>();
    const contested = new Set<number>();
    // A commit holding several of these claims is judged once.
    const verdicts = new Map<string, Promise<boolean>>();
    const mayTake = (holder: string, claimedAt: Date) => {
      let v = verdicts.get(holder);
      if (!v) {
        v = this.#mayTake(holder, claimedAt);
        verdicts.set(holder, v);
      }
      return v;
    };
    const outcomes = await Promise.allSettled(
      [...byKey.keys()].map(async (key) => [key, await this.#claimOne(key, commit, mayTake)] as const),
    );
    let failure: unknown = null;
    for (const o of outcomes) {
      if (o.status === 'rejected') {
        failure ??= o.reason;
        continue;
      }
      const [key, revision] = o.value;
      if (revision === null) for (const s of byKey.get(key)!) contested.add(s);
      else held.set(key, revision);
    }
    if (failure !== null) {
      this.release(held);
      throw failure;
    }
    this.stats.claimed += held.size;
    this.stats.contested += contested.size;
    return { contested, held, lapsed };
  }

  /** The claim's revision once this commit holds it; null while another commit in progress holds it. */
  async #claimOne(
    key: string,
    commit: string,
    mayTake: (holder: string, claimedAt: Date) => Promise<boolean>,
  ): Promise<number | null> {
    const kv = this.#o.kv;
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        return await kv.create(key, commit);
      } catch (err) {
        if (!isRevisionConflict(err)) throw err;
      }
      const held = await kv.get(key);
      // Released or lapsed meanwhile: create again.
      if (held === null || held.operation !== 'PUT') continue;
      const holder = held.string();
      if (holder === commit) return held.revision;
      if (!(await mayTake(holder, held.created))) return null;
      try {
        const revision = await kv.update(key, commit, held.revision);
        this.stats.takenOver++;
        return revision;
      } catch (err) {
        if (!isRevisionConflict(err)) throw err;
      }
    }
    return null;
  }

  /**
   * Whether a claim of this commit may be taken over: yes when the commit is published, or fenced (by this
   * process now, if it is not published and its claim is stale); no while it is in progress.
   */
  async #mayTake(holder: string, claimedAt: Date): Promise<boolean> {
    const { journal, log, staleMs } = this.#o;
    if ((await journal.state(holder)) !== 'absent') return true;
    const age = Date.now() - claimedAt.getTime();
    // This process commits one batch at a time: a commit of its own other than the one claiming now was given up
    // (a claim whose answer was lost, say).
    const own = holder.startsWith(`${journal.writerId}-`);
    if (age < staleMs && !own) return false;
    if ((await journal.fence(holder)) === 'fenced') {
      this.stats.fenced++;
      // Expected for a commit of its own it gave up; a stall past the claim is not.
      if (own)
        log.info({ commit: holder, claimAgeMs: age }, 'a commit given up fenced: its messages taken over');
      else
        log.warn(
          { commit: holder, claimAgeMs: age },
          'a commit stalled past its claim: fenced, its messages taken over',
        );
    }
    return true;
  }

  /** Gives claims back (a commit given up); a claim taken over since is left to its new holder. */
  release(held: ReadonlyMap<string, number>): void {
    for (const [key, revision] of held) {
      this.#o.kv.delete(key, { previousSeq: revision }).catch((err: unknown) => {
        // Taken over, or the broker unreachable: the claim lapses, or is taken over, in time.
        this.#o.log.debug({ err, key }, 'claim not released');
      });
    }
  }
}
