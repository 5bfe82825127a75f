import { forbidden, ServiceError, validationError } from '../schemas/errors.js';
import type { Mode } from '../schemas/records.js';

export interface ItemCounts {
  executions: number;
  logs: number;
  metrics: number;
}

export interface ItemLimits {
  executions: number;
  logs: number;
  metrics: number;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The checks made before a payload is accepted (CONTRACT §5 "What is checked when"): an object, item arrays
 * within their limits, `resource.mode` matching the key. Items themselves are validated by the pipeline.
 * Logs count those sent inline in executions too.
 */
export function checkEnvelope(body: unknown, keyMode: Mode, limits: ItemLimits): ItemCounts {
  if (!isObject(body)) {
    throw validationError('the body must be a JSON object', [{ path: '', message: 'expected an object' }]);
  }
  const resource = body.resource;
  if (resource !== undefined && !isObject(resource)) {
    throw validationError('resource must be an object', [
      { path: 'resource', message: 'expected an object' },
    ]);
  }
  const mode = resource?.mode;
  if (mode !== undefined) {
    if (mode !== 'test' && mode !== 'live') {
      throw validationError('resource.mode must be test or live', [
        { path: 'resource.mode', message: 'expected test or live' },
      ]);
    }
    if (mode !== keyMode) throw forbidden(`a ${keyMode} key cannot send ${mode} data`);
  }
  const details = [];
  for (const kind of ['executions', 'logs', 'metrics'] as const) {
    const v = body[kind];
    if (v !== undefined && !Array.isArray(v)) details.push({ path: kind, message: 'expected an array' });
  }
  if (details.length > 0) throw validationError(`${details[0]!.path} must be an array`, details);
  const executions = (body.executions as unknown[] | undefined) ?? [];
  let logs = ((body.logs as unknown[] | undefined) ?? []).length;
  for (const e of executions) if (isObject(e) && Array.isArray(e.logs)) logs += e.logs.length;
  const counts = {
    executions: executions.length,
    logs,
    metrics: ((body.metrics as unknown[] | undefined) ?? []).length,
  };
  for (const kind of ['executions', 'logs', 'metrics'] as const) {
    if (counts[kind] > limits[kind]) {
      throw new ServiceError(
        'PAYLOAD_TOO_LARGE',
        `${counts[kind]} ${kind} in one request; at most ${limits[kind]}`,
        [{ path: kind, message: `at most ${limits[kind]} items per request` }],
      );
    }
  }
  return counts;
}
