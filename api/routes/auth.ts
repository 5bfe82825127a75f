import type { FastifyPluginAsync } from 'fastify';
import { publicUser } from '../../control/control-plane.js';
import { loginBodySchema, signupBodySchema } from '../../schemas/api.js';
import { unauthorized } from '../../schemas/errors.js';
import { clearSessionCookie, principalOf, setSessionCookie } from '../auth.js';
import type { ApiContext } from '../context.js';
import { parseInput } from '../validate.js';

/** Sign-up, log-in, log-out, me (CONTRACT §2, §10). */
export const authRoutes =
  (ctx: ApiContext): FastifyPluginAsync =>
  async (app) => {
    const workspaceView = (w: { id: string; name: string }) => ({ id: w.id, name: w.name });

    app.post('/api/auth/signup', async (req, reply) => {
      const body = parseInput(signupBodySchema, req.body ?? {}, 'body');
      const { user, workspace, session, testKey } = await ctx.control.signup(body);
      setSessionCookie(req, reply, session.token, session.expiresAt);
      reply.code(201);
      const { workspaceId: _ws, ...key } = testKey.record;
      return {
        user: publicUser(user),
        workspace: workspaceView(workspace),
        session,
        testKey: { ...key, key: testKey.key },
      };
    });

    app.post('/api/auth/login', async (req, reply) => {
      const body = parseInput(loginBodySchema, req.body ?? {}, 'body');
      const email = body.email.toLowerCase();
      ctx.loginThrottle.check(email);
      const result = await ctx.control.login(email, body.password);
      if (!result) {
        ctx.loginThrottle.fail(email);
        throw unauthorized('wrong e-mail or password');
      }
      ctx.loginThrottle.succeed(email);
      setSessionCookie(req, reply, result.session.token, result.session.expiresAt);
      return {
        user: publicUser(result.user),
        workspace: workspaceView(result.workspace),
        session: result.session,
      };
    });

    app.post('/api/auth/logout', { config: { need: 'member' } }, async (req, reply) => {
      const p = principalOf(req);
      if (p.kind === 'session') await ctx.control.logout(p.tokenHash);
      clearSessionCookie(req, reply);
      reply.code(204).send();
    });

    app.get('/api/auth/me', { config: { need: 'member' } }, async (req, _reply) => {
      const p = principalOf(req);
      if (p.kind !== 'session') throw new Error('unreachable: member routes are for sessions');
      const user = ctx.control.listMembers(p.workspaceId).find((u) => u.id === p.userId);
      const workspace = await ctx.control.getWorkspace(p.workspaceId);
      if (!user || !workspace) throw unauthorized('the session is no longer valid');
      return { user: publicUser(user), workspace: workspaceView(workspace), role: p.role };
    });
  };
