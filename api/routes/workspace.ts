import type { FastifyPluginAsync } from 'fastify';
import { idParamsSchema, memberBodySchema } from '../../schemas/api.js';
import { notFound, validationError } from '../../schemas/errors.js';
import { settingsPatchSchema } from '../../schemas/settings.js';
import { principalOf } from '../auth.js';
import type { ApiContext } from '../context.js';
import { parseInput } from '../validate.js';

const memberView = (u: {
  id: string;
  email: string;
  name: string | null;
  role: string;
  createdAt: string;
}) => ({
  id: u.id,
  email: u.email,
  name: u.name,
  role: u.role,
  createdAt: u.createdAt,
});

/** The workspace, its settings and its members (CONTRACT §10). */
export const workspaceRoutes =
  (ctx: ApiContext): FastifyPluginAsync =>
  async (app) => {
    app.get('/api/workspace', { config: { need: 'any' } }, async (req, _reply) => {
      const p = principalOf(req);
      const ws = await ctx.control.getWorkspace(p.workspaceId);
      if (!ws) throw notFound('no such workspace');
      return {
        id: ws.id,
        name: ws.name,
        createdAt: ws.createdAt,
        role: p.kind === 'session' ? p.role : null,
      };
    });

    app.get('/api/workspace/settings', { config: { need: 'admin' } }, async (req, _reply) => {
      const p = principalOf(req);
      return ctx.control.settingsOf(p.workspaceId);
    });

    app.patch('/api/workspace/settings', { config: { need: 'admin' } }, async (req, _reply) => {
      const p = principalOf(req);
      const patch = parseInput(settingsPatchSchema, req.body ?? {}, 'body');
      const max = ctx.config.CONTEXT_MAX_INDEXED_KEYS;
      if (patch.indexedContextKeys && patch.indexedContextKeys.length > max) {
        throw validationError(`at most ${max} indexed context keys`, [
          { path: 'indexedContextKeys', message: `at most ${max} keys` },
        ]);
      }
      return ctx.control.patchSettings(p.workspaceId, patch);
    });

    app.get('/api/workspace/members', { config: { need: 'member' } }, async (req, _reply) => {
      const p = principalOf(req);
      return { data: ctx.control.listMembers(p.workspaceId).map(memberView) };
    });

    app.post('/api/workspace/members', { config: { need: 'admin' } }, async (req, reply) => {
      const p = principalOf(req);
      const body = parseInput(memberBodySchema, req.body ?? {}, 'body');
      const user = await ctx.control.addMember(p.workspaceId, body);
      reply.code(201);
      return memberView(user);
    });

    app.delete('/api/workspace/members/:id', { config: { need: 'admin' } }, async (req, reply) => {
      const p = principalOf(req);
      const { id } = parseInput(idParamsSchema, req.params, 'path');
      await ctx.control.removeMember(p.workspaceId, id);
      reply.code(204).send();
    });
  };
