import { nameThread } from '../../storage/worker-file.js';
import { checkOtlp, OtlpDecodeError, type OtlpEncoding } from './decode.js';
import type { Signal } from './proto.js';

nameThread('svc-otlp-check');

/**
 * Piscina worker for the API (CONTRACT §12): an OTLP body decoded and checked before the answer, off the event
 * loop. Answers the counts, or `{ error }` for a body that cannot be read (a 400: nothing is kept).
 */

export interface CheckTask {
  signal: Signal;
  encoding: OtlpEncoding;
  /** The body decompressed. */
  body: Uint8Array;
}

export type CheckResult = { items: number; rejected: number; message: string | null } | { error: string };

export default function check(task: CheckTask): CheckResult {
  try {
    return checkOtlp(task.signal, task.encoding, task.body);
  } catch (err) {
    if (err instanceof OtlpDecodeError) return { error: err.message };
    throw err;
  }
}
