import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import {
  ClosedConnectionError,
  ConnectionError,
  DrainingConnectionError,
  InvalidArgumentError,
  NoRespondersError,
  RequestError,
  TimeoutError,
} from '@nats-io/transport-node';
import { type ServiceError, unavailable } from '../schemas/errors.js';

/**
 * NATS errors, told apart once, here: what a caller may handle (a lost compare-and-set, a missing stream) and
 * what is an outage (the broker unreachable, a request timed out), which the API answers 503 with retry-after on
 * every route (api/error-handler.ts). Nothing outside broker/ looks at NATS error codes or messages.
 */

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

/** True when a stream or consumer asked for does not exist. */
export function isNotFound(err: unknown): boolean {
  return (
    err instanceof JetStreamApiError &&
    (err.code === JetStreamApiCodes.StreamNotFound || err.code === JetStreamApiCodes.ConsumerNotFound)
  );
}

/** True when the broker could not be reached or did not answer in time: nothing was done, try again later. */
export function isBrokerOutage(err: unknown): boolean {
  return (
    err instanceof TimeoutError ||
    err instanceof ClosedConnectionError ||
    err instanceof DrainingConnectionError ||
    err instanceof ConnectionError ||
    err instanceof NoRespondersError ||
    err instanceof RequestError ||
    (err instanceof Error && err.cause !== undefined && isBrokerOutage(err.cause))
  );
}

/** True when a message was refused for being over the server's max_payload (the client checks before sending). */
export function isPayloadTooLarge(err: unknown): boolean {
  return err instanceof InvalidArgumentError && /max_payload/.test(err.message);
}

/** The answer to an outage: 503 with retry-after. */
export const brokerUnavailable = (): ServiceError =>
  unavailable('the broker is unavailable; nothing was changed, try again', 2);
