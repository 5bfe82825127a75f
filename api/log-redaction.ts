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
