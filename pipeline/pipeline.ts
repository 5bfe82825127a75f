import type { ConsumerMessages, JsMsg } from '@nats-io/jetstream';
import { Piscina } from 'piscina';
import { inOwnBuffer } from '../broker/client-buffers.js';
import type { Broker } from '../broker/connection.js';
import {
  COMMIT_CLAIMS_BUCKET,
  INGEST_STREAM,
  OTLP_SERIES_BUCKET,
  PIPELINE_CONSUMER,
} from '../broker/provision.js';
import type { ControlPlane } from '../control/control-plane.js';
import { INGEST_HEADERS, ingestMessageMetaSchema, MESSAGE_ID_HEADER } from '../schemas/broker-messages.js';
import type { Config } from '../schemas/config.js';
import { type IssueOccurrences, mergeOccurrences } from '../schemas/issues.js';
import type { MetricRecord, Mode } from '../schemas/records.js';
import { HOUR_MS } from '../schemas/time.js';
import { BatchWriter } from '../storage/batch-writer.js';
import type { ColumnChunk } from '../storage/columns.js';
import { CommitJournal, commitId, type Delivery } from '../storage/commit-journal.js';
import { type CompactionStats, compactionOptions, runCompaction } from '../storage/compaction.js';
import { QueryEngine } from '../storage/duckdb.js';
import { removeOrphanTempFiles } from '../storage/orphans.js';
import { applyRetention } from '../storage/retention.js';
import { WORKER_EXEC_ARGV, workerFile } from '../storage/worker-file.js';
import { type BatchEntry, Batcher, type ClaimedBatch, retryDelayMs } from './batcher.js';
import { type ClaimStats, CommitClaims } from './commit-claims.js';
import { CumulativeSeries } from './otlp/cumulative.js';
import type { CumulativeRecord } from './otlp/process.js';
import { SharedCumulativeSeries } from './otlp/shared-series.js';
import type { ParseResult, ParseTask } from './parse-worker.js';
import { toChunks } from './to-columns.js';

export interface PipelineLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}

export interface PipelineStats {
  messages: number;
  /**
   * Messages whose request was already committed (a redelivery, or a copy a restarted broker stored again):
   * acked, not written again.
   */
  redeliveredSkipped: number;
  /** Messages whose processing threw (naked, to come again): a bug or a broken worker, never client data. */
  failed: number;
  /** Deliveries of a message this process already held (dropped; the held copy is acked). */
  duplicateDeliveries: number;
  /** Batches that could not be written or finished (a full disk…): their messages come again. */
  flushFailures: number;
  executions: number;
  logs: number;
  metrics: number;
  rejected: number;
  flushes: number;
  rowsWritten: number;
  /** Of rowsWritten, executions: committed, so visible to queries. */
  executionsWritten: number;
  filesWritten: number;
  lastFlushMs: number;
  lastFlushRows: number;
  /** Summed flush durations: with `flushes`, the mean flush latency. */
  flushMsTotal: number;
  /** Ingest bodies parsed in groups by the cuts the API found (grouped-json.ts); the others were parsed whole. */
  groupedParses: number;
  /** Bodies moved to a parse worker in the buffer they arrived in (broker/client-buffers.ts); the others copied. */
  movedBodies: number;
  /** Compaction passes this process ran, failed ones included (it holds the compaction lease), and their time. */
  compactionPasses: number;
  compactionMsTotal: number;
  /**
   * Statements of a running hour's merge that ran out of memory at COMPACTION_RUNNING_MEMORY_MB and ran again at
   * COMPACTION_MEMORY_MB: each is a rise of the service's memory by about the difference while it runs.
   */
  compactionMemoryFallbacks: number;
  /**
   * Messages another process was committing when a batch of this one claimed them (naked, to come again), and
   * commits of a stalled or dead process fenced by this one (pipeline/commit-claims.ts).
   */
  claimsContested: number;
  commitsFenced: number;
}

