import type { FastifyRequest, FastifySchemaCompiler } from 'fastify';
import { hasZodFastifySchemaValidationErrors, validatorCompiler } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { type ServiceError, validationError } from '../schemas/errors.js';
import type { ErrorDetail } from '../schemas/records.js';

/**
 * Request validation: each route declares its zod schemas (params, querystring, body), Fastify validates the
 * request with them before the handler runs, and a failure becomes the contract's VALIDATION_ERROR here.
 */

/** What zodDetails needs of an issue: a zod issue, or one rebuilt from Fastify's validation error. */
interface Issue {
  code: string;
  path: readonly PropertyKey[];
  message: string;
  keys?: readonly string[];
}

export function zodDetails(issues: readonly Issue[]): ErrorDetail[] {
  return issues.map((i) => {
    const path = i.path
      .map(String)
      .filter((p) => p !== '')
      .join('.');
    if (i.code === 'unrecognized_keys' && i.keys) {
      return {
        path: i.keys.map((k) => [path, k].filter(Boolean).join('.')).join(', '),
        message: `unknown parameter`,
      };
    }
    return { path, message: i.message };
  });
}

/** Schemas for the document only: their routes check that part of the request themselves. */
const DOCUMENTED_ONLY = new WeakSet<object>();

/**
 * A schema that describes a part of the request but is not validated by Fastify: for the ingest routes, which
 * take the body as bytes (api/body-parser.ts `rawJsonBody`) and check them in one scan, the pipeline validating
 * each item after the answer, and check their headers with messages of their own. The handler gets the part
 * as it came.
 */
export function documentedOnly(schema: z.ZodType): z.ZodType<unknown> {
  DOCUMENTED_ONLY.add(schema);
  return schema;
}

/**
 * The library's validator, but for a documented-only part (passed as it is), and for an absent body, which is
 * validated as `{}`: a request without one is told each required field, as with an empty object.
 */
export const requestValidator: FastifySchemaCompiler<z.ZodType> = (route) => {
  if (DOCUMENTED_ONLY.has(route.schema)) return () => true;
  if (route.httpPart !== 'body') return validatorCompiler(route);
  const validate = validatorCompiler(route);
  // Fastify hands an absent body over as null; a JSON `null` body is validated as `{}` too, as it always was.
  return (data) => validate(data ?? {});
};

/** The request part a failure is in, as messages name it. */
const PART: Record<string, string> = {
  querystring: 'query',
  params: 'path',
  body: 'body',
  headers: 'headers',
};

/** `<part>: <path>: <message>` for the first problem, and a detail for each (CONTRACT §3). */
function invalid(part: string, issues: readonly Issue[]): ServiceError {
  const details = zodDetails(issues);
  const first = details[0];
  return validationError(
    first ? `${part}: ${first.path || 'body'}: ${first.message}` : `invalid ${part}`,
    details,
  );
}

/** A validation failure of a request part as a VALIDATION_ERROR; null for any other error. */
export function fromValidation(err: unknown, req: FastifyRequest): ServiceError | null {
  if (!hasZodFastifySchemaValidationErrors(err)) return null;
  const context = (err as { validationContext?: string }).validationContext ?? '';
  // A bad query is the one reported when another part is bad too (the order the routes have always
  // answered in): Fastify validates the path and the body first and stops at the first bad part, so the
  // query, still as sent, is checked here.
  const query = req.routeOptions.schema?.querystring;
  if (context !== 'querystring' && query instanceof z.ZodType) {
    const r = query.safeParse(req.query);
    if (!r.success) return invalid('query', r.error.issues);
  }
  // The library keeps a zod issue's path as a JSON pointer and the rest of it in params. Paths are the
  // schemas' own keys and array indexes (a client's keys are reported in `keys`), so `/` never occurs in one.
  return invalid(
    PART[context] ?? 'request',
    err.validation.map((v) => ({
      code: v.keyword,
      path: v.instancePath.split('/').slice(1),
      message: v.message ?? 'invalid',
      keys: v.params.keys as string[] | undefined,
    })),
  );
}
