import type { FastifyError, FastifyInstance, FastifyRequest } from 'fastify';
import { brokerUnavailable, isBrokerOutage } from '../broker/errors.js';
import { type ErrorBody, ServiceError } from '../schemas/errors.js';
import { scrubSecrets } from './log-redaction.js';
import { fromValidation } from './validate.js';

/** Fastify's own errors, translated to contract codes. */
function fromFastify(err: FastifyError): ServiceError | null {
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ServiceError('UNSUPPORTED_MEDIA_TYPE', 'the body must be application/json');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ServiceError(
        'PAYLOAD_TOO_LARGE',
        'the request body is over the limit (see GET /api/limits)',
      );
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ServiceError('VALIDATION_ERROR', 'the body is empty', [
        { path: '', message: 'expected a JSON body' },
      ]);
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new ServiceError('VALIDATION_ERROR', 'content-length does not match the body');
    default:
      if (err.statusCode === 400) return new ServiceError('VALIDATION_ERROR', err.message);
      return null;
  }
}

/**
 * Any error as the contract's (CONTRACT §3), logged as what it is: an outage (the broker down, a limit of the
 * store) is the caller's to retry, not a fault of this code; an unknown error is a 500 with its details in the
 * log only.
 */
export function toServiceError(err: FastifyError | ServiceError, req: FastifyRequest): ServiceError {
  const known =
    err instanceof ServiceError
      ? err
      : isBrokerOutage(err)
        ? brokerUnavailable()
        : (fromValidation(err, req) ?? fromFastify(err as FastifyError));
  const e =
    known ?? new ServiceError('INTERNAL_ERROR', 'internal error; the log has details under this request id');
  if (e.code === 'UNAVAILABLE')
    req.log.warn({ code: e.code, msg: e.message }, 'request refused: unavailable');
  else if (e.status >= 500) req.log.error({ err }, 'request failed');
  else req.log.info({ code: e.code, msg: e.message }, 'request refused');
  return e;
}

/** The one place errors become the contract's error body (CONTRACT §3). */
export function installErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError | ServiceError, req, reply) => {
    const e = toServiceError(err, req);
    // An error may echo what the caller sent (an id, a value): never a key or a token, even the caller's own.
    const body: ErrorBody = {
      error: {
        code: e.code,
        message: scrubSecrets(e.message),
        details: e.details.map((d) => ({ ...d, message: scrubSecrets(d.message) })),
        requestId: String(req.id),
      },
    };
    if (e.closeConnection) reply.header('connection', 'close');
    reply.code(e.status).headers(e.headers).send(body);
  });
  app.setNotFoundHandler((req, reply) => {
    const body: ErrorBody = {
      error: {
        code: 'NOT_FOUND',
        message: `no route ${req.method} ${req.url.split('?')[0]}`,
        details: [],
        requestId: String(req.id),
      },
    };
    reply.code(404).send(body);
  });
}