export interface PipelineOptions {
  broker: Broker;
  config: Config;
  /** Workspace settings: outcome rules for classification, retention for the retention job. */
  control: ControlPlane;
  log: PipelineLog;
  /** Test seam: runs after a batch is committed, before its acks. */
  afterCommit?: () => Promise<void> | void;
  /** Test seam: runs right before a batch's commit point, after its checks. */
  beforeCommitPoint?: () => void;
  /** No other pipeline process shares the consumer (the broker is embedded): see CommitClaimsOptions.sole. */
  sole?: boolean;
}

/** A temporary file this old was left by a writer that died before committing it. */
const ORPHAN_MIN_AGE_MS = 10 * 60 * 1000;

/** Expired partitions are deleted at start and then every hour. */
const RETENTION_EVERY_MS = HOUR_MS;

/** How long a pull request lasts; also how soon a consumer found unavailable is asked for again. */
const PULL_EXPIRES_MS = 5000;

/** How often the journal is pruned against the consumer's ack floor. */
const PRUNE_EVERY_MS = 5000;

/**
 * The write path: the durable pull consumer feeds parse workers, whose column chunks the batcher commits to
 * Parquet; messages are acked only after that. Any number of pipeline processes may share the consumer.
 */
export class Pipeline {
  readonly #o: PipelineOptions;
  readonly #journal: CommitJournal;
  /** Cumulative OTLP series: in memory for a lone pipeline, else shared with the others in the broker. */
  #cumulative: CumulativeSeries | SharedCumulativeSeries = new CumulativeSeries();
  #pool: Piscina<ParseTask, ParseResult> | null = null;
  #writer: BatchWriter | null = null;
  #claims: CommitClaims | null = null;
  #batcher: Batcher | null = null;
  #messages: ConsumerMessages | null = null;
  /**
   * Messages received and not yet taken by the loop: held (and heartbeated) from the moment they arrive, since the
   * client asks the server for more as they arrive, not as the loop takes them. A message waiting here longer than
   * the ack wait is still this process's: it is not handed to another one meanwhile.
   */
  readonly #received: JsMsg[] = [];
  #wake: (() => void) | null = null;
  #intakeClosed = false;
  #loop: Promise<void> | null = null;
  #inFlight = new Set<Promise<void>>();
  /** Messages received and not yet acked or naked, by stream sequence. */
  readonly #held = new Map<number, JsMsg>();
  #heartbeat: NodeJS.Timeout | null = null;
  #lastPrune = 0;
  #retentionTimer: NodeJS.Timeout | null = null;
  #compactionTimer: NodeJS.Timeout | null = null;
  #compactionEngine: QueryEngine | null = null;
  #compacting = false;
  readonly #stats: Omit<PipelineStats, 'claimsContested' | 'commitsFenced'> = {
    messages: 0,
    redeliveredSkipped: 0,
    failed: 0,
    duplicateDeliveries: 0,
    flushFailures: 0,
    executions: 0,
    logs: 0,
    metrics: 0,
    rejected: 0,
    flushes: 0,
    rowsWritten: 0,
    executionsWritten: 0,
    filesWritten: 0,
    lastFlushMs: 0,
    lastFlushRows: 0,
    flushMsTotal: 0,
    groupedParses: 0,
    movedBodies: 0,
    compactionPasses: 0,
    compactionMsTotal: 0,
    compactionMemoryFallbacks: 0,
  };

  constructor(opts: PipelineOptions) {
    this.#o = opts;
    this.#journal = new CommitJournal(opts.config.dataDir);
  }

  stats(): Readonly<PipelineStats> {
    const claims: Partial<ClaimStats> = this.#claims?.stats ?? {};
    return { ...this.#stats, claimsContested: claims.contested ?? 0, commitsFenced: claims.fenced ?? 0 };
  }

  async start(): Promise<void> {
    const { config, log } = this.#o;
    this.#o.control.onSettingsChange((workspaceId) => this.#rulesText.delete(workspaceId));
    const recovered = await this.#journal.recover();
    if (recovered.entries > 0) log.info(recovered, 'commit journal recovered');
    const orphans = await removeOrphanTempFiles(config.dataDir, ORPHAN_MIN_AGE_MS);
    if (orphans > 0) log.info({ orphans }, 'removed uncommitted temporary files');
    await this.#retention();
    this.#retentionTimer = setInterval(() => void this.#retention(), RETENTION_EVERY_MS);
    this.#retentionTimer.unref();
    if (config.COMPACTION_INTERVAL_MS > 0) {
      // Its own single-threaded DuckDB: merging files must not take the query engine's threads.
      this.#compactionEngine = await QueryEngine.open(config.dataDir, 1, config.COMPACTION_MEMORY_MB);
      this.#compactionTimer = setInterval(() => void this.compact(), config.COMPACTION_INTERVAL_MS);
      this.#compactionTimer.unref();
    }
    this.#pool = new Piscina({
      filename: workerFile(import.meta.url, 'parse-worker.js'),
      execArgv: WORKER_EXEC_ARGV,
      minThreads: config.pipelineWorkers,
      maxThreads: config.pipelineWorkers,
    });
    this.#writer = new BatchWriter({
      dataDir: config.dataDir,
      codec: config.PARQUET_COMPRESSION,
      dictionary: config.PARQUET_DICTIONARY,
      journal: this.#journal,
      encodeThreads: config.ENCODE_WORKERS,
      beforeCommitPoint: this.#o.beforeCommitPoint,
    });
    this.#batcher = new Batcher({
      writer: this.#writer,
      maxRows: config.BATCH_MAX_ROWS,
      flushIntervalMs: config.FLUSH_INTERVAL_MS,
      log,
      afterCommit: this.#o.afterCommit,
      beforeCommit: (entries) => this.#recordIssues(entries),
      claim: (ds) => this.#claim(ds),
      onSettled: (m) => this.#held.delete(m.seq),
      onFailed: () => this.#stats.flushFailures++,
      onFlushed: (s) => {
        this.#stats.flushes++;
        this.#stats.rowsWritten += s.rows;
        this.#stats.executionsWritten += s.executions;
        this.#stats.filesWritten += s.files;
        this.#stats.lastFlushMs = s.ms;
        this.#stats.lastFlushRows = s.rows;
        this.#stats.flushMsTotal += s.ms;
        void this.#maybePrune();
      },
    });
    // Alone on the consumer, this process is the only writer and commits one batch at a time, asking the journal
    // before each: claims guard against another process committing the same request, so they are not needed.
    // Measured: two KV writes per message (claim, release), about 1,600 a second at full load.
    if (!this.#o.sole) {
      this.#cumulative = new SharedCumulativeSeries(await this.#o.broker.kvm.open(OTLP_SERIES_BUCKET));
      this.#claims = new CommitClaims({
        kv: await this.#o.broker.kvm.open(COMMIT_CLAIMS_BUCKET),
        journal: this.#journal,
        staleMs: config.CONSUMER_ACK_WAIT_MS,
        log,
      });
    }
    const consumer = await this.#o.broker.js.consumers.get(INGEST_STREAM, PIPELINE_CONSUMER);
    this.#messages = await consumer.consume({
      max_messages: config.CONSUMER_MAX_MESSAGES,
      // A pull lasts this long, and after a reconnect that finds the consumer unavailable (its NATS node died and
      // the stream elects a new leader) the client asks again after this long: 5 s, not the default 30 s a
      // pipeline would otherwise stand idle.
      expires: PULL_EXPIRES_MS,
      callback: (m) => this.#receive(m),
    });
    void this.#watchConsumerStatus(this.#messages);
    void this.#messages.closed().then(
      () => this.#closeIntake(),
      () => this.#closeIntake(),
    );
    this.#loop = this.#consume();
    // Held messages (parsing, waiting for a flush, being written) must not be redelivered meanwhile: tell the
    // server they are in progress well within the ack wait.
    const every = Math.max(500, Math.floor(config.CONSUMER_ACK_WAIT_MS / 3));
    this.#heartbeat = setInterval(() => {
      for (const m of this.#held.values()) {
        try {
          m.working();
        } catch {
          // The connection is down; the server redelivers after the ack wait, and the journal catches that.
        }
      }
    }, every);
    this.#heartbeat.unref();
  }

  /**
   * Claims a batch's messages for its commit, then asks the journal, afresh, which are committed already: the
   * claims first, so no other process can commit one of them between that answer and this commit.
   */
  async #claim(ds: readonly Delivery[]): Promise<ClaimedBatch> {
    const claims = this.#claims;
    const no = this.#journal.nextCommitNo();
    if (!claims) {
      const committed = await this.#journal.committedAmong(ds);
      this.#stats.redeliveredSkipped += committed.size;
      return { no, committed, contested: new Set(), lapsed: () => false, release: () => {} };
    }
    const { contested, held, lapsed } = await claims.claim(ds, commitId(this.#journal.writerId, no));
    let committed: Set<number>;
    try {
      committed = await this.#journal.committedAmong(ds.filter((d) => !contested.has(d.seq)));
    } catch (err) {
      claims.release(held);
      throw err;
    }
    this.#stats.redeliveredSkipped += committed.size;
    return { no, committed, contested, lapsed, release: () => claims.release(held) };
  }

  /** Says when the consumer is lost and found again (a NATS node died, the stream moved). */
  async #watchConsumerStatus(messages: ConsumerMessages): Promise<void> {
    const log = this.#o.log;
    for await (const s of messages.status()) {
      if (s.type === 'heartbeats_missed' || s.type === 'consumer_not_found' || s.type === 'stream_not_found')
        log.warn({ status: s }, 'consumer unavailable; asking again');
      else if (s.type === 'consumer_deleted') log.error({ status: s }, 'consumer deleted');
    }
  }

  #receive(m: JsMsg): void {
    let seq: number;
    try {
      seq = m.seq;
    } catch {
      // Not a stream message (a status the client passed through while its connection closed).
      this.#o.log.debug({ subject: m.subject }, 'skipped a message without delivery info');
      return;
    }
    if (this.#held.has(seq)) {
      // Delivered again while this process still holds it (its ack is on the way): one copy is enough.
      this.#stats.duplicateDeliveries++;
      return;
    }
    this.#held.set(seq, m);
    this.#received.push(m);
    this.#wake?.();
  }

  #closeIntake(): void {
    this.#intakeClosed = true;
    this.#wake?.();
  }

  async #consume(): Promise<void> {
    // Parse tasks in flight: enough to keep every worker busy while results are handed back.
    const maxInFlight = this.#o.config.pipelineWorkers * 4;
    for (;;) {
      while (this.#received.length === 0 && !this.#intakeClosed)
        await new Promise<void>((r) => {
          this.#wake = r;
        });
      this.#wake = null;
      if (this.#intakeClosed) {
        // Stopped: what was never started goes back to the server at once, for another process to take.
        for (const w of this.#received.splice(0)) {
          this.#held.delete(w.seq);
          try {
            w.nak();
          } catch {
            // The connection is gone: the server hands it out again after the ack wait.
          }
        }
        return;
      }
      const m = this.#received.shift()!;
      const seq = m.seq;
      await this.#batcher!.waitForRoom();
      while (this.#inFlight.size >= maxInFlight) await Promise.race(this.#inFlight);
      const p = this.#handle(m).catch((err) => {
        this.#stats.failed++;
        this.#o.log.error({ err, seq }, 'message processing failed; it will be redelivered');
        m.nak(retryDelayMs(m.info.deliveryCount));
        this.#held.delete(seq);
      });
      this.#inFlight.add(p);
      void p.finally(() => this.#inFlight.delete(p));
    }
  }

  async #handle(m: JsMsg): Promise<void> {
    this.#stats.messages++;
    const h = m.headers;
    const meta = ingestMessageMetaSchema.safeParse({
      workspaceId: h?.get(INGEST_HEADERS.workspace),
      mode: h?.get(INGEST_HEADERS.mode),
      keyId: h?.get(INGEST_HEADERS.keyId),
      requestId: h?.get(INGEST_HEADERS.requestId),
      receivedAt: h?.get(INGEST_HEADERS.receivedAt),
      encoding: h?.get(INGEST_HEADERS.encoding) || undefined,
      format: h?.get(INGEST_HEADERS.format) || undefined,
      jsonCuts: h?.get(INGEST_HEADERS.jsonCuts) || undefined,
    });
    if (!meta.success) {
      // Only the API publishes here, so this is not client data; keep it out of the way, loudly.
      this.#o.log.error(
        { seq: m.seq, subject: m.subject, issues: meta.error.issues },
        'ingest message without valid headers; terminated',
      );
      m.term();
      this.#held.delete(m.seq);
      return;
    }
    const storedAt = Math.floor(m.info.timestampNanos / 1e6);
    // Every message the API publishes has an id; one without is known by its sequence and time.
    const delivery: Delivery = {
      seq: m.seq,
      id: h?.get(MESSAGE_ID_HEADER) || `seq.${m.seq}.${storedAt}`,
      storedAt,
    };
    // A redelivery (or a resend after a broker restart) of a request already committed: acked, not written again.
    // Only a redelivery, or a request this process knows, asks the journal now; the batch asks once more, afresh,
    // before its commit.
    if (
      (m.info.redelivered || this.#journal.knows(delivery)) &&
      (await this.#journal.isCommitted(delivery))
    ) {
      this.#stats.redeliveredSkipped++;
      m.ack();
      this.#held.delete(m.seq);
      return;
    }
    // The body moves to the worker with its ArrayBuffer. A message that spanned socket reads was gathered in a
    // buffer of its own (broker/client-buffers.ts), which moves as it is: its headers were read above, and nothing
    // here reads m.data again (a failed task is redelivered, not retried from it; m.data would throw once its
    // buffer has moved). Any other message views a buffer shared with others (moving that would detach their
    // data; Buffer.from would share Node's pool the same way): it is copied into an ArrayBuffer of its own,
    // allocUnsafeSlow so not zeroed.
    const data = m.data;
    let body: Uint8Array = data;
    if (inOwnBuffer(data)) this.#stats.movedBodies++;
    else {
      body = Buffer.allocUnsafeSlow(data.length);
      body.set(data);
    }
    const result = await this.#pool!.run(
      {
        body,
        encoding: meta.data.encoding,
        format: meta.data.format,
        jsonCuts: meta.data.jsonCuts,
        maxDecodedBytes: this.#o.config.BODY_MAX_DECODED_BYTES,
        mode: meta.data.mode,
        workspaceId: this.#o.config.FINGERPRINT_STAGE ? meta.data.workspaceId : undefined,
        requestId: meta.data.requestId,
        receivedAt: meta.data.receivedAt,
        seq: m.seq,
        outcomeRules: this.#rulesJson(meta.data.workspaceId),
        indexedKeys: this.#o.control.settingsOf(meta.data.workspaceId).indexedContextKeys,
      },
      { transferList: [body.buffer as ArrayBuffer] },
    );
    this.#stats.executions += result.counts.executions;
    this.#stats.logs += result.counts.logs;
    this.#stats.metrics += result.counts.metrics;
    this.#stats.rejected += result.counts.rejected;
    if (result.grouped) this.#stats.groupedParses++;
    const chunks =
      result.cumulative.length > 0
        ? [...result.chunks, ...(await this.#increments(meta.data, m.seq, result.cumulative))]
        : result.chunks;
    this.#batcher!.add(m, delivery, meta.data.workspaceId, meta.data.mode, chunks, result.issues);
  }

  /** Cumulative OTLP points as increments (otlp/cumulative.ts), in column chunks like the worker's. */
  async #increments(
    meta: { workspaceId: string; mode: Mode; requestId: string; receivedAt: number },
    seq: number,
    points: readonly CumulativeRecord[],
  ): Promise<ColumnChunk[]> {
    const series = this.#cumulative;
    const key = (p: CumulativeRecord) => `${meta.workspaceId}.${meta.mode}.${p.series}`;
    const increments =
      series instanceof CumulativeSeries
        ? points.map((p) => series.increment(key(p), p, p.record))
        : await Promise.all(points.map((p) => series.increment(key(p), p, p.record)));
    const metrics = increments.filter((r): r is MetricRecord => r !== null);
    this.#stats.metrics += metrics.length;
    if (metrics.length === 0) return [];
    const out = { executions: [], logs: [], metrics, rejections: [] };
    return toChunks(out, { requestId: meta.requestId, receivedAt: meta.receivedAt, seq }).finish();
  }

  /**
   * A batch's occurrences, merged per workspace, mode and issue, handed to the control plane: one call per
   * issue per batch, which writes only when the issue is new or moves.
   */
  async #recordIssues(entries: readonly BatchEntry[]): Promise<void> {
    const scopes = new Map<
      string,
      { workspaceId: string; mode: Mode; issues: Map<string, IssueOccurrences> }
    >();
    for (const e of entries) {
      if (e.issues.length === 0) continue;
      const key = `${e.workspaceId}.${e.mode}`;
      let scope = scopes.get(key);
      if (!scope) {
        scope = { workspaceId: e.workspaceId, mode: e.mode, issues: new Map() };
        scopes.set(key, scope);
      }
      for (const o of e.issues) {
        const seen = scope.issues.get(o.issueId);
        if (seen) mergeOccurrences(seen, o);
        else scope.issues.set(o.issueId, { ...o, environments: [...o.environments] });
      }
    }
    await Promise.all(
      [...scopes.values()].map((s) =>
        this.#o.control.issues.recordOccurrences(s.workspaceId, s.mode, [...s.issues.values()]),
      ),
    );
  }

  /** The workspace's rules as JSON text, remade only when its settings change. */
  readonly #rulesText = new Map<string, string | undefined>();
  #rulesJson(workspaceId: string): string | undefined {
    if (!this.#rulesText.has(workspaceId)) {
      const rules = this.#o.control.settingsOf(workspaceId).outcomeRules;
      this.#rulesText.set(workspaceId, rules.length > 0 ? JSON.stringify(rules) : undefined);
    }
    return this.#rulesText.get(workspaceId);
  }

  /**
   * One compaction pass, when this process holds the compaction lease (one compactor at a time across
   * pipeline processes). Passes never overlap.
   */
  async compact(): Promise<CompactionStats | null> {
    const engine = this.#compactionEngine;
    if (!engine || this.#compacting) return null;
    this.#compacting = true;
    try {
      const { config, control, log } = this.#o;
      const leaseMs = Math.max(60_000, config.COMPACTION_INTERVAL_MS * 3);
      let renewedAt = 0;
      // Renewed when a third of it has passed (no one else can take a lease renewed more recently than that): a
      // pass over many idle partitions does not write to the bucket for each.
      const holds = async () => {
        if (Date.now() - renewedAt < leaseMs / 3) return true;
        const held = await control.tryLease('compaction', this.#journal.writerId, leaseMs);
        if (held) renewedAt = Date.now();
        return held;
      };
      if (!(await holds())) return null;
      const started = performance.now();
      // Counted whether the pass succeeds or fails (a partition that keeps failing still costs its time).
      const stats = await runCompaction(engine, config.dataDir, {
        ...compactionOptions(config),
        // Asked before each partition: a pass that stalled past its lease stops where another took over.
        stillHolds: holds,
        onMemoryFallback: () => this.#stats.compactionMemoryFallbacks++,
      }).finally(() => {
        this.#stats.compactionPasses++;
        this.#stats.compactionMsTotal += performance.now() - started;
      });
      if (stats.partitions > 0 || stats.deleted > 0 || stats.leaseLost || stats.memoryFallbacks)
        log.info(stats, 'compaction pass');
      return stats;
    } catch (err) {
      this.#o.log.warn({ err }, 'compaction pass failed; the next one retries');
      return null;
    } finally {
      this.#compacting = false;
    }
  }

  async #retention(): Promise<void> {
    try {
      const r = await applyRetention(
        this.#o.config.dataDir,
        (ws) => this.#o.control.settingsOf(ws).retentionDays,
      );
      if (r.removedPartitions > 0) this.#o.log.info(r, 'retention removed expired partitions');
    } catch (err) {
      this.#o.log.warn({ err }, 'retention run failed; it runs again within the hour');
    }
  }

  async #maybePrune(): Promise<void> {
    if (Date.now() - this.#lastPrune < PRUNE_EVERY_MS) return;
    this.#lastPrune = Date.now();
    try {
      const [consumer, stream] = await Promise.all([
        this.#o.broker.jsm.consumers.info(INGEST_STREAM, PIPELINE_CONSUMER),
        this.#o.broker.jsm.streams.info(INGEST_STREAM),
      ]);
      // A work queue holds exactly the messages not yet acked: the oldest of them may still be a copy.
      const oldestPending =
        stream.state.messages > 0 ? Date.parse(stream.state.first_ts) : Number.POSITIVE_INFINITY;
      await this.#journal.prune(consumer.ack_floor.stream_seq, Math.min(Date.now(), oldestPending));
    } catch (err) {
      this.#o.log.debug({ err }, 'journal prune skipped');
    }
  }

  /**
   * Whether a request with this broker message id, stored now, is a copy of one already committed (the pipeline
   * will not write it again). Answers from what this process has read of the journal.
   */
  committedRequest(messageId: string): boolean {
    return this.#journal.knows({ seq: -1, id: messageId, storedAt: Date.now() });
  }

  /** Messages accepted but not yet committed, across all pipeline processes (the stream's backlog). */
  async lag(): Promise<number> {
    const info = await this.#o.broker.jsm.consumers.info(INGEST_STREAM, PIPELINE_CONSUMER);
    return info.num_pending + info.num_ack_pending;
  }

  /** Waits until every message published so far is committed (tests, benchmarks). */
  async drained(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if ((await this.lag()) === 0) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('pipeline did not drain in time');
  }

  /** Stops intake, finishes in-flight messages, flushes, and closes the workers. */
  async stop(): Promise<void> {
    if (this.#retentionTimer) clearInterval(this.#retentionTimer);
    if (this.#compactionTimer) clearInterval(this.#compactionTimer);
    if (this.#heartbeat) clearInterval(this.#heartbeat);
    await this.#messages?.close().catch(() => {});
    this.#closeIntake();
    await this.#loop?.catch(() => {});
    await Promise.allSettled([...this.#inFlight]);
    await this.#batcher?.flush();
    // Let the final acks reach the server, then drop the journal entries they made redundant.
    await this.#o.broker.nc.flush().catch(() => {});
    this.#lastPrune = 0;
    await this.#maybePrune();
    while (this.#compacting) await new Promise((r) => setTimeout(r, 20));
    this.#compactionEngine?.close();
    await this.#pool?.destroy();
    await this.#writer?.close();
  }
}
