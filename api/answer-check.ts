import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ServiceError } from '../schemas/errors.js';

/**
 * Answers are serialized with plain JSON.stringify: a zod pass over a page of executions (or an execution with
 * its 1,000 logs) would cost more CPU than many of the queries behind them, for nothing the handlers' types do not
 * already say. What keeps the declared answer schemas (and so the OpenAPI document) honest is this check, on
 * with VALIDATE_ANSWERS (the test suite sets it): every answer under 400 must match the schema its route declares
 * for its status, as the client receives it (after JSON.stringify), or the request fails with a 500 that names
 * each mismatch. Error answers come from the one error handler, whose body has a type of its own.
 */

/** What a route's `schema.response` holds for a status: a schema, or one per media type. */
type Declared = z.ZodType | { content: Record<string, { schema: z.ZodType }> };

/** The schema for `status` as Fastify picks it: the exact code, else `2xx`-style, else `default`. */
function declaredFor(response: Record<string, Declared>, status: number): z.ZodType | null {
  const d = response[String(status)] ?? response[`${String(status)[0]}xx`] ?? response.default;
  if (!d) return null;
  if (d instanceof z.ZodType) return d;
  return d.content['application/json']?.schema ?? null;
}

const mismatch = (what: string, details: { path: string; message: string }[] = []) =>
  new ServiceError('INTERNAL_ERROR', `the answer of ${what} does not match its declared schema`, details);

export function installAnswerCheck(app: FastifyInstance): void {
  // preSerialization sees objects only: the one text answer (GET /metrics) is not JSON.
  app.addHook('preSerialization', async (req, reply, payload) => {
    const response = req.routeOptions.schema?.response as Record<string, Declared> | undefined;
    if (!response || reply.statusCode >= 400) return payload;
    const what = `${req.method} ${req.routeOptions.url} (${reply.statusCode})`;
    const schema = declaredFor(response, reply.statusCode);
    if (!schema) throw mismatch(what, [{ path: '', message: `status ${reply.statusCode} is not declared` }]);
    const sent = JSON.parse(JSON.stringify(payload) ?? 'null') as unknown;
    const r = schema.safeParse(sent);
    if (!r.success) {
      const details = r.error.issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message }));
      req.log.error({ route: what, issues: r.error.issues }, 'answer does not match its declared schema');
      throw mismatch(what, details);
    }
    return payload;
  });
}
