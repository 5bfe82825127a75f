import { z } from 'zod';
import { OUTCOMES } from './records.js';

/** Workspace settings (CONTRACT §10). A PATCH replaces each field it names, whole. */

/** Limits on settings that depend on configuration (the number of indexed keys) are checked by the API. */

const dottedPath = z
  .string()
  .max(256)
  .regex(
    /^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*$/,
    'expected a dotted path such as customer.id',
  );

const statusCodes = z
  .string()
  .regex(/^[1-5]\d\d(-[1-5]\d\d)?$/, 'expected a status code ("404") or a range ("400-499")')
  .refine((s) => {
    const [a, b] = s.split('-').map(Number);
    return b === undefined || a! <= b;
  }, 'the range must go from low to high');

export const outcomeRuleSchema = z.object({
  match: z
    .object({
      service: z.string().min(1).max(128).optional(),
      /** A glob: `*` matches any run of characters. */
      endpoint: z.string().min(1).max(512).optional(),
      // Upper-cased in place, so the schema stays one type (an answer describes it as the request does).
      method: z.string().min(1).max(32).toUpperCase().optional(),
      statusCodes: statusCodes.optional(),
      exceptionType: z.string().min(1).max(256).optional(),
      field: z
        .object({ path: dottedPath, equals: z.union([z.string(), z.number(), z.boolean(), z.null()]) })
        .optional(),
    })
    .refine(
      (m) => Object.values(m).some((v) => v !== undefined),
      'a rule must match on at least one condition',
    ),
  outcome: z.enum(OUTCOMES),
});
export type OutcomeRule = z.infer<typeof outcomeRuleSchema>;

const threshold = z.object({ failureRate: z.number().min(0).max(1), p95Ms: z.number().min(0) });

export const healthThresholdsSchema = z
  .object({ degraded: threshold, critical: threshold })
  .refine(
    (t) => t.critical.failureRate >= t.degraded.failureRate && t.critical.p95Ms >= t.degraded.p95Ms,
    'critical thresholds must be at or above degraded ones',
  );

export type HealthThresholds = z.infer<typeof healthThresholdsSchema>;

export const DEFAULT_HEALTH_THRESHOLDS = {
  degraded: { failureRate: 0.05, p95Ms: 1000 },
  critical: { failureRate: 0.2, p95Ms: 5000 },
};

export const settingsSchema = z.object({
  indexedContextKeys: z
    .array(dottedPath)
    .refine((keys) => new Set(keys).size === keys.length, 'keys must be unique'),
  outcomeRules: z.array(outcomeRuleSchema).max(100),
  retentionDays: z.number().int().min(1).max(400),
  healthThresholds: healthThresholdsSchema,
});
export type Settings = z.infer<typeof settingsSchema>;

/** Fields it does not know are ignored, as in every request body (CONTRACT §1). */
export const settingsPatchSchema = settingsSchema.partial();

export const defaultSettings = (retentionDays: number): Settings => ({
  indexedContextKeys: [],
  outcomeRules: [],
  retentionDays,
  healthThresholds: DEFAULT_HEALTH_THRESHOLDS,
});
