import type { FastifyPluginAsync } from 'fastify';
import { idParamsSchema, keyBodySchema } from '../../schemas/api.js';
import { principalOf } from '../auth.js';
import type { ApiContext } from '../context.js';
import { parseInput } from '../validate.js';

/** API keys (CONTRACT §10): listed by any member, created and revoked by admins; keys cannot manage keys. */
export const keyRoutes =
  (ctx: ApiContext): FastifyPluginAsync =>
  async (app) => {
    app.get('/api/keys', { config: { need: 'member' } }, async (req, _reply) => {
      const p = principalOf(req);
      return { data: await ctx.control.listKeys(p.workspaceId) };
    });

    app.post('/api/keys', { config: { need: 'admin' } }, async (req, reply) => {
      const p = principalOf(req);
      const body = parseInput(keyBodySchema, req.body ?? {}, 'body');
      const { record, key } = await ctx.control.createKey(p.workspaceId, body);
      const { workspaceId: _ws, ...view } = record;
      reply.code(201);
      return { ...view, lastUsedAt: null, key };
    });

    app.delete('/api/keys/:id', { config: { need: 'admin' } }, async (req, reply) => {
      const p = principalOf(req);
      const { id } = parseInput(idParamsSchema, req.params, 'path');
      await ctx.control.revokeKey(p.workspaceId, id);
      reply.code(204).send();
    });
  };
