import { z } from 'zod';
import { executionIdParamsSchema, timeParam } from './api.js';
import { LOG_LEVELS, MODES } from './records.js';

/** Query parameters of the log and rejection read endpoints (CONTRACT §5, §6.4, §7). */

// Same paging parameters as the executions list; the upper bounds come from configuration, so the route
// checks them.
const page = z.coerce.number().int().min(1).default(1);
const pageSize = z.coerce.number().int().min(1).optional();

export const LOG_SORTS = ['-timestamp', 'timestamp'] as const;
export type LogSort = (typeof LOG_SORTS)[number];

export const logListQuerySchema = z.strictObject({
  mode: z.enum(MODES).optional(),
  serviceName: z.string().min(1).max(128).optional(),
  environment: z.string().min(1).max(64).optional(),
  /** The minimum level: `warn` answers warn, error and fatal. */
  level: z.enum(LOG_LEVELS).optional(),
  executionId: executionIdParamsSchema.shape.executionId.optional(),
  traceId: z.string().min(1).max(128).optional(),
  // A needle longer than a stored message (8 KiB at most) can never match; 1,024 is plenty for a search box.
  search: z.string().min(1).max(1024).optional(),
  from: timeParam.optional(),
  to: timeParam.optional(),
  sort: z.enum(LOG_SORTS).default('-timestamp'),
  page,
  pageSize,
});

/** `GET /api/executions/{executionId}/logs`: always in time order, so no sort and no time window. */
export const executionLogsQuerySchema = z.strictObject({
  mode: z.enum(MODES).optional(),
  page,
  pageSize,
});

export const rejectionListQuerySchema = z.strictObject({
  mode: z.enum(MODES).optional(),
  from: timeParam.optional(),
  to: timeParam.optional(),
  page,
  pageSize,
});
