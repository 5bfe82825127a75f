import type { KV } from '@nats-io/kv';
import { isRevisionConflict } from '../broker/errors.js';
import { ServiceError } from '../schemas/errors.js';
import {
  type Actor,
  type IssueComment,
  type IssueEvent,
  type IssueOccurrences,
  type IssuePatch,
  type IssueRecord,
  type IssueStatus,
  issueCommentSchema,
  issueRecordSchema,
} from '../schemas/issues.js';
import type { Mode } from '../schemas/records.js';
import { newUlid } from '../schemas/ulid.js';
import { BucketMirror, type MirrorLog } from './bucket-mirror.js';
import type { ControlStore } from './store.js';

/**
 * Issue state (CONTRACT §9) over the control plane's buckets. Every change is a compare-and-set on the key's
 * revision, retried on a fresh read: two processes, or two PATCHes, never lose one another's change. Reads go to
 * a watched in-memory copy, grouped by workspace and mode, so listing a workspace's issues is no bucket scan.
 */

/** Manual transitions (CONTRACT §9); `regressed` is reached only by an occurrence after `resolvedAt`. */
const TRANSITIONS: Record<IssueStatus, readonly IssueStatus[]> = {
  open: ['acknowledged', 'resolved', 'ignored'],
  acknowledged: ['open', 'resolved', 'ignored'],
  resolved: ['open'],
  ignored: ['open'],
  regressed: ['acknowledged', 'resolved', 'ignored'],
};

/** Stored events kept per issue; older ones are dropped (and counted) so a record stays small. */
const MAX_STORED_EVENTS = 1000;
/** A busy issue's record may be written by several processes at once: retries before giving up. */
const CAS_ATTEMPTS = 50;

const SYSTEM: Actor = { type: 'system' };

const issueKey = (workspaceId: string, mode: Mode, issueId: string) => `${workspaceId}.${mode}.${issueId}`;
const scopeOf = (key: string) => key.slice(0, key.lastIndexOf('.'));
const iso = (ms: number) => new Date(ms).toISOString();

function withEvent(r: IssueRecord, type: IssueEvent['type'], actor: Actor, at: string, data: object): void {
  r.events.push({ id: `evt_${newUlid()}`, type, actor, at, data: { ...data } });
  const over = r.events.length - MAX_STORED_EVENTS;
  if (over > 0) {
    r.events.splice(0, over);
    r.eventsDropped += over;
  }
}

const copy = (r: IssueRecord): IssueRecord => ({
  ...r,
  environments: [...r.environments],
  events: [...r.events],
});

/** Whether occurrences change anything in the record: most batches of a known issue do not. */
function changes(r: IssueRecord, o: IssueOccurrences): boolean {
  return (
    o.firstStartedAt < Date.parse(r.firstSeenAt) ||
    o.environments.some((e) => !r.environments.includes(e)) ||
    (r.status === 'resolved' && r.resolvedAt !== null && o.lastStartedAt > Date.parse(r.resolvedAt))
  );
}

/** The record after an occurrence of its issue that started at `startedAt` (ms), when that regresses it. */
function regressed(r: IssueRecord, startedAt: number, executionId: string, now: number): IssueRecord | null {
  if (r.status !== 'resolved' || r.resolvedAt === null || startedAt <= Date.parse(r.resolvedAt)) return null;
  const next = copy(r);
  next.status = 'regressed';
  next.regressedAt = iso(now);
  next.statusChangedAt = iso(now);
  if (startedAt > Date.parse(next.lastSeenAt)) next.lastSeenAt = iso(startedAt);
  // One `regressed` event and no `status_changed` (CONTRACT §9); resolvedAt is kept.
  withEvent(next, 'regressed', SYSTEM, iso(now), { from: 'resolved', to: 'regressed', executionId });
  return next;
}

