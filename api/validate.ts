import type { z } from 'zod';
import { validationError } from '../schemas/errors.js';
import type { ErrorDetail } from '../schemas/records.js';

export function zodDetails(error: z.ZodError, prefix = ''): ErrorDetail[] {
  return error.issues.map((i) => {
    const path = [prefix, ...i.path.map(String)].filter((p) => p !== '').join('.');
    if (i.code === 'unrecognized_keys') {
      return {
        path: i.keys.map((k) => [path, k].filter(Boolean).join('.')).join(', '),
        message: `unknown parameter`,
      };
    }
    return { path, message: i.message };
  });
}

/** Parses request input with a schema; failure is a VALIDATION_ERROR with a detail per bad field. */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown, what: string): z.output<S> {
  const r = schema.safeParse(input);
  if (r.success) return r.data;
  const details = zodDetails(r.error);
  const first = details[0];
  throw validationError(
    first ? `${what}: ${first.path || 'body'}: ${first.message}` : `invalid ${what}`,
    details,
  );
}
