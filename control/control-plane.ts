import { isRevisionConflict } from '../broker/errors.js';
import { SESSION_TTL_MS } from '../broker/provision.js';
import {
  type ApiKeyRecord,
  apiKeyRecordSchema,
  type EmailClaim,
  emailClaimSchema,
  KEY_ID_SHAPE,
  keyIndexSchema,
  type Permission,
  type Role,
  type SessionRecord,
  sessionRecordSchema,
  USER_ID_SHAPE,
  type UserRecord,
  userRecordSchema,
  type WorkspaceRecord,
  workspaceRecordSchema,
} from '../schemas/control.js';
import { ServiceError } from '../schemas/errors.js';
import type { Mode } from '../schemas/records.js';
import { defaultSettings, type Settings, settingsSchema } from '../schemas/settings.js';
import { API_KEY_SHAPE, type CreatedApiKey, createApiKey, hashApiKey } from './api-keys.js';
import { BucketMirror, type MirrorLog } from './bucket-mirror.js';
import { IssueStore } from './issues.js';
import { hashPassword, verifyPassword } from './passwords.js';
import { generateSecret, newId, sha256Hex } from './secrets.js';
import type { ControlStore } from './store.js';
import { createWorkspace } from './workspaces.js';

/**
 * Workspaces, users, sessions, API keys and settings over the broker's key-value buckets, shared by every
 * process. Reads go to watched in-memory copies, so a revocation or a logout made on any process takes effect
 * on all of them within the watch's delay (milliseconds; the contract allows one second).
 */

const SESSION_SHAPE = /^svc_sess_[A-Za-z0-9]{32}$/;
const emailKey = (email: string) => sha256Hex(email.trim().toLowerCase());
const userKey = (workspaceId: string, userId: string) => `${workspaceId}.${userId}`;

export interface SessionPrincipalData {
  user: UserRecord;
  session: SessionRecord;
  tokenHash: string;
}

export interface IssuedSession {
  token: string;
  expiresAt: string;
}

export interface PublicUser {
  id: string;
  email: string;
  name: string | null;
}

export const publicUser = (u: UserRecord): PublicUser => ({ id: u.id, email: u.email, name: u.name });

export interface KeyListing extends Omit<ApiKeyRecord, 'workspaceId'> {
  lastUsedAt: string | null;
}

/** How often key use times are written back (one write per used key per period). */
const KEY_USAGE_FLUSH_MS = 30_000;

export class ControlPlane {
  readonly store: ControlStore;
  /** Issue state, comments and activity (CONTRACT §9). */
  readonly issues: IssueStore;
  readonly #retentionDefault: number;
  readonly #keys: BucketMirror<ApiKeyRecord>;
  readonly #keyIndex: BucketMirror<{ hash: string }>;
  readonly #sessions: BucketMirror<SessionRecord>;
  readonly #users: BucketMirror<UserRecord>;
  readonly #settings: BucketMirror<Settings>;
  readonly #workspaces: BucketMirror<WorkspaceRecord>;
  readonly #keyUse = new Map<string, string>();
  #usageTimer: NodeJS.Timeout | null = null;

  constructor(store: ControlStore, log: MirrorLog, opts: { retentionDays: number }) {
    this.store = store;
    this.#retentionDefault = opts.retentionDays;
    this.#keys = new BucketMirror(store.apiKeys, apiKeyRecordSchema, log);
    this.#keyIndex = new BucketMirror(store.keyIndex, keyIndexSchema, log);
    this.#sessions = new BucketMirror(store.sessions, sessionRecordSchema, log);
    this.#users = new BucketMirror(store.users, userRecordSchema, log);
    this.#settings = new BucketMirror(store.settings, settingsSchema, log);
    this.#workspaces = new BucketMirror(store.workspaces, workspaceRecordSchema, log);
    this.issues = new IssueStore(store, log);
  }

