import type { Outcome } from '../schemas/records.js';
import type { SqlParam } from '../storage/duckdb.js';
import type { ParsedQuery } from './query-language.js';

/**
 * Execution filters as a list of constraints, all ANDed: the parameters and the query language both become
 * constraints of this one form, which is why `q` and the equivalent parameters give identical results.
 */

export type EqField =
  | 'service'
  | 'environment'
  | 'method'
  | 'endpoint'
  | 'executionId'
  | 'traceId'
  | 'issueId';

export type Constraint =
  | { kind: 'eq'; field: EqField; value: string }
  | { kind: 'prefix'; field: 'endpoint'; value: string }
  | { kind: 'status'; values: Outcome[] }
  | { kind: 'duration'; op: '>' | '>=' | '<' | '<='; ms: number };

/** Logical field → column: the only identifiers that reach the SQL text. */
const COLUMN: Record<EqField, string> = {
  service: 'service',
  environment: 'environment',
  method: 'method',
  endpoint: 'endpoint',
  executionId: 'execution_id',
  traceId: 'trace_id',
  issueId: 'issue_id',
};

/** `/orders/*` is a prefix; anything else is exact. */
export const endpointConstraint = (value: string): Constraint =>
  value.endsWith('*')
    ? { kind: 'prefix', field: 'endpoint', value: value.slice(0, -1) }
    : { kind: 'eq', field: 'endpoint', value };

export interface ConstraintParams {
  serviceName?: string;
  environment?: string;
  method?: string;
  endpoint?: string;
  executionId?: string;
  traceId?: string;
  issueId?: string;
  status?: Outcome[];
  minDurationMs?: number;
  maxDurationMs?: number;
}

export function constraintsFromParams(p: ConstraintParams): Constraint[] {
  const out: Constraint[] = [];
  const eq = (field: EqField, value: string | undefined) => {
    if (value !== undefined) out.push({ kind: 'eq', field, value });
  };
  eq('service', p.serviceName);
  eq('environment', p.environment);
  eq('method', p.method?.toUpperCase());
  if (p.endpoint !== undefined) out.push(endpointConstraint(p.endpoint));
  eq('executionId', p.executionId);
  eq('traceId', p.traceId);
  eq('issueId', p.issueId);
  if (p.status) out.push({ kind: 'status', values: p.status });
  if (p.minDurationMs !== undefined) out.push({ kind: 'duration', op: '>=', ms: p.minDurationMs });
  if (p.maxDurationMs !== undefined) out.push({ kind: 'duration', op: '<=', ms: p.maxDurationMs });
  return out;
}

export function constraintsFromQuery(q: ParsedQuery): Constraint[] {
  const out = constraintsFromParams({
    serviceName: q.service,
    environment: q.environment,
    method: q.method,
    endpoint: q.endpoint,
    traceId: q.traceId,
    issueId: q.issueId,
    status: q.status,
  });
  for (const d of q.duration) out.push({ kind: 'duration', op: d.op, ms: d.ms });
  return out;
}

export function constraintSql(constraints: Constraint[], params: Record<string, SqlParam>): string[] {
  return constraints.map((c, i) => {
    const name = `c${i}`;
    switch (c.kind) {
      case 'eq':
        params[name] = c.value;
        return `${COLUMN[c.field]} = $${name}`;
      case 'prefix':
        params[name] = c.value;
        return `starts_with(endpoint, $${name})`;
      case 'status':
        c.values.forEach((v, j) => {
          params[`${name}_${j}`] = v;
        });
        return `outcome IN (${c.values.map((_, j) => `$${name}_${j}`).join(', ')})`;
      default:
        // 'duration': the last kind.
        params[name] = c.ms;
        return `duration_ms ${c.op} $${name}`;
    }
  });
}