function applyOccurrences(
  cur: IssueRecord | null,
  o: IssueOccurrences,
  workspaceId: string,
  mode: Mode,
  now: number,
): IssueRecord | null {
  if (cur === null) {
    const firstSeenAt = iso(o.firstStartedAt);
    return {
      id: o.issueId,
      workspaceId,
      mode,
      fingerprintParts: o.fingerprintParts,
      title: o.title,
      service: o.service,
      endpoint: o.endpoint,
      method: o.method,
      failureType: o.failureType,
      exceptionType: o.exceptionType,
      environments: [...o.environments].sort(),
      createdAt: iso(now),
      firstSeenAt,
      lastSeenAt: iso(o.lastStartedAt),
      status: 'open',
      statusChangedAt: firstSeenAt,
      resolvedAt: null,
      regressedAt: null,
      assignee: null,
      events: [],
      eventsDropped: 0,
    };
  }
  if (!changes(cur, o)) return null;
  const next = regressed(cur, o.lastStartedAt, o.lastExecutionId, now) ?? copy(cur);
  if (o.firstStartedAt < Date.parse(next.firstSeenAt)) {
    next.firstSeenAt = iso(o.firstStartedAt);
    if (next.events.length === 0 && next.status === 'open') next.statusChangedAt = next.firstSeenAt;
  }
  if (o.lastStartedAt > Date.parse(next.lastSeenAt)) next.lastSeenAt = iso(o.lastStartedAt);
  for (const e of o.environments) if (!next.environments.includes(e)) next.environments.push(e);
  next.environments.sort();
  return next;
}

export class IssueStore {
  readonly #issues: KV;
  readonly #comments: KV;
  readonly #mirror: BucketMirror<IssueRecord>;
  /** `<workspaceId>.<mode>` → issue id → record: the mirror, grouped for listing. */
  readonly #byScope = new Map<string, Map<string, IssueRecord>>();

