import os from 'node:os';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { Piscina } from 'piscina';
import { z } from 'zod';
import { publishIngest, requestMessageId } from '../../broker/ingest-publisher.js';
import type { CheckResult, CheckTask } from '../../pipeline/otlp/check-worker.js';
import { type OtlpEncoding, otlpFormat } from '../../pipeline/otlp/decode.js';
import { responseType, type Signal, statusType } from '../../pipeline/otlp/proto.js';
import { ServiceError, unavailable, validationError } from '../../schemas/errors.js';
import { WORKER_EXEC_ARGV, workerFile } from '../../storage/worker-file.js';
import { principalOf } from '../auth.js';
import { rawBodyOf, readRawBody } from '../body-parser.js';
import type { ApiContext } from '../context.js';
import { toServiceError } from '../error-handler.js';
import { scrubSecrets } from '../log-redaction.js';
import { documentedOnly } from '../validate.js';

/**
 * OTLP/HTTP ingest (CONTRACT §12): POST /v1/traces, /v1/logs, /v1/metrics, protobuf or JSON, gzip or not. The body
 * is decoded and checked in a worker thread before the answer (400: nothing kept), then published onto the ingest
 * stream like an /api/ingest body (gzip as it came, uncompressed compressed: broker/ingest-publisher.ts), for the
 * pipeline to map. Answers are the OTLP ones, in the
 * request's encoding: the Export…ServiceResponse, or a google.rpc.Status for an error.
 */

const PROTOBUF = 'application/x-protobuf';

const SIGNALS: Record<Signal, { path: string; rejected: string; what: string }> = {
  traces: { path: '/v1/traces', rejected: 'rejectedSpans', what: 'spans' },
  logs: { path: '/v1/logs', rejected: 'rejectedLogRecords', what: 'log records' },
  metrics: { path: '/v1/metrics', rejected: 'rejectedDataPoints', what: 'metric data points' },
};

/** The request's encoding, by its media type (parameters such as charset ignored). */
function encodingOf(req: FastifyRequest): OtlpEncoding {
  const type = String(req.headers['content-type'] ?? '')
    .split(';')[0]!
    .trim()
    .toLowerCase();
  return type === PROTOBUF ? 'protobuf' : 'json';
}

/** google.rpc.Status codes for the HTTP statuses an OTLP route answers. */
const GRPC_CODES: Record<number, number> = {
  400: 3, // INVALID_ARGUMENT
  401: 16, // UNAUTHENTICATED
  403: 7, // PERMISSION_DENIED
  413: 8, // RESOURCE_EXHAUSTED
  415: 3,
  429: 8,
  503: 14, // UNAVAILABLE
};

function sendOtlp(req: FastifyRequest, reply: FastifyReply, protoMessage: () => Uint8Array, json: object) {
  if (encodingOf(req) === 'protobuf') {
    return reply.header('content-type', PROTOBUF).send(Buffer.from(protoMessage()));
  }
  // An object, so the answer check (VALIDATE_ANSWERS) sees it as any JSON answer.
  return reply.header('content-type', 'application/json; charset=utf-8').send(json);
}

/** The Export…ServiceResponse: partialSuccess only when something was rejected. */
function exportAnswer(signal: Signal, rejected: number, message: string | null) {
  const field = SIGNALS[signal].rejected;
  const json = rejected > 0 ? { partialSuccess: { [field]: rejected, errorMessage: message ?? '' } } : {};
  const proto = () => {
    const type = responseType(signal);
    return type.encode(type.fromObject(json)).finish();
  };
  return { json, proto };
}

/** A partialSuccess as documented (the JSON form; protobuf carries the same fields). */
const exportResponse = (field: string) =>
  z
    .strictObject({
      partialSuccess: z
        .strictObject({ [field]: z.number().int().nonnegative(), errorMessage: z.string() })
        .optional(),
    })
    .describe(`The Export…ServiceResponse, in the request's encoding (${PROTOBUF} or application/json)`);

const statusAnswer = z
  .strictObject({ code: z.number().int(), message: z.string() })
  .describe(`A google.rpc.Status, in the request's encoding (${PROTOBUF} or application/json)`);

const otlpBody = documentedOnly(
  z
    .unknown()
    .describe(
      `An Export…ServiceRequest of OTLP 1.x as ${PROTOBUF} or application/json, gzip or not (content-encoding)`,
    ),
);

/** Bodies waiting for a check thread at most; past it a request is answered 503 (retried by OTLP exporters). */
const MAX_WAITING = 64;

