import { z } from 'zod';
import { MODES, OUTCOMES } from './records.js';

/** Parameters and answers of the HTTP API (CONTRACT §1, §5, §6). */

const MAX_TIME_MS = 8_640_000_000_000_000;

/** RFC 3339 with a zone, or epoch milliseconds. */
export const timeParam = z.union([z.string(), z.number()]).transform((v, ctx) => {
  const ms =
    typeof v === 'number' || /^-?\d+(\.\d+)?$/.test(v)
      ? Number(v)
      : /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/i.test(v)
        ? Date.parse(v)
        : Number.NaN;
  if (!Number.isFinite(ms) || Math.abs(ms) > MAX_TIME_MS) {
    ctx.addIssue({
      code: 'custom',
      message: 'expected an RFC 3339 timestamp with a zone, or epoch milliseconds',
    });
    return z.NEVER;
  }
  return Math.trunc(ms);
});

const idShape = z.string().regex(/^[A-Za-z0-9._:-]{1,128}$/, 'expected 1–128 of A-Z a-z 0-9 . _ : -');
const nonNegNumber = z.coerce.number().finite().min(0);

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Query parameters that are strict (an unknown one is a VALIDATION_ERROR, CONTRACT §1) but also take any number
 * named `<prefix><key>` (`context.customer.id`, `tags.region`): those keys are the client's, so they pass through
 * to the route, which reads and checks them. Any other unknown key is reported as z.strictObject reports it (one
 * `unrecognized_keys` issue after the fields' own), and also when a field is invalid, so one answer names both.
 */
export function strictWithPrefixed<S extends z.ZodRawShape>(shape: S, prefix: string) {
  return z
    .object(shape)
    .catchall(z.unknown())
    .check(
      z.superRefine(
        (value, ctx) => {
          const unknown = Object.keys(value).filter((k) => !Object.hasOwn(shape, k) && !k.startsWith(prefix));
          if (unknown.length > 0) ctx.addIssue({ code: 'unrecognized_keys', keys: unknown, input: value });
        },
        { when: (payload) => isRecord(payload.value) },
      ),
    );
}

/** The `context.<dotted.path>` parameters (CONTRACT §6.3) pass through: the route reads them. */
export const executionListQuerySchema = strictWithPrefixed(
  {
    mode: z.enum(MODES).optional(),
    serviceName: z.string().min(1).max(128).optional(),
    environment: z.string().min(1).max(64).optional(),
    status: z
      .string()
      .describe('a comma list of success, failed, unknown')
      .transform((s) => s.split(',').map((p) => p.trim()))
      .pipe(z.array(z.enum(OUTCOMES)).min(1))
      .optional(),
    method: z.string().min(1).max(16).optional(),
    endpoint: z.string().min(1).max(513).optional(),
    executionId: idShape.optional(),
    traceId: z.string().min(1).max(128).optional(),
    issueId: z.string().min(1).max(64).optional(),
    minDurationMs: nonNegNumber.optional(),
    maxDurationMs: nonNegNumber.optional(),
    from: timeParam.optional(),
    to: timeParam.optional(),
    sort: z.enum(['-startedAt', 'startedAt', '-durationMs', 'durationMs']).default('-startedAt'),
    page: z.coerce.number().int().min(1).default(1),
    pageSize: z.coerce.number().int().min(1).optional(),
    includeMatchedContext: z.enum(['true', 'false']).optional(),
    q: z.string().max(4096).optional(),
  },
  'context.',
);

export const executionIdParamsSchema = z.object({ executionId: idShape });

export const modeOnlyQuerySchema = z.strictObject({ mode: z.enum(MODES).optional() });

const email = z
  .string()
  .trim()
  .max(254)
  .regex(/^[^\s@]+@[^\s@]+\.[^\s@]+$/, 'expected an e-mail address');
const password = z.string().min(10, 'at least 10 characters').max(1024);

export const signupBodySchema = z.object({
  email,
  password,
  name: z.string().trim().min(1).max(128).optional(),
  workspaceName: z.string().trim().min(1).max(128).optional(),
});

export const loginBodySchema = z.object({ email, password: z.string().min(1).max(1024) });

export const memberBodySchema = z.object({
  email,
  password,
  role: z.enum(['admin', 'member']),
  name: z.string().trim().min(1).max(128).optional(),
});

export const keyBodySchema = z.object({
  name: z.string().trim().min(1).max(128),
  mode: z.enum(MODES),
  permissions: z
    .array(z.enum(['ingest', 'read']))
    .min(1)
    .refine((p) => new Set(p).size === p.length, 'permissions must be unique')
    .default(['ingest']),
});

export const idParamsSchema = z.object({ id: z.string().min(1).max(64) });
