import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyPluginAsync } from 'fastify';

/**
 * The dashboard (CONTRACT §14), served by the service itself: its bundle under /assets/ (built into
 * dist/dashboard by dashboard/build.mjs at `npm start` and `npm test`), and its page at `/` and at every path
 * the page owns, so a link or a reload of any view works. Nothing needs credentials here: the page signs in
 * through the API.
 */

/** The paths the page routes itself (the URL is its state). */
const PAGE_PATHS = [
  '/',
  '/login',
  '/signup',
  '/executions',
  '/executions/:id',
  '/issues',
  '/issues/:id',
  '/services',
  '/settings',
];

/** dist/dashboard, found from this file in the source tree or under dist/. */
function dashboardDir(): string | null {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(path.join(dir, 'package.json'))) {
      const built = path.join(dir, 'dist', 'dashboard');
      return existsSync(path.join(built, 'index.html')) ? built : null;
    }
    const up = path.dirname(dir);
    if (up === dir) return null;
    dir = up;
  }
}

/**
 * Only this origin's scripts and styles, nothing inline (the page sets styles through the DOM, which the policy
 * allows), no plugins, no framing, forms posting nowhere else.
 */
const CSP = [
  "default-src 'self'",
  "img-src 'self' data:",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

export const dashboardRoutes = (): FastifyPluginAsync => async (app) => {
  const root = dashboardDir();
  if (!root) {
    app.log.warn('dist/dashboard is missing (run `npm run build`): the dashboard is not served');
    return;
  }
  const page = readFileSync(path.join(root, 'index.html'));
  await app.register(fastifyStatic, {
    root,
    prefix: '/assets/',
    // The bundle's names do not change between builds: a short cache, revalidated.
    maxAge: 60_000,
    index: false,
    schemaHide: true,
    // app.js.br and app.js.gz, made by the build, for a browser that accepts them.
    preCompressed: true,
  });
  for (const url of PAGE_PATHS) {
    app.get(url, { schema: { hide: true } }, async (_req, reply) =>
      reply
        .header('content-type', 'text/html; charset=utf-8')
        .header('cache-control', 'no-cache')
        .header('x-content-type-options', 'nosniff')
        .header('referrer-policy', 'same-origin')
        .header('content-security-policy', CSP)
        .send(page),
    );
  }
};