/** A pool of check workers, started at the first OTLP request (a service that never gets one has no threads). */
function checkPool() {
  let pool: Piscina<CheckTask, CheckResult> | null = null;
  return {
    async run(task: CheckTask): Promise<CheckResult> {
      pool ??= new Piscina({
        filename: workerFile(import.meta.url, '../../pipeline/otlp/check-worker.js'),
        execArgv: WORKER_EXEC_ARGV,
        minThreads: 1,
        maxThreads: Math.max(1, Math.min(4, os.availableParallelism())),
        maxQueue: MAX_WAITING,
      });
      if (pool.queueSize >= MAX_WAITING)
        throw unavailable('too many OTLP bodies are waiting to be decoded', 1);
      return pool.run(task);
    },
    async close() {
      await pool?.destroy();
      pool = null;
    },
  };
}

export const otlpRoutes =
  (deps: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    const { config } = deps;
    const pool = checkPool();
    app.addHook('onClose', () => pool.close());
    app.addContentTypeParser(PROTOBUF, (req: FastifyRequest, payload: NodeJS.ReadableStream) =>
      readRawBody(req, payload, {
        maxBytes: config.BODY_MAX_BYTES,
        maxDecodedBytes: config.BODY_MAX_DECODED_BYTES,
      }),
    );
    // OTLP's error answers: the HTTP status of the contract's code, a google.rpc.Status body.
    app.setErrorHandler((err, req, reply) => {
      let e = toServiceError(err as FastifyError, req);
      if (e.code === 'UNSUPPORTED_MEDIA_TYPE' && !/content-encoding/.test(e.message))
        e = new ServiceError('UNSUPPORTED_MEDIA_TYPE', `the body must be ${PROTOBUF} or application/json`);
      const message = `${scrubSecrets(e.message)} (request ${String(req.id)})`;
      const body = { code: GRPC_CODES[e.status] ?? 13, message };
      if (e.closeConnection) reply.header('connection', 'close');
      reply.code(e.status).headers(e.headers);
      const type = statusType();
      return sendOtlp(req, reply, () => type.encode(type.fromObject(body)).finish(), body);
    });

    for (const signal of Object.keys(SIGNALS) as Signal[]) {
      const { path, rejected, what } = SIGNALS[signal];
      app.post(
        path,
        {
          config: { rawJsonBody: true, need: 'ingest' },
          schema: {
            summary: `OTLP/HTTP ${signal}: 200 once the broker has stored the body durably`,
            description:
              `Any OpenTelemetry SDK or Collector exports here (OTEL_EXPORTER_OTLP_ENDPOINT set to the service). ` +
              `The body is decoded and checked before the answer; ${what} that cannot be mapped are counted in ` +
              'partialSuccess and listed by GET /api/ingest/rejections. Errors are a google.rpc.Status.',
            tags: ['otlp'],
            body: otlpBody,
            response: {
              200: exportResponse(rejected),
              400: statusAnswer,
              401: statusAnswer,
              403: statusAnswer,
            },
          },
        },
        async (req, reply) => {
          const principal = principalOf(req);
          if (principal.kind !== 'key') throw new Error('unreachable: ingest is for keys');
          const body = rawBodyOf(req);
          const encoding = encodingOf(req);
          const checked = await pool.run({ signal, encoding, body: body.decoded });
          if ('error' in checked)
            throw validationError(checked.error, [{ path: '', message: 'the body cannot be decoded' }]);
          if (checked.items > 0) {
            // A byte-identical body resent within the window is stored once (CONTRACT §12).
            const msgId = requestMessageId(principal, { body: body.raw, otlp: true });
            const started = performance.now();
            await publishIngest(
              deps.broker,
              {
                workspaceId: principal.workspaceId,
                mode: principal.mode,
                keyId: principal.id,
                requestId: String(req.id),
                receivedAt: Date.now(),
                encoding: body.encoding,
                format: otlpFormat(signal, encoding),
              },
              msgId,
              body.raw,
              config.PUBLISH_TIMEOUT_MS,
              config.STREAM_COMPRESSION,
            );
            deps.metrics.publishSeconds.observe((performance.now() - started) / 1000);
            deps.metrics.ingestItems.inc({ kind: signal === 'traces' ? 'spans' : signal }, checked.items);
          }
          const answer = exportAnswer(signal, checked.rejected, checked.message);
          return sendOtlp(req, reply, answer.proto, answer.json);
        },
      );
    }
  };