  async start(): Promise<void> {
    await Promise.all(this.#watched().map((m) => m.start()));
    this.#usageTimer = setInterval(() => void this.flushKeyUsage(), KEY_USAGE_FLUSH_MS);
    this.#usageTimer.unref();
  }

  async stop(): Promise<void> {
    if (this.#usageTimer) clearInterval(this.#usageTimer);
    await this.flushKeyUsage().catch(() => {});
    for (const m of this.#watched()) m.stop();
  }

  /** Everything kept current by a bucket watch: started and stopped with the control plane. */
  #watched(): { start(): Promise<void>; stop(): void }[] {
    return [
      this.#keys,
      this.#keyIndex,
      this.#sessions,
      this.#users,
      this.#settings,
      this.#workspaces,
      this.issues,
    ];
  }

  // ---- credentials ----

  async authenticateKey(presented: string): Promise<ApiKeyRecord | null> {
    if (!API_KEY_SHAPE.test(presented)) return null;
    const record = await this.#keys.get(hashApiKey(presented));
    if (!record || record.revokedAt) return null;
    this.#keyUse.set(record.id, new Date().toISOString());
    return record;
  }

  async authenticateSession(token: string): Promise<SessionPrincipalData | null> {
    if (!SESSION_SHAPE.test(token)) return null;
    const tokenHash = sha256Hex(token);
    const session = await this.#sessions.get(tokenHash);
    if (!session || Date.parse(session.expiresAt) <= Date.now()) return null;
    // A removed member's sessions end with the user record, even before they are deleted.
    const user = await this.#users.get(userKey(session.workspaceId, session.userId));
    if (!user) return null;
    return { user, session, tokenHash };
  }

  async #issueSession(user: UserRecord): Promise<IssuedSession> {
    const token = generateSecret('svc_sess_');
    const now = Date.now();
    const record: SessionRecord = {
      userId: user.id,
      workspaceId: user.workspaceId,
      createdAt: new Date(now).toISOString(),
      expiresAt: new Date(now + SESSION_TTL_MS).toISOString(),
    };
    const revision = await this.store.sessions.create(sha256Hex(token), JSON.stringify(record));
    this.#sessions.remember(sha256Hex(token), record, revision);
    return { token, expiresAt: record.expiresAt };
  }

  // ---- accounts ----

  /** Claims the e-mail first (compare-and-set), so two sign-ups with one address cannot both succeed. */
  async #createUser(input: {
    workspaceId: string;
    email: string;
    password: string;
    name: string | null;
    role: Role;
  }): Promise<UserRecord> {
    const user: UserRecord = {
      id: newId('usr'),
      workspaceId: input.workspaceId,
      email: input.email.trim().toLowerCase(),
      name: input.name,
      role: input.role,
      passwordHash: await hashPassword(input.password),
      createdAt: new Date().toISOString(),
    };
    const claim: EmailClaim = { userId: user.id, workspaceId: user.workspaceId };
    try {
      await this.store.userEmails.create(emailKey(user.email), JSON.stringify(claim));
    } catch (err) {
      // Only a claim that exists already is a conflict; an outage is an outage (503).
      if (isRevisionConflict(err)) throw new ServiceError('CONFLICT', 'this e-mail is already registered');
      throw err;
    }
    const revision = await this.store.users.put(userKey(user.workspaceId, user.id), JSON.stringify(user));
    this.#users.remember(userKey(user.workspaceId, user.id), user, revision);
    return user;
  }

  async signup(input: { email: string; password: string; name?: string; workspaceName?: string }) {
    // The e-mail is claimed first, so a taken one leaves no workspace behind.
    const workspaceId = newId('ws');
    const user = await this.#createUser({
      workspaceId,
      email: input.email,
      password: input.password,
      name: input.name ?? null,
      role: 'owner',
    });
    const workspace = await createWorkspace(
      this.store,
      input.workspaceName ?? `${input.name ?? input.email.split('@')[0]}'s workspace`,
      workspaceId,
    );
    const testKey = await createApiKey(this.store, {
      workspaceId: workspace.id,
      mode: 'test',
      permissions: ['ingest', 'read'],
      name: 'Test key',
    });
    const session = await this.#issueSession(user);
    return { user, workspace, session, testKey };
  }

  /** null when the e-mail or the password is wrong: the caller cannot tell which, nor can timing. */
  async login(email: string, password: string) {
    const claimEntry = await this.store.userEmails.get(emailKey(email));
    const claim = claimEntry?.operation === 'PUT' ? emailClaimSchema.parse(claimEntry.json()) : null;
    const user = claim ? await this.#users.get(userKey(claim.workspaceId, claim.userId)) : null;
    const ok = await verifyPassword(password, user?.passwordHash ?? null);
    if (!ok || !user) return null;
    const workspace = await this.getWorkspace(user.workspaceId);
    if (!workspace) return null;
    return { user, workspace, session: await this.#issueSession(user) };
  }

  async logout(tokenHash: string): Promise<void> {
    await this.store.sessions.delete(tokenHash);
    this.#sessions.remember(tokenHash, null);
  }

  async getWorkspace(id: string): Promise<WorkspaceRecord | null> {
    return this.#workspaces.get(id);
  }

  // ---- members ----

  listMembers(workspaceId: string): UserRecord[] {
    return this.#users
      .withPrefix(`${workspaceId}.`)
      .map(([, u]) => u)
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  async addMember(
    workspaceId: string,
    input: { email: string; role: Role; password: string; name?: string },
  ) {
    return this.#createUser({ workspaceId, ...input, name: input.name ?? null });
  }

  /** Removes the member and ends every session of theirs at once. */
  async removeMember(workspaceId: string, userId: string): Promise<UserRecord> {
    const user = USER_ID_SHAPE.test(userId) ? await this.#users.get(userKey(workspaceId, userId)) : null;
    if (!user) throw new ServiceError('NOT_FOUND', `no member ${userId.slice(0, 64)} in this workspace`);
    if (user.role === 'owner') throw new ServiceError('FORBIDDEN', 'the owner cannot be removed');
    await this.store.users.delete(userKey(workspaceId, userId));
    this.#users.remember(userKey(workspaceId, userId), null);
    await this.store.userEmails.delete(emailKey(user.email));
    for (const [hash, s] of this.#sessions.withPrefix('')) {
      if (s.userId === userId) {
        await this.store.sessions.delete(hash);
        this.#sessions.remember(hash, null);
      }
    }
    await this.issues.unassignAll(workspaceId, userId);
    return user;
  }

  /** Whether `userId` is a member of the workspace now. */
  async isMember(workspaceId: string, userId: string): Promise<boolean> {
    return (await this.#users.get(userKey(workspaceId, userId))) !== null;
  }

  // ---- keys ----

  async listKeys(workspaceId: string): Promise<KeyListing[]> {
    const out: KeyListing[] = [];
    for (const [indexKey, { hash }] of this.#keyIndex.withPrefix(`${workspaceId}.`)) {
      const record = await this.#keys.get(hash);
      if (!record) continue;
      const keyId = indexKey.slice(workspaceId.length + 1);
      const used = this.#keyUse.get(keyId) ?? (await this.#lastUsed(keyId));
      const { workspaceId: _ws, ...rest } = record;
      out.push({ ...rest, lastUsedAt: used });
    }
    return out.sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  async #lastUsed(keyId: string): Promise<string | null> {
    const e = await this.store.keyUsage.get(keyId);
    return e?.operation === 'PUT' ? e.string() : null;
  }

  async createKey(
    workspaceId: string,
    input: { name: string; mode: Mode; permissions: Permission[] },
  ): Promise<CreatedApiKey> {
    return createApiKey(this.store, { workspaceId, ...input });
  }

  async revokeKey(workspaceId: string, keyId: string): Promise<void> {
    if (!KEY_ID_SHAPE.test(keyId))
      throw new ServiceError('NOT_FOUND', `no key ${keyId.slice(0, 64)} in this workspace`);
    const index =
      this.#keyIndex.peek(`${workspaceId}.${keyId}`) ?? (await this.#keyIndex.get(`${workspaceId}.${keyId}`));
    if (!index) throw new ServiceError('NOT_FOUND', `no key ${keyId} in this workspace`);
    const entry = await this.store.apiKeys.get(index.hash);
    if (entry?.operation !== 'PUT') throw new ServiceError('NOT_FOUND', `no key ${keyId} in this workspace`);
    const record = apiKeyRecordSchema.parse(entry.json());
    if (record.revokedAt) return;
    record.revokedAt = new Date().toISOString();
    const revision = await this.store.apiKeys.update(index.hash, JSON.stringify(record), entry.revision);
    this.#keys.remember(index.hash, record, revision);
  }

  async flushKeyUsage(): Promise<void> {
    const pending = [...this.#keyUse];
    this.#keyUse.clear();
    for (const [keyId, at] of pending) await this.store.keyUsage.put(keyId, at);
  }

  // ---- leases ----

  /**
   * A lease on a named job (compaction) for `ttlMs`: true when this owner holds it now. Taken with
   * compare-and-set, so of several processes one holds it; a holder that died loses it when it expires.
   */
  async tryLease(name: string, owner: string, ttlMs: number): Promise<boolean> {
    const key = `lease.${name}`;
    const value = JSON.stringify({ owner, until: Date.now() + ttlMs });
    try {
      const e = await this.store.meta.get(key);
      if (e?.operation !== 'PUT') {
        await this.store.meta.create(key, value);
        return true;
      }
      const held = e.json<{ owner: string; until: number }>();
      if (held.owner !== owner && held.until > Date.now()) return false;
      await this.store.meta.update(key, value, e.revision);
      return true;
    } catch (err) {
      if (isRevisionConflict(err)) return false; // someone else won the race
      throw err;
    }
  }

  // ---- settings ----

  settingsOf(workspaceId: string): Settings {
    return this.#settings.peek(workspaceId) ?? defaultSettings(this.#retentionDefault);
  }

  /** Replaces the named fields, with compare-and-set so two concurrent PATCHes cannot lose one another. */
  async patchSettings(workspaceId: string, patch: Partial<Settings>): Promise<Settings> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const entry = await this.store.settings.get(workspaceId);
      const current =
        entry?.operation === 'PUT'
          ? settingsSchema.parse(entry.json())
          : defaultSettings(this.#retentionDefault);
      const next = settingsSchema.parse({ ...current, ...patch });
      try {
        const revision =
          entry?.operation === 'PUT'
            ? await this.store.settings.update(workspaceId, JSON.stringify(next), entry.revision)
            : await this.store.settings.create(workspaceId, JSON.stringify(next));
        this.#settings.remember(workspaceId, next, revision);
        return next;
      } catch (err) {
        // Someone else wrote in between: read again and re-apply.
        if (!isRevisionConflict(err)) throw err;
      }
    }
    throw new ServiceError('CONFLICT', 'the settings changed concurrently; try again');
  }

  /** Called with (workspaceId, settings) whenever any workspace's settings change. */
  onSettingsChange(listener: (workspaceId: string, settings: Settings | null) => void): void {
    this.#settings.onChange(listener);
  }

  /** Called when this process learns of a key's change (created, revoked), from any process; by the key's hash. */
  onKeyChange(listener: (keyHash: string, key: ApiKeyRecord | null) => void): void {
    this.#keys.onChange(listener);
  }

  /** Called when this process learns of a session's change (made, ended), from any process; by the token's hash. */
  onSessionChange(listener: (tokenHash: string, session: SessionRecord | null) => void): void {
    this.#sessions.onChange(listener);
  }
}
