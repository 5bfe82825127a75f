import type { FastifyPluginAsync } from 'fastify';
import { idParamsSchema, keyBodySchema } from '../../schemas/api.js';
import type { ApiContext } from '../context.js';
import { parseInput } from '../validate.js';

/** API keys (CONTRACT §10): listed by any member, created and revoked by admins; keys cannot manage keys. */
export const keyRoutes =
  (ctx: ApiContext): FastifyPluginAsync =>
  async (app) => {
    app.get('/api/keys', async (req, reply) => {
      const p = await ctx.guard(req, reply, 'member');
      return { data: await ctx.control.listKeys(p.workspaceId) };
    });

    app.post('/api/keys', async (req, reply) => {
      const p = await ctx.guard(req, reply, 'admin');
      const body = parseInput(keyBodySchema, req.body ?? {}, 'body');
      const { record, key } = await ctx.control.createKey(p.workspaceId, body);
      const { workspaceId: _ws, ...view } = record;
      reply.code(201);
      return { ...view, lastUsedAt: null, key };
    });

    app.delete('/api/keys/:id', async (req, reply) => {
      const p = await ctx.guard(req, reply, 'admin');
      const { id } = parseInput(idParamsSchema, req.params, 'path');
      await ctx.control.revokeKey(p.workspaceId, id);
      reply.code(204).send();
    });
  };
