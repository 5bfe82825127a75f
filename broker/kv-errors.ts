import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';

/**
 * True when a key-value write lost a compare-and-set: someone else wrote the key since the revision it named
 * (or created it first). The caller reads again and retries; any other error is a real failure.
 */
export function isRevisionConflict(err: unknown): boolean {
  return (
    err instanceof JetStreamApiError &&
    (err.code === JetStreamApiCodes.StreamWrongLastSequence ||
      err.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)
  );
}
