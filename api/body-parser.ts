import zlib from 'node:zlib';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ServiceError, validationError } from '../schemas/errors.js';

/** What an ingest route receives: the body as sent (for the broker) and decoded (for the envelope check). */
export interface RawJsonBody {
  raw: Buffer;
  decoded: Buffer;
  encoding: 'gzip' | 'identity';
}

/** The body of a `rawJsonBody` route, as read; a request without one is a VALIDATION_ERROR. */
export function rawBodyOf(req: FastifyRequest): RawJsonBody {
  const body = req.body as RawJsonBody | undefined;
  if (!body || !Buffer.isBuffer(body.raw)) {
    throw validationError('a JSON body is required', [{ path: '', message: 'expected a JSON object' }]);
  }
  return body;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route wants a RawJsonBody instead of parsed JSON. */
    rawJsonBody?: boolean;
  }
}

function gunzip(buf: Buffer, maxOutputLength: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    zlib.gunzip(buf, { maxOutputLength }, (err, out) => {
      if (!err) return resolve(out);
      if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE' || err instanceof RangeError) {
        return reject(
          new ServiceError('PAYLOAD_TOO_LARGE', `the decoded body is over ${maxOutputLength} bytes`),
        );
      }
      reject(
        validationError('the body is not valid gzip', [
          { path: '', message: 'content-encoding: gzip, but the body does not decode' },
        ]),
      );
    });
  });
}

export function parseJson(buf: Buffer): unknown {
  try {
    return JSON.parse(buf.toString('utf8'));
  } catch (err) {
    throw validationError('the body is not valid JSON', [{ path: '', message: (err as Error).message }]);
  }
}

/**
 * A body past the limit is still read to its end, and dropped, before the 413 is answered: a client that writes its
 * whole body before it reads (fetch does) would otherwise have its connection closed under it (EPIPE) and never see
 * the 413 that tells it to split, so it would send the same body again and again. Up to this many bytes; past
 * them, or past DRAIN_MS, the connection is closed.
 */
const DRAIN_MAX_BYTES = 256 * 2 ** 20;
const DRAIN_MS = 30_000;

const tooLarge = () =>
  new ServiceError('PAYLOAD_TOO_LARGE', 'the request body is over the limit (see GET /api/limits)');

/** The body of `req`, at most `maxBytes` of it: past them, read on and dropped, then PAYLOAD_TOO_LARGE. */
export function readBody(
  req: FastifyRequest,
  payload: NodeJS.ReadableStream,
  maxBytes: number,
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    let timer: NodeJS.Timeout | undefined;
    const fail = (err: ServiceError, close: boolean) => {
      clearTimeout(timer);
      payload.removeAllListeners('data');
      // Not worth reading on: answered, then the connection is closed (installErrorHandler).
      if (close) err.closeConnection = true;
      reject(err);
    };
    if (Number.isFinite(declared) && declared > DRAIN_MAX_BYTES) return fail(tooLarge(), true);
    payload.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (!over && size > maxBytes) {
        over = true;
        chunks.length = 0;
        timer = setTimeout(() => fail(tooLarge(), true), DRAIN_MS);
      }
      if (over) {
        if (size > DRAIN_MAX_BYTES) fail(tooLarge(), true);
        return;
      }
      chunks.push(chunk);
    });
    payload.on('end', () => {
      clearTimeout(timer);
      if (over) return reject(tooLarge());
      if (Number.isFinite(declared) && declared !== size)
        return reject(new ServiceError('VALIDATION_ERROR', 'content-length does not match the body'));
      resolve(Buffer.concat(chunks, size));
    });
    // The client went away mid-body (nobody reads the answer): a 400 in the log, not a 500.
    payload.on('error', () => {
      clearTimeout(timer);
      reject(new ServiceError('VALIDATION_ERROR', 'the request body could not be read to its end'));
    });
  });
}

export interface BodyLimits {
  maxBytes: number;
  maxDecodedBytes: number;
}

/** A body as sent and decoded: `content-encoding` gzip or identity (415 otherwise), the size limits (413). */
export async function readRawBody(
  req: FastifyRequest,
  payload: NodeJS.ReadableStream,
  limits: BodyLimits,
): Promise<RawJsonBody> {
  const raw = await readBody(req, payload, limits.maxBytes);
  if (raw.length === 0)
    throw new ServiceError('VALIDATION_ERROR', 'the body is empty', [
      { path: '', message: 'expected a body' },
    ]);
  const enc = String(req.headers['content-encoding'] ?? 'identity')
    .trim()
    .toLowerCase();
  let encoding: RawJsonBody['encoding'];
  if (enc === 'gzip') encoding = 'gzip';
  else if (enc === 'identity' || enc === '') encoding = 'identity';
  else
    throw new ServiceError(
      'UNSUPPORTED_MEDIA_TYPE',
      `content-encoding ${enc} is not supported; use gzip or identity`,
    );
  const decoded = encoding === 'gzip' ? await gunzip(raw, limits.maxDecodedBytes) : raw;
  if (decoded.length > limits.maxDecodedBytes) {
    throw new ServiceError('PAYLOAD_TOO_LARGE', `the decoded body is over ${limits.maxDecodedBytes} bytes`);
  }
  return { raw, decoded, encoding };
}

/**
 * JSON bodies only (415 otherwise; routes that take another media type add its parser), the size limits as sent
 * (readBody) and decoded (413).
 */
export function installBodyParser(app: FastifyInstance, limits: BodyLimits): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    'application/json',
    async (req: FastifyRequest, payload: NodeJS.ReadableStream) => {
      const body = await readRawBody(req, payload, limits);
      if (req.routeOptions.config.rawJsonBody) return body;
      return parseJson(body.decoded);
    },
  );
  // Any other media type is refused with 415 before the body is read.
  app.addContentTypeParser('*', (_req, _payload, done) => {
    done(new ServiceError('UNSUPPORTED_MEDIA_TYPE', 'the body must be application/json'), undefined);
  });
}
