import type { ErrorDetail } from './records.js';

/**
 * The contract's error codes (CONTRACT §3), each with its HTTP status. Every layer throws these; the API's one
 * error handler renders them. Library errors (NATS, DuckDB) are translated into these where that client lives.
 */
export const ERROR_STATUS = {
  VALIDATION_ERROR: 400,
  CONTEXT_KEY_NOT_ALLOWED: 400,
  CONTEXT_QUERY_TOO_BROAD: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  CONFLICT: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RATE_LIMITED: 429,
  INTERNAL_ERROR: 500,
  UNAVAILABLE: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export class ServiceError extends Error {
  readonly code: ErrorCode;
  readonly details: ErrorDetail[];
  /** Extra response headers (retry-after, www-authenticate…). */
  readonly headers: Record<string, string>;
  /** The connection is closed after the answer (a body too large to read on). */
  closeConnection = false;

  constructor(
    code: ErrorCode,
    message: string,
    details: ErrorDetail[] = [],
    headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ServiceError';
    this.code = code;
    this.details = details;
    this.headers = headers;
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }
}

export const validationError = (message: string, details: ErrorDetail[] = []) =>
  new ServiceError('VALIDATION_ERROR', message, details);
export const unauthorized = (message = 'missing or invalid credentials') =>
  new ServiceError('UNAUTHORIZED', message, [], { 'www-authenticate': 'Bearer' });
export const forbidden = (message: string) => new ServiceError('FORBIDDEN', message);
export const notFound = (message: string) => new ServiceError('NOT_FOUND', message);
export const unavailable = (message: string, retryAfterSeconds = 1) =>
  new ServiceError('UNAVAILABLE', message, [], { 'retry-after': String(retryAfterSeconds) });

export interface ErrorBody {
  error: { code: ErrorCode; message: string; details: ErrorDetail[]; requestId: string };
}
