import zlib from 'node:zlib';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ServiceError, validationError } from '../schemas/errors.js';

/** What an ingest route receives: the body as sent (for the broker) and decoded (for the envelope check). */
export interface RawJsonBody {
  raw: Buffer;
  decoded: Buffer;
  encoding: 'gzip' | 'identity';
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
 * JSON bodies only (415 otherwise), `content-encoding` gzip or identity (415 otherwise), the size limits as sent
 * (Fastify's bodyLimit) and decoded (413).
 */
export function installBodyParser(
  app: FastifyInstance,
  limits: { maxBytes: number; maxDecodedBytes: number },
): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    'application/json',
    { parseAs: 'buffer', bodyLimit: limits.maxBytes },
    async (req: FastifyRequest, body: Buffer) => {
      const raw = body;
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
        throw new ServiceError(
          'PAYLOAD_TOO_LARGE',
          `the decoded body is over ${limits.maxDecodedBytes} bytes`,
        );
      }
      if (req.routeOptions.config.rawJsonBody) return { raw, decoded, encoding } satisfies RawJsonBody;
      return parseJson(decoded);
    },
  );
  // Any other media type is refused with 415 before the body is read.
  app.addContentTypeParser('*', (_req, _payload, done) => {
    done(new ServiceError('UNSUPPORTED_MEDIA_TYPE', 'the body must be application/json'), undefined);
  });
}
