import { validationError } from '../schemas/errors.js';
import { DAY_MS } from '../schemas/time.js';

/** Resolves `from`/`to` (CONTRACT §1: from inclusive, to exclusive, default the last `defaultDays`). */
export function timeWindow(
  from: number | undefined,
  to: number | undefined,
  defaultDays: number,
  now = Date.now(),
) {
  const end = to ?? (from !== undefined ? Math.max(now, from + 1) : now);
  const start = from ?? end - defaultDays * DAY_MS;
  if (start >= end) {
    throw validationError('from must be before to', [{ path: 'from', message: 'must be before to' }]);
  }
  return { from: start, to: end };
}
