import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type TestStack } from '../support/env.js';

/**
 * The dashboard (CONTRACT §14) in a real browser (Debian's Chromium driven by playwright-core) against a running
 * service, as a new user meets it: sign up, the empty state's curl with the test key, the executions table and
 * its search bar (the query language, an error marked at its offset), an execution's page. No browser is not a
 * skip: the test fails and says why.
 */

const CHROMIUM =
  process.env.CHROMIUM_BIN ?? ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));

let stack: TestStack;
let browser: Browser;
let base: string;

beforeAll(async () => {
  if (!CHROMIUM)
    throw new Error(
      "no Chromium: install Debian's chromium (npm test does it with apt as root) or set CHROMIUM_BIN",
    );
  stack = await startStack('dashboard', { PORT: '0', HOST: '127.0.0.1' }, { listen: true });
  base = stack.service.url!;
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await stack?.close();
});

/**
 * With UPDATE_SCREENSHOTS set, the page as it is now, as docs/screenshots/<name>.png (the README shows them); a
 * plain test run writes nothing into the repository.
 */
async function shot(page: Page, name: string): Promise<void> {
  if (!process.env.UPDATE_SCREENSHOTS) return;
  const dir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'docs', 'screenshots');
  mkdirSync(dir, { recursive: true });
  await page.evaluate('window.scrollTo(0, 0)');
  await page.screenshot({ path: path.join(dir, `${name}.png`), fullPage: false });
}

/**
 * Console errors, less the browser's own line for an API answer the page handles (CONTRACT §14): the 400 of an
 * invalid search, the 401 of the session check before sign-in. Any other failed call is an error.
 */
function consoleErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    const url = m.location().url;
    const handled =
      (/status of 400/.test(m.text()) && /\/api\/executions\?.*\bq=/.test(url)) ||
      (/status of 401/.test(m.text()) && url.endsWith('/api/auth/me'));
    if (!handled) errors.push(`${m.text()} ${url}`);
  });
  page.on('pageerror', (e) => errors.push(String(e)));
  return errors;
}