  constructor(store: ControlStore, log: MirrorLog) {
    this.#issues = store.issues;
    this.#comments = store.issueComments;
    this.#mirror = new BucketMirror(store.issues, issueRecordSchema, log);
    // Registered before start, so the initial values come through here too.
    this.#mirror.onChange((key, value) => {
      const scope = scopeOf(key);
      let issues = this.#byScope.get(scope);
      if (value === null) {
        issues?.delete(key.slice(scope.length + 1));
        return;
      }
      if (!issues) {
        issues = new Map();
        this.#byScope.set(scope, issues);
      }
      issues.set(value.id, value);
    });
  }

  start(): Promise<void> {
    return this.#mirror.start();
  }

  stop(): void {
    this.#mirror.stop();
  }

  /** Every issue of a workspace and mode (the watched copy). */
  list(workspaceId: string, mode: Mode): IssueRecord[] {
    return [...(this.#byScope.get(`${workspaceId}.${mode}`)?.values() ?? [])];
  }

  get(workspaceId: string, mode: Mode, issueId: string): Promise<IssueRecord | null> {
    return this.#mirror.get(issueKey(workspaceId, mode, issueId));
  }

  /**
   * Compare-and-set on the issue's key: `change` gets the current record (null: none) and answers the next one,
   * or null when nothing changes; a write that lost to another is retried on a fresh read. Answers the record
   * as it now is.
   */
  async #update(
    key: string,
    change: (cur: IssueRecord | null) => IssueRecord | null,
  ): Promise<IssueRecord | null> {
    for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
      const entry = await this.#issues.get(key);
      const cur = entry?.operation === 'PUT' ? issueRecordSchema.parse(entry.json()) : null;
      const next = change(cur);
      if (next === null) return cur;
      try {
        const text = JSON.stringify(next);
        const revision = cur
          ? await this.#issues.update(key, text, entry!.revision)
          : await this.#issues.create(key, text);
        this.#mirror.remember(key, next, revision);
        return next;
      } catch (err) {
        if (!isRevisionConflict(err)) throw err;
      }
    }
    throw new ServiceError('CONFLICT', 'the issue changed concurrently too often; try again');
  }

  /**
   * The write path's one call per batch: creates the issues that are new and moves the ones whose occurrences
   * change them (an earlier first occurrence, a new environment, a regression). A batch of known issues costs
   * lookups in the copy and no write. Idempotent: the same occurrences again change nothing.
   */
  async recordOccurrences(workspaceId: string, mode: Mode, occurrences: IssueOccurrences[]): Promise<void> {
    const now = Date.now();
    await Promise.all(
      occurrences.map(async (o) => {
        const key = issueKey(workspaceId, mode, o.issueId);
        const known = this.#mirror.peek(key);
        if (known && !changes(known, o)) return;
        await this.#update(key, (cur) => applyOccurrences(cur, o, workspaceId, mode, now));
      }),
    );
  }

  /**
   * Regresses a resolved issue whose stored rows hold an occurrence that started after `resolvedAt` (the read
   * path's check: an occurrence the write path saw before the resolve reached it). Answers the record.
   */
  async regressIfLater(
    workspaceId: string,
    mode: Mode,
    issueId: string,
    lastStartedAt: number,
    executionId: string,
  ): Promise<IssueRecord | null> {
    const now = Date.now();
    return this.#update(issueKey(workspaceId, mode, issueId), (cur) =>
      cur ? regressed(cur, lastStartedAt, executionId, now) : null,
    );
  }

  /**
   * A person's change (CONTRACT §9): only the fields named, each with its event; setting what the issue already
   * has changes nothing; a transition the table does not allow is CONFLICT. The assignee is checked by the caller.
   */
  async patch(
    workspaceId: string,
    mode: Mode,
    issueId: string,
    patch: IssuePatch,
    userId: string,
  ): Promise<IssueRecord> {
    const actor: Actor = { type: 'user', id: userId };
    const now = iso(Date.now());
    const result = await this.#update(issueKey(workspaceId, mode, issueId), (cur) => {
      if (!cur) throw new ServiceError('NOT_FOUND', `no issue ${issueId} in this workspace and mode`);
      let next: IssueRecord | null = null;
      const to = patch.status;
      if (to !== undefined && to !== cur.status) {
        if (!TRANSITIONS[cur.status].includes(to)) {
          throw new ServiceError(
            'CONFLICT',
            to === 'regressed'
              ? 'an issue becomes regressed only by a new occurrence after it was resolved'
              : `an issue that is ${cur.status} cannot become ${to}; allowed: ${TRANSITIONS[cur.status].join(', ')}`,
            [{ path: 'status', message: `not allowed from ${cur.status}` }],
          );
        }
        next = copy(cur);
        next.status = to;
        next.statusChangedAt = now;
        if (to === 'resolved') next.resolvedAt = now;
        withEvent(next, 'status_changed', actor, now, { from: cur.status, to });
      }
      if (patch.assignee !== undefined && patch.assignee !== cur.assignee) {
        next ??= copy(cur);
        next.assignee = patch.assignee;
        withEvent(next, 'assigned', actor, now, { from: cur.assignee, to: patch.assignee });
      }
      return next;
    });
    return result!;
  }

  /** A removed member's issues become unassigned, each with an `assigned` event by the system. */
  async unassignAll(workspaceId: string, userId: string): Promise<void> {
    for (const mode of ['test', 'live'] as const) {
      for (const issue of this.list(workspaceId, mode)) {
        if (issue.assignee !== userId) continue;
        await this.#update(issueKey(workspaceId, mode, issue.id), (cur) => {
          if (!cur || cur.assignee !== userId) return null;
          const next = copy(cur);
          next.assignee = null;
          const now = iso(Date.now());
          withEvent(next, 'assigned', SYSTEM, now, { from: userId, to: null });
          return next;
        });
      }
    }
  }

  async addComment(
    workspaceId: string,
    mode: Mode,
    issueId: string,
    body: string,
    author: { id: string; email: string },
  ): Promise<IssueComment> {
    if (!(await this.get(workspaceId, mode, issueId)))
      throw new ServiceError('NOT_FOUND', `no issue ${issueId} in this workspace and mode`);
    const comment: IssueComment = {
      id: `cmt_${newUlid()}`,
      body,
      author,
      createdAt: new Date().toISOString(),
    };
    await this.#comments.create(
      `${issueKey(workspaceId, mode, issueId)}.${comment.id}`,
      JSON.stringify(comment),
    );
    return comment;
  }

  /** An issue's comments, oldest first (their ids sort by creation time). */
  async comments(workspaceId: string, mode: Mode, issueId: string): Promise<IssueComment[]> {
    const out: IssueComment[] = [];
    const iter = await this.#comments.history({ key: `${issueKey(workspaceId, mode, issueId)}.*` });
    for await (const e of iter) {
      if (e.operation !== 'PUT') continue;
      const parsed = issueCommentSchema.safeParse(e.json());
      if (parsed.success) out.push(parsed.data);
    }
    return out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }
}

/**
 * An issue's activity, newest first: its stored events, its `created` event and a `commented` event per comment
 * (both derived, so they cannot be lost between two writes).
 */
export function activityOf(issue: IssueRecord, comments: IssueComment[]): IssueEvent[] {
  const all: IssueEvent[] = [
    { id: 'evt_created', type: 'created', actor: SYSTEM, at: issue.createdAt, data: {} },
    ...issue.events,
    ...comments.map(
      (c): IssueEvent => ({
        id: `evt_${c.id}`,
        type: 'commented',
        actor: { type: 'user', id: c.author.id },
        at: c.createdAt,
        data: { commentId: c.id },
      }),
    ),
  ];
  return all.sort((a, b) => (a.at === b.at ? (a.id < b.id ? 1 : -1) : a.at < b.at ? 1 : -1));
}
