import { describe, expect, it } from 'vitest';
import { buildListQuery } from '../../query/executions.js';

describe('executions list SQL', () => {
  it('binds every request value as a parameter', () => {
    const q = buildListQuery(
      {
        workspaceId: 'ws_1',
        mode: 'test',
        from: 1000,
        to: 2000,
        serviceName: "checkout'; DROP TABLE x; --",
        status: ['failed', 'unknown'],
        method: 'post',
        endpoint: '/orders/*',
        minDurationMs: 5,
      },
      { page: 3, pageSize: 20, sort: '-durationMs' },
    );
    expect(q.list.sql).toMatchInlineSnapshot(`
      "SELECT execution_id, trace_id, service, environment, source, endpoint, method, status_code,
        duration_ms, outcome, epoch_ms(started_at)::DOUBLE AS started_at_ms, issue_id, exception_type
      FROM read_parquet($files, union_by_name = true)
      WHERE started_at >= epoch_ms($from::BIGINT)
        AND started_at < epoch_ms($to::BIGINT)
        AND service = $service
        AND method = $method
        AND starts_with(endpoint, $endpointPrefix)
        AND outcome IN ($status0, $status1)
        AND duration_ms >= $minDurationMs
      ORDER BY duration_ms DESC, execution_id DESC
      LIMIT $limit OFFSET $offset"
    `);
    expect(q.list.params).toEqual({
      from: 1000,
      to: 2000,
      service: "checkout'; DROP TABLE x; --",
      method: 'POST',
      endpointPrefix: '/orders/',
      status0: 'failed',
      status1: 'unknown',
      minDurationMs: 5,
      limit: 20,
      offset: 40,
    });
    expect(q.count.sql).toMatchInlineSnapshot(`
      "SELECT count(*)::DOUBLE AS total
      FROM read_parquet($files, union_by_name = true)
      WHERE started_at >= epoch_ms($from::BIGINT)
        AND started_at < epoch_ms($to::BIGINT)
        AND service = $service
        AND method = $method
        AND starts_with(endpoint, $endpointPrefix)
        AND outcome IN ($status0, $status1)
        AND duration_ms >= $minDurationMs"
    `);
    expect(q.list.sql).not.toContain('checkout');
  });

  it('an exact endpoint and the ascending sort', () => {
    const q = buildListQuery(
      { workspaceId: 'ws_1', mode: 'live', from: 0, to: 1, endpoint: '/health', traceId: 't1' },
      { page: 1, pageSize: 50, sort: 'startedAt' },
    );
    expect(q.list.sql).toContain('endpoint = $endpoint');
    expect(q.list.sql).toContain('trace_id = $traceId');
    expect(q.list.sql).toContain('ORDER BY started_at ASC, execution_id ASC');
    expect(q.list.params).toMatchObject({ endpoint: '/health', traceId: 't1', offset: 0 });
  });
});