describe('the dashboard', () => {
  it('takes a new user from sign-up through the empty state, a search, an execution, its issue, the services and the keys', async () => {
    const page = await browser.newPage({ viewport: { width: 1100, height: 720 } });
    const errors = consoleErrors(page);
    await page.goto(`${base}/`);
    // Not signed in: the sign-in form, and a way to sign up.
    await page.getByRole('link', { name: 'Sign up' }).click();
    await page.getByLabel('Email').fill(`new-${Date.now()}@example.com`);
    await page.getByLabel('Password').fill('long enough password');
    await page.getByRole('button', { name: 'Sign up' }).click();
    await page.waitForURL(/\/executions$/);
    const nav = page.getByRole('navigation', { name: 'Main' });
    await nav.waitFor();
    for (const name of ['Executions', 'Issues', 'Services', 'Settings'])
      await expect(nav.getByRole('link', { name }).count()).resolves.toBe(1);

    // The empty state says what to send, with the full test key (only right after sign-up).
    const curl = (await page.locator('pre').textContent()) ?? '';
    const key = /svc_test_[A-Za-z0-9]{32}/.exec(curl)?.[0];
    expect(key, curl).toBeDefined();

    const now = Date.now();
    const res = await fetch(`${base}/api/ingest`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        resource: { service: 'checkout', environment: 'production' },
        executions: [
          {
            executionId: 'dash-ok-1',
            endpoint: '/orders/1',
            method: 'GET',
            startedAt: now - 5000,
            durationMs: 12,
            statusCode: 200,
          },
          {
            executionId: 'dash-fail-1',
            endpoint: '/orders/2',
            method: 'POST',
            startedAt: now - 4000,
            durationMs: 180,
            statusCode: 500,
            exception: { type: 'TypeError', message: 'cart is undefined' },
            logs: [{ timestamp: now - 3990, level: 'error', message: 'payment failed' }],
          },
        ],
      }),
    });
    expect(res.status).toBe(202);
    await stack.service.pipeline!.drained();

    // The empty state looks again by itself (every 3 s): no reload needed.
    const rows = page.locator('table tbody tr');
    await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(2);
    await shot(page, 'executions');

    // The query language, as the user types: the URL follows (a link shows the same view).
    const search = page.getByRole('searchbox', { name: 'Search' });
    await search.fill('status:failed service:checkout');
    await page.waitForURL(/q=status%3Afailed/);
    await expect.poll(() => rows.count()).toBe(1);
    await expect(rows.first().textContent()).resolves.toContain('/orders/2');

    // An invalid query: an alert with the message, the offending term marked.
    await search.fill('status:failed duration:>>5');
    const alert = page.getByRole('alert');
    await alert.waitFor();
    await expect(alert.locator('mark').textContent()).resolves.toBe('duration:>>5');

    // Clearing the box removes the query from the URL, and the filter with it.
    await search.fill('');
    await page.waitForURL((u) => !u.search.includes('q='));
    await expect.poll(() => rows.count()).toBe(2);

    // A valid query again, then the execution's page by its link, then back to the same search.
    await search.fill('status:failed service:checkout');
    await expect.poll(() => rows.count()).toBe(1);
    await rows.first().getByRole('link').click();
    await page.waitForURL(/\/executions\/dash-fail-1$/);
    await expect(page.getByRole('heading', { level: 1 }).textContent()).resolves.toBe('dash-fail-1');
    await page.getByText('payment failed').waitFor();
    await shot(page, 'execution');
    await expect(page.locator('main').textContent()).resolves.toContain('cart is undefined');
    await page.goBack();
    await page.waitForURL(/q=status%3Afailed/);
    await expect.poll(() => rows.count()).toBe(1);
    await expect(search.inputValue()).resolves.toBe('status:failed service:checkout');

    // The failure's issue: from the execution's page, resolved, assigned and commented on.
    await page.goForward();
    await page.getByRole('link', { name: /TypeError in POST \/orders\/:id/ }).click();
    await page.waitForURL(/\/issues\/iss_/);
    await page.getByRole('heading', { level: 1, name: /TypeError/ }).waitFor();
    await page.getByRole('region', { name: 'Occurrences over time' }).locator('canvas').first().waitFor();
    await page.getByRole('button', { name: 'Resolve' }).click();
    await page.getByRole('button', { name: 'Reopen' }).waitFor();
    expect(await page.getByRole('button', { name: 'Resolve' }).count()).toBe(0);
    const assignee = page.getByRole('combobox', { name: 'Assignee' });
    await expect.poll(() => assignee.locator('option').count()).toBe(2);
    await assignee.selectOption({ index: 1 });
    await page.getByRole('textbox', { name: 'Comment' }).fill('Fixed by the cart null check.');
    await page.getByRole('button', { name: 'Add comment' }).click();
    await page.getByText('Fixed by the cart null check.').waitFor();
    await page
      .getByText(/assigned/)
      .first()
      .waitFor();
    await shot(page, 'issue');
    // The list: the issue under Resolved, with the tab's count.
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Issues' }).click();
    await page.getByRole('link', { name: /Resolved 1/ }).click();
    await expect.poll(() => page.locator('table tbody tr').count()).toBe(1);

    // Services: the card, the three charts drawn, the top endpoints.
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Services' }).click();
    await page.getByRole('heading', { name: 'checkout', level: 2 }).first().waitFor();
    for (const name of ['Requests', 'Failure rate', 'Latency'])
      await page.getByRole('region', { name, exact: true }).locator('canvas').first().waitFor();
    await expect
      .poll(() => page.getByRole('table', { name: 'Top endpoints' }).locator('tbody tr').count())
      .toBe(2);
    await shot(page, 'services');

    // Settings: a key created (shown once, and it works), then revoked (and it no longer does).
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Settings' }).click();
    await page.getByLabel('Key name').fill('deploy pipeline');
    await page.getByRole('button', { name: 'Create key' }).click();
    const shown = (await page.getByRole('status').locator('code').textContent()) ?? '';
    expect(shown).toMatch(/^svc_live_[A-Za-z0-9]{32}$/);
    const ingestWith = (k: string) =>
      fetch(`${base}/api/ingest`, {
        method: 'POST',
        headers: { authorization: `Bearer ${k}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          resource: { service: 'billing' },
          executions: [
            {
              executionId: 'live-1',
              endpoint: '/invoices',
              startedAt: Date.now() - 1000,
              durationMs: 5,
              statusCode: 200,
            },
          ],
        }),
      }).then((r) => r.status);
    expect(await ingestWith(shown)).toBe(202);
    await page.getByRole('button', { name: 'Done' }).click();
    expect(await page.getByText(shown).count()).toBe(0);
    page.once('dialog', (d) => void d.accept());
    await page.getByRole('button', { name: 'Revoke deploy pipeline' }).click();
    await page.getByText(/^revoked /).waitFor();
    expect(await ingestWith(shown)).toBe(401);
    // The settings form saves.
    await page.getByLabel('Retention (days)').fill('45');
    await page.getByRole('button', { name: 'Save settings' }).click();
    await page.getByText(/^Saved\./).waitFor();
    await shot(page, 'settings');

    // Live data: the mode is part of the view, and in-app links keep it.
    await stack.service.pipeline!.drained();
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Executions' }).click();
    await expect.poll(() => rows.count()).toBe(2);
    await page.getByLabel('Mode').selectOption('live');
    await page.waitForURL(/mode=live/);
    await expect.poll(() => rows.count()).toBe(1);
    await rows.first().getByRole('link').click();
    await page.waitForURL(/\/executions\/live-1\?mode=live$/);
    await page.getByText('billing').first().waitFor();
    expect(errors).toEqual([]);
    await page.close();
  });

  it('fits a 360 px wide screen; signed out, a view goes to sign-in and comes back; a reload shows the same view', async () => {
    const page = await browser.newPage({ viewport: { width: 360, height: 740 } });
    const errors = consoleErrors(page);
    await page.goto(`${base}/executions?q=${encodeURIComponent('status:failed')}`);
    // Signed out: sign-in, and back to the view after.
    await page.getByLabel('Email').waitFor();
    await page.waitForURL(/\/login\?next=/);
    const width = await page.evaluate('document.documentElement.scrollWidth');
    expect(width).toBeLessThanOrEqual(360);
    const email = `narrow-${Date.now()}@example.com`;
    const signup = await fetch(`${base}/api/auth/signup`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password: 'long enough password' }),
    });
    expect(signup.status).toBe(201);
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill('long enough password');
    await page.getByRole('button', { name: 'Log in' }).click();
    // Back to the view asked for, its query in the search bar; a reload shows it again.
    await page.waitForURL(/\/executions\?q=status%3Afailed$/);
    const search = page.getByRole('searchbox', { name: 'Search' });
    await expect(search.inputValue()).resolves.toBe('status:failed');
    await page.reload();
    await expect.poll(() => search.inputValue()).toBe('status:failed');
    await expect(page.evaluate('document.documentElement.scrollWidth')).resolves.toBeLessThanOrEqual(360);
    expect(errors).toEqual([]);
    await page.close();
  });
});
