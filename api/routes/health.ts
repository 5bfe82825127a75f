import fs from 'node:fs/promises';
import type { FastifyPluginAsync } from 'fastify';
import { unavailable } from '../../schemas/errors.js';
import type { ApiContext } from '../context.js';

/** CONTRACT §11: alive, and ready (broker reachable, storage writable). */
export const healthRoutes =
  (deps: ApiContext): FastifyPluginAsync =>
  async (app) => {
    app.get('/healthz', async () => ({ status: 'ok' }));
    app.get('/readyz', async () => {
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
      return { status: 'ready', checks: { broker: 'ok', storage: 'ok' } };
    });
  };
