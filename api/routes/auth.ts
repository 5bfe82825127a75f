import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { publicUser } from '../../control/control-plane.js';
import { errorAnswers, loginAnswer, meAnswer, noContent, signupAnswer } from '../../schemas/answers.js';
import { loginBodySchema, signupBodySchema } from '../../schemas/api.js';
import { unauthorized } from '../../schemas/errors.js';
import { clearSessionCookie, principalOf, setSessionCookie } from '../auth.js';
import type { ApiContext } from '../context.js';

const tags = ['accounts'];

/** Sign-up, log-in, log-out, me (CONTRACT §2, §10). */
export const authRoutes =
  (ctx: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    const workspaceView = (w: { id: string; name: string }) => ({ id: w.id, name: w.name });

    app.post(
      '/api/auth/signup',
      {
        schema: {
          summary: 'Sign up: a user, its workspace, a session and the test key (shown once)',
          tags,
          body: signupBodySchema,
          response: { 201: signupAnswer, ...errorAnswers },
        },
      },
      async (req, reply) => {
        const { user, workspace, session, testKey } = await ctx.control.signup(req.body);
        setSessionCookie(req, reply, session.token, session.expiresAt);
        reply.code(201);
        const { workspaceId: _ws, ...key } = testKey.record;
        return {
          user: publicUser(user),
          workspace: workspaceView(workspace),
          session,
          testKey: { ...key, key: testKey.key },
        };
      },
    );

    app.post(
      '/api/auth/login',
      {
        schema: {
          summary: 'Log in: a session (also set as the svc_session cookie)',
          tags,
          body: loginBodySchema,
          response: { 200: loginAnswer, ...errorAnswers },
        },
      },
      async (req, reply) => {
        const email = req.body.email.toLowerCase();
        ctx.loginThrottle.check(email);
        const result = await ctx.control.login(email, req.body.password);
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
      },
    );

    app.post(
      '/api/auth/logout',
      {
        config: { need: 'member' },
        schema: {
          summary: 'Log out: ends the session at once',
          tags,
          response: { 204: noContent, ...errorAnswers },
        },
      },
      async (req, reply) => {
        const p = principalOf(req);
        if (p.kind === 'session') await ctx.control.logout(p.tokenHash);
        clearSessionCookie(req, reply);
        reply.code(204).send();
      },
    );

    app.get(
      '/api/auth/me',
      {
        config: { need: 'member' },
        schema: {
          summary: 'The signed-in user, its workspace and role',
          tags,
          response: { 200: meAnswer, ...errorAnswers },
        },
      },
      async (req, _reply) => {
        const p = principalOf(req);
        if (p.kind !== 'session') throw new Error('unreachable: member routes are for sessions');
        const user = ctx.control.listMembers(p.workspaceId).find((u) => u.id === p.userId);
        const workspace = await ctx.control.getWorkspace(p.workspaceId);
        if (!user || !workspace) throw unauthorized('the session is no longer valid');
        return { user: publicUser(user), workspace: workspaceView(workspace), role: p.role };
      },
    );
  };
