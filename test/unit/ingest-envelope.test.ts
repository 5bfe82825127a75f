import { describe, expect, it } from 'vitest';
import { checkEnvelope } from '../../api/ingest-envelope.js';
import { ServiceError } from '../../schemas/errors.js';

const limits = { executions: 3, logs: 4, metrics: 2 };

function refusal(body: unknown, mode: 'test' | 'live' = 'test'): ServiceError {
  try {
    checkEnvelope(body, mode, limits);
  } catch (err) {
    expect(err).toBeInstanceOf(ServiceError);
    return err as ServiceError;
  }
  throw new Error('expected a refusal');
}

describe('checkEnvelope', () => {
  it('counts items, inline logs included', () => {
    expect(checkEnvelope({}, 'test', limits)).toEqual({ executions: 0, logs: 0, metrics: 0 });
    expect(
      checkEnvelope({ executions: [{ logs: [{}, {}] }, {}], logs: [{}], metrics: [{}] }, 'test', limits),
    ).toEqual({ executions: 2, logs: 3, metrics: 1 });
  });

  it('refuses what is not an object, or arrays that are not arrays', () => {
    expect(refusal([]).code).toBe('VALIDATION_ERROR');
    expect(refusal('x').details).toEqual([{ path: '', message: 'expected an object' }]);
    const e = refusal({ executions: {}, metrics: 1 });
    expect(e.code).toBe('VALIDATION_ERROR');
    expect(e.details.map((d) => d.path)).toEqual(['executions', 'metrics']);
    expect(refusal({ resource: 'checkout' }).details[0]!.path).toBe('resource');
  });

  it('binds resource.mode to the key mode', () => {
    expect(refusal({ resource: { mode: 'live' } }, 'test').code).toBe('FORBIDDEN');
    expect(refusal({ resource: { mode: 'test' } }, 'live').code).toBe('FORBIDDEN');
    expect(refusal({ resource: { mode: 'prod' } }).code).toBe('VALIDATION_ERROR');
    expect(checkEnvelope({ resource: { mode: 'live' } }, 'live', limits).executions).toBe(0);
  });

  it('413 over the item limits', () => {
    const e = refusal({ executions: [{}, {}, {}, {}] });
    expect(e.code).toBe('PAYLOAD_TOO_LARGE');
    expect(e.status).toBe(413);
    expect(refusal({ executions: [{ logs: [1, 2, 3] }], logs: [1, 2] }).details[0]!.path).toBe('logs');
    expect(refusal({ metrics: [1, 2, 3] }).details[0]!.path).toBe('metrics');
  });
});
