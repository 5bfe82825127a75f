import { z } from 'zod';
import { strictWithPrefixed, timeParam } from './api.js';
import { MODES } from './records.js';

/** Parameters of `/api/metrics/*` (CONTRACT §8). */

export const INTERVAL_NAMES = ['1m', '5m', '15m', '1h', '1d'] as const;
export const TIMESERIES_METRICS = [
  'requests',
  'failures',
  'failure_rate',
  'throughput',
  'latency_avg',
  'latency_p50',
  'latency_p95',
  'latency_p99',
] as const;
export const GROUP_FIELDS = ['service', 'endpoint', 'method', 'environment', 'outcome'] as const;
export const ENDPOINT_SORTS = ['requests', 'failure_rate', 'p95', 'p99'] as const;
export const SERIES_AGGS = ['sum', 'avg', 'min', 'max', 'count', 'p95', 'rate'] as const;

const INTERVAL = z.enum(INTERVAL_NAMES);

/** The filters every metrics endpoint takes; they mean what they mean for executions (CONTRACT §6). */
const filters = {
  mode: z.enum(MODES).optional(),
  from: timeParam.optional(),
  to: timeParam.optional(),
  serviceName: z.string().min(1).max(128).optional(),
  environment: z.string().min(1).max(64).optional(),
  endpoint: z.string().min(1).max(513).optional(),
  method: z.string().min(1).max(16).optional(),
};

export const overviewQuerySchema = z.strictObject(filters);

export const timeseriesQuerySchema = z.strictObject({
  ...filters,
  metric: z.enum(TIMESERIES_METRICS),
  interval: INTERVAL.optional(),
  groupBy: z.enum(GROUP_FIELDS).optional(),
  compare: z.literal('previous_period').optional(),
  issueId: z.string().min(1).max(64).optional(),
});

export const endpointsQuerySchema = z.strictObject({
  ...filters,
  sort: z.enum(ENDPOINT_SORTS).default('requests'),
  limit: z.coerce.number().int().min(1).max(100).default(20),
});

/** `tags.<key>` filters pass through: their keys are the client's, and the route reads them. */
export const seriesQuerySchema = strictWithPrefixed(
  {
    mode: z.enum(MODES).optional(),
    from: timeParam.optional(),
    to: timeParam.optional(),
    serviceName: z.string().min(1).max(128).optional(),
    environment: z.string().min(1).max(64).optional(),
    name: z.string().min(1).max(200),
    agg: z.enum(SERIES_AGGS).optional(),
    interval: INTERVAL.optional(),
    groupBy: z
      .string()
      .regex(/^tag:[A-Za-z0-9_.:/-]{1,128}$/, 'expected tag:<key>')
      .optional(),
  },
  'tags.',
);

export const namesQuerySchema = z.strictObject({
  mode: z.enum(MODES).optional(),
  from: timeParam.optional(),
  to: timeParam.optional(),
});
