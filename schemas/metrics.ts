import { z } from 'zod';
import { timeParam } from './api.js';
import { MODES } from './records.js';

/** Parameters of `/api/metrics/*` (CONTRACT §8). */

const INTERVAL = z.enum(['1m', '5m', '15m', '1h', '1d']);

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
  metric: z.enum([
    'requests',
    'failures',
    'failure_rate',
    'throughput',
    'latency_avg',
    'latency_p50',
    'latency_p95',
    'latency_p99',
  ]),
  interval: INTERVAL.optional(),
  groupBy: z.enum(['service', 'endpoint', 'method', 'environment', 'outcome']).optional(),
  compare: z.literal('previous_period').optional(),
  issueId: z.string().min(1).max(64).optional(),
});

export const endpointsQuerySchema = z.strictObject({
  ...filters,
  sort: z.enum(['requests', 'failure_rate', 'p95', 'p99']).default('requests'),
  limit: z.coerce.number().int().min(1).max(100).default(20),
});

/** `tags.<key>` filters are taken apart from these (their keys are the client's). */
export const seriesQuerySchema = z.strictObject({
  mode: z.enum(MODES).optional(),
  from: timeParam.optional(),
  to: timeParam.optional(),
  serviceName: z.string().min(1).max(128).optional(),
  environment: z.string().min(1).max(64).optional(),
  name: z.string().min(1).max(200),
  agg: z.enum(['sum', 'avg', 'min', 'max', 'count', 'p95', 'rate']).optional(),
  interval: INTERVAL.optional(),
  groupBy: z
    .string()
    .regex(/^tag:[A-Za-z0-9_.:/-]{1,128}$/, 'expected tag:<key>')
    .optional(),
});

export const namesQuerySchema = z.strictObject({
  mode: z.enum(MODES).optional(),
  from: timeParam.optional(),
  to: timeParam.optional(),
});
