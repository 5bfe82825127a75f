import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  type JetStreamManager,
  RetentionPolicy,
  StorageType,
} from '@nats-io/jetstream';
import type { Kvm } from '@nats-io/kv';
import { nanos } from '@nats-io/transport-node';
import { IDEMPOTENCY_WINDOW_MS } from '../schemas/broker-messages.js';
import { isNotFound } from './errors.js';

export const INGEST_STREAM = 'SVC_INGEST';
export const PIPELINE_CONSUMER = 'pipeline';

/** The key-value buckets of the control plane. */
export const BUCKETS = {
  workspaces: 'svc_workspaces',
  apiKeys: 'svc_api_keys',
  keyIndex: 'svc_key_index',
  keyUsage: 'svc_key_usage',
  users: 'svc_users',
  userEmails: 'svc_user_emails',
  sessions: 'svc_sessions',
  settings: 'svc_settings',
  meta: 'svc_meta',
  /** Issue state (CONTRACT §9), under `<workspaceId>.<mode>.<issueId>`. */
  issues: 'svc_issues',
  /** Issue comments, under `<workspaceId>.<mode>.<issueId>.<commentId>`. */
  issueComments: 'svc_issue_comments',
} as const;

/** The pipeline's claims of messages at its commit point (pipeline/commit-claims.ts). */
export const COMMIT_CLAIMS_BUCKET = 'svc_commit_claims';

/** How long a claim lives there; a writer publishes its commit within half of it or not at all. */
export const COMMIT_CLAIM_TTL_MS = 5 * 60_000;

/**
 * The state of cumulative OTLP series shared by several pipeline processes (pipeline/otlp/shared-series.ts): a
 * series idle for an hour is forgotten, as by a lone pipeline (SERIES_IDLE_MS).
 */
export const OTLP_SERIES_BUCKET = 'svc_otlp_series';
export const OTLP_SERIES_TTL_MS = 3600_000;

/** Sessions last 7 days at most: the bucket forgets them then, whatever else happens (CONTRACT §2). */
export const SESSION_TTL_MS = 7 * 24 * 3600 * 1000;

export interface ProvisionOptions {
  maxAgeHours: number;
  maxBytes: number;
  maxMsgBytes: number;
  ackWaitMs: number;
  maxAckPending: number;
  /** Copies of the stream and of each bucket (NATS_REPLICAS): 3 on a 3-node cluster. */
  replicas?: number;
  /**
   * This process is the consumer's only user (it embeds the broker): messages the consumer still counts as
   * delivered went to a process that is gone. The consumer is made anew so they come back at once, not after the
   * ack wait (the commit journal drops those already committed).
   */
  soleConsumer?: boolean;
  log?: (msg: string) => void;
}

/** Creates or updates the stream, the pipeline consumer and the buckets; safe to run on every start. */
export async function provision(jsm: JetStreamManager, kvm: Kvm, opts: ProvisionOptions): Promise<void> {
  const stream = {
    name: INGEST_STREAM,
    subjects: ['ingest.>'],
    storage: StorageType.File,
    // A payload leaves the stream when the pipeline acks it; until then nothing drops it: when the store is
    // full, new payloads are refused (503) instead.
    retention: RetentionPolicy.Workqueue,
    discard: DiscardPolicy.New,
    max_age: opts.maxAgeHours > 0 ? nanos(opts.maxAgeHours * 3600 * 1000) : 0,
    max_bytes: opts.maxBytes,
    max_msg_size: opts.maxMsgBytes,
    duplicate_window: nanos(IDEMPOTENCY_WINDOW_MS),
    num_replicas: opts.replicas ?? 1,
  };
  let existing: Awaited<ReturnType<JetStreamManager['streams']['info']>> | null = null;
  try {
    existing = await jsm.streams.info(INGEST_STREAM);
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  if (existing && existing.config.retention !== RetentionPolicy.Workqueue) {
    // A store made before work-queue retention: its retention cannot change in place. Recreate it only when
    // nothing in it is waiting for the pipeline; otherwise keep it and say so.
    const pending = await jsm.consumers
      .info(INGEST_STREAM, PIPELINE_CONSUMER)
      .then((c) => c.num_pending + c.num_ack_pending)
      .catch(() => existing!.state.messages);
    if (pending === 0) {
      await jsm.streams.delete(INGEST_STREAM);
      existing = null;
      opts.log?.(`recreated ${INGEST_STREAM} with work-queue retention`);
    } else {
      opts.log?.(
        `${INGEST_STREAM} keeps limits retention until its ${pending} pending payloads are processed; restart then`,
      );
    }
  }
  if (existing) {
    const { storage: _s, retention: _r, ...mutable } = stream;
    // Copies are never lowered by a process started without NATS_REPLICAS: only raised.
    mutable.num_replicas = Math.max(existing.config.num_replicas ?? 1, stream.num_replicas);
    await jsm.streams.update(INGEST_STREAM, mutable);
  } else {
    await jsm.streams.add(stream);
  }
  const consumer = {
    durable_name: PIPELINE_CONSUMER,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: nanos(opts.ackWaitMs),
    // Never give up on a payload: a message that keeps failing is a bug to fix, not data to drop.
    max_deliver: -1,
    max_ack_pending: opts.maxAckPending,
  };
  let held: number | null = null;
  try {
    held = (await jsm.consumers.info(INGEST_STREAM, PIPELINE_CONSUMER)).num_ack_pending;
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  if (held !== null && held > 0 && opts.soleConsumer) {
    // A work queue keeps its messages until they are acked, whatever happens to its consumer.
    await jsm.consumers.delete(INGEST_STREAM, PIPELINE_CONSUMER);
    opts.log?.(`${held} payloads held by a stopped process are delivered again now`);
    held = null;
  }
  if (held === null) {
    await jsm.consumers.add(INGEST_STREAM, consumer);
  } else {
    await jsm.consumers.update(INGEST_STREAM, PIPELINE_CONSUMER, {
      ack_wait: consumer.ack_wait,
      max_deliver: consumer.max_deliver,
      max_ack_pending: consumer.max_ack_pending,
    });
  }
  const ttls: Record<string, number> = {
    [BUCKETS.sessions]: SESSION_TTL_MS,
    [COMMIT_CLAIMS_BUCKET]: COMMIT_CLAIM_TTL_MS,
    [OTLP_SERIES_BUCKET]: OTLP_SERIES_TTL_MS,
  };
  for (const bucket of [...Object.values(BUCKETS), COMMIT_CLAIMS_BUCKET, OTLP_SERIES_BUCKET]) {
    await kvm.create(bucket, {
      history: 1,
      replicas: opts.replicas ?? 1,
      storage: StorageType.File,
      ...(ttls[bucket] ? { ttl: ttls[bucket] } : {}),
    });
    // A bucket made before (a single server grown into a cluster) keeps its config on create: raise its copies.
    const name = `KV_${bucket}`;
    const info = await jsm.streams.info(name);
    if ((info.config.num_replicas ?? 1) < (opts.replicas ?? 1))
      await jsm.streams.update(name, { ...info.config, num_replicas: opts.replicas ?? 1 });
  }
}
