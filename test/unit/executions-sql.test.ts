import { describe, expect, it } from 'vitest';
import { constraintsFromParams, constraintsFromQuery } from '../../query/constraints.js';
import { buildListQuery } from '../../query/executions.js';
import { parseQuery } from '../../query/query-language.js';

describe('executions list SQL', () => {
  it('binds every request value as a parameter', () => {
    const q = buildListQuery(
      {
        workspaceId: 'ws_1',
        mode: 'test',
        from: 1000,
        to: 2000,
        constraints: constraintsFromParams({
          serviceName: "checkout'; DROP TABLE x; --",
          status: ['failed', 'unknown'],
          method: 'post',
          endpoint: '/orders/*',
          minDurationMs: 5,
        }),
        context: [{ path: 'customer.tier', values: ['gold', 3, true] }],
      },
      { page: 3, pageSize: 20, sort: '-durationMs' },
    );
    expect(q.page.sql).toMatchInlineSnapshot(`
      "SELECT execution_id, trace_id, service, environment, source, endpoint, method, status_code,
        duration_ms, outcome, epoch_ms(started_at)::DOUBLE AS started_at_ms, issue_id, exception_type
      FROM read_parquet($files, union_by_name = true, hive_partitioning = false)
      WHERE started_at >= epoch_ms($from::BIGINT)
        AND started_at < epoch_ms($to::BIGINT)
        AND service = $c0
        AND method = $c1
        AND starts_with(endpoint, $c2)
        AND outcome IN ($c3_0, $c3_1)
        AND duration_ms >= $c4
        AND ("ctx_s:customer.tier" = $ctx0v0 OR "ctx_n:customer.tier" = $ctx0v1 OR "ctx_b:customer.tier" = $ctx0v2)
        AND duration_ms >= $bound
      ORDER BY duration_ms DESC, execution_id DESC
      LIMIT $limit OFFSET $offset"
    `);
    expect(q.page.params).toEqual({
      from: 1000,
      to: 2000,
      c0: "checkout'; DROP TABLE x; --",
      c1: 'POST',
      c2: '/orders/',
      c3_0: 'failed',
      c3_1: 'unknown',
      c4: 5,
      ctx0v0: 'gold',
      ctx0v1: 3,
      ctx0v2: true,
      limit: 20,
      offset: 40,
    });
    expect(q.head.params).toMatchObject({ c0: "checkout'; DROP TABLE x; --", k: 60 });
    expect(q.head.sql).toMatchInlineSnapshot(`
      "SELECT count(*)::DOUBLE AS total, max(duration_ms, $k)[-1]::DOUBLE AS bound
      FROM read_parquet($files, union_by_name = true, hive_partitioning = false)
      WHERE started_at >= epoch_ms($from::BIGINT)
        AND started_at < epoch_ms($to::BIGINT)
        AND service = $c0
        AND method = $c1
        AND starts_with(endpoint, $c2)
        AND outcome IN ($c3_0, $c3_1)
        AND duration_ms >= $c4
        AND ("ctx_s:customer.tier" = $ctx0v0 OR "ctx_n:customer.tier" = $ctx0v1 OR "ctx_b:customer.tier" = $ctx0v2)"
    `);
    expect(q.page.sql + q.head.sql).not.toContain('checkout');
    // The indexed path becomes a column name (validated, from the settings); the values stay parameters.
    expect(q.page.sql + q.head.sql).not.toContain('gold');
  });

  it('the query language and the parameters become the same constraints', () => {
    const fromQ = constraintsFromQuery(
      parseQuery(
        'service:checkout method:post endpoint:/orders/* status:failed,unknown trace:t1 issue:iss_1',
      ),
    );
    const fromParams = constraintsFromParams({
      serviceName: 'checkout',
      method: 'POST',
      endpoint: '/orders/*',
      status: ['failed', 'unknown'],
      traceId: 't1',
      issueId: 'iss_1',
    });
    expect(fromQ).toEqual(fromParams);
  });
});
