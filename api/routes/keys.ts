import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { createdKeyAnswer, errorAnswers, keyListAnswer, noContent } from '../../schemas/answers.js';
import { idParamsSchema, keyBodySchema } from '../../schemas/api.js';
import { principalOf } from '../auth.js';
import type { ApiContext } from '../context.js';

const tags = ['keys'];

/** API keys (CONTRACT §10): listed by any member, created and revoked by admins; keys cannot manage keys. */
export const keyRoutes =
  (ctx: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    app.get(
      '/api/keys',
      {
        config: { need: 'member' },
        schema: {
          summary: "The workspace's API keys",
          tags,
          response: { 200: keyListAnswer, ...errorAnswers },
        },
      },
      async (req, _reply) => {
        const p = principalOf(req);
        return { data: await ctx.control.listKeys(p.workspaceId) };
      },
    );

    app.post(
      '/api/keys',
      {
        config: { need: 'admin' },
        schema: {
          summary: 'Create an API key: the answer holds the key, shown this once',
          tags,
          body: keyBodySchema,
          response: { 201: createdKeyAnswer, ...errorAnswers },
        },
      },
      async (req, reply) => {
        const p = principalOf(req);
        const { record, key } = await ctx.control.createKey(p.workspaceId, req.body);
        const { workspaceId: _ws, ...view } = record;
        reply.code(201);
        return { ...view, lastUsedAt: null, key };
      },
    );

    app.delete(
      '/api/keys/:id',
      {
        config: { need: 'admin' },
        schema: {
          summary: 'Revoke an API key',
          tags,
          params: idParamsSchema,
          response: { 204: noContent, ...errorAnswers },
        },
      },
      async (req, reply) => {
        const p = principalOf(req);
        await ctx.control.revokeKey(p.workspaceId, req.params.id);
        reply.code(204).send();
      },
    );
  };
