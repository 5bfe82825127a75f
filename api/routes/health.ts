import fs from 'node:fs/promises';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { errorAnswers, healthAnswer, readyAnswer } from '../../schemas/answers.js';
import { unavailable } from '../../schemas/errors.js';
import type { ApiContext } from '../context.js';

/** CONTRACT §11: alive, and ready (broker reachable, storage writable). */
export const healthRoutes =
  (deps: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    app.get(
      '/healthz',
      { schema: { summary: 'The process is alive', tags: ['operations'], response: { 200: healthAnswer } } },
      async () => ({ status: 'ok' as const }),
    );
    app.get(
      '/readyz',
      {
        schema: {
          summary: 'Ready: the broker is reachable and storage writable (else 503)',
          tags: ['operations'],
          response: { 200: readyAnswer, ...errorAnswers },
        },
      },
      async () => {
        const broker = deps.broker.isConnected();
        const storage = await fs
          .access(deps.config.dataDir, fs.constants.W_OK)
          .then(() => true)
          .catch(() => false);
        if (!broker || !storage) {
          throw unavailable(
            `not ready: ${[!broker && 'broker unreachable', !storage && 'storage not writable'].filter(Boolean).join(', ')}`,
          );
        }
        return { status: 'ready' as const, checks: { broker: 'ok' as const, storage: 'ok' as const } };
      },
    );
  };
