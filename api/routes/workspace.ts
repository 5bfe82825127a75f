import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import {
  errorAnswers,
  memberAnswer,
  memberListAnswer,
  noContent,
  settingsAnswer,
  workspaceAnswer,
} from '../../schemas/answers.js';
import { idParamsSchema, memberBodySchema } from '../../schemas/api.js';
import { notFound, validationError } from '../../schemas/errors.js';
import { settingsPatchSchema } from '../../schemas/settings.js';
import { principalOf } from '../auth.js';
import type { ApiContext } from '../context.js';

const memberView = (u: {
  id: string;
  email: string;
  name: string | null;
  role: 'owner' | 'admin' | 'member';
  createdAt: string;
}) => ({
  id: u.id,
  email: u.email,
  name: u.name,
  role: u.role,
  createdAt: u.createdAt,
});

const tags = ['workspace'];

/** The workspace, its settings and its members (CONTRACT §10). */
export const workspaceRoutes =
  (ctx: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    app.get(
      '/api/workspace',
      {
        config: { need: 'any' },
        schema: {
          summary: "The caller's workspace, and the caller's role in it (null for a key)",
          tags,
          response: { 200: workspaceAnswer, ...errorAnswers },
        },
      },
      async (req, _reply) => {
        const p = principalOf(req);
        const ws = await ctx.control.getWorkspace(p.workspaceId);
        if (!ws) throw notFound('no such workspace');
        return {
          id: ws.id,
          name: ws.name,
          createdAt: ws.createdAt,
          role: p.kind === 'session' ? p.role : null,
        };
      },
    );

    app.get(
      '/api/workspace/settings',
      {
        config: { need: 'admin' },
        schema: {
          summary: "The workspace's settings",
          tags,
          response: { 200: settingsAnswer, ...errorAnswers },
        },
      },
      async (req, _reply) => {
        const p = principalOf(req);
        return ctx.control.settingsOf(p.workspaceId);
      },
    );

    app.patch(
      '/api/workspace/settings',
      {
        config: { need: 'admin' },
        schema: {
          summary: 'Replace the settings it names, each whole; answers the settings',
          tags,
          body: settingsPatchSchema,
          response: { 200: settingsAnswer, ...errorAnswers },
        },
      },
      async (req, _reply) => {
        const p = principalOf(req);
        const patch = req.body;
        const max = ctx.config.CONTEXT_MAX_INDEXED_KEYS;
        if (patch.indexedContextKeys && patch.indexedContextKeys.length > max) {
          throw validationError(`at most ${max} indexed context keys`, [
            { path: 'indexedContextKeys', message: `at most ${max} keys` },
          ]);
        }
        return ctx.control.patchSettings(p.workspaceId, patch);
      },
    );

    app.get(
      '/api/workspace/members',
      {
        config: { need: 'member' },
        schema: {
          summary: "The workspace's members",
          tags,
          response: { 200: memberListAnswer, ...errorAnswers },
        },
      },
      async (req, _reply) => {
        const p = principalOf(req);
        return { data: ctx.control.listMembers(p.workspaceId).map(memberView) };
      },
    );

    app.post(
      '/api/workspace/members',
      {
        config: { need: 'admin' },
        schema: {
          summary: 'Add a member',
          tags,
          body: memberBodySchema,
          response: { 201: memberAnswer, ...errorAnswers },
        },
      },
      async (req, reply) => {
        const p = principalOf(req);
        const user = await ctx.control.addMember(p.workspaceId, req.body);
        reply.code(201);
        return memberView(user);
      },
    );

    app.delete(
      '/api/workspace/members/:id',
      {
        config: { need: 'admin' },
        schema: {
          summary: 'Remove a member and end its sessions',
          tags,
          params: idParamsSchema,
          response: { 204: noContent, ...errorAnswers },
        },
      },
      async (req, reply) => {
        const p = principalOf(req);
        await ctx.control.removeMember(p.workspaceId, req.params.id);
        reply.code(204).send();
      },
    );
  };
