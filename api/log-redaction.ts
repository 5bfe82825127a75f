/** Paths pino censors in every log line: credentials must never reach the log (CONTRACT §2). */
export const LOG_REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'req.headers.cookie',
  'res.headers["set-cookie"]',
  'headers.authorization',
  'headers["x-api-key"]',
  'headers.cookie',
  'key',
  'password',
  'token',
];

/** The shapes of API keys and session tokens (control/api-keys.ts, control/secrets.ts). */
const SECRET_SHAPE = /svc_(test|live|sess)_[A-Za-z0-9]{32}/g;

/**
 * A text with every key- or token-shaped part replaced: for log lines (a key sent where none belongs, in a path or a
 * query string, is logged with the URL) and error messages (which may echo an id the caller sent).
 */
export const scrubSecrets = (text: string): string => text.replace(SECRET_SHAPE, 'svc_$1_[redacted]');
