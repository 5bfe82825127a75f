import { execFile } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
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
  // The read limits a real user has (the service's defaults, not the test stacks' lifted ones): the page must
  // live within them, and a test spends them to see a real 429.
  stack = await startStack(
    'dashboard',
    { PORT: '0', HOST: '127.0.0.1', READ_RATE_PER_SEC: '20', READ_BURST: '40' },
    { listen: true },
  );
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
    // Pasted into a shell as shown, it is taken; the page, looking again every 3 s, shows it without a reload. (Not
    // execFileSync: the service answering it runs in this process.)
    const { stdout } = await promisify(execFile)('bash', ['-c', curl], { encoding: 'utf8', timeout: 10_000 });
    const answer = JSON.parse(stdout) as { accepted: { executions: number } };
    expect(answer.accepted.executions).toBe(1);
    await stack.service.pipeline!.drained();
    const rows = page.locator('table tbody tr');
    await expect.poll(() => rows.count()).toBe(1);

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
    await page.reload();
    await expect.poll(() => rows.count()).toBe(3);
    await shot(page, 'executions');

    // The query language, as the user types: the URL follows (a link shows the same view).
    const search = page.getByRole('searchbox', { name: 'Search' });
    await search.fill('status:failed service:checkout');
    await page.waitForURL(/q=status%3Afailed/);
    await expect.poll(() => rows.count()).toBe(2);
    await search.fill('status:failed endpoint:/orders/2');
    await page.waitForURL(/q=status%3Afailed\+endpoint/);
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
    await expect.poll(() => rows.count()).toBe(3);

    // A valid query again, then the execution's page by its link, then back to the same search.
    await search.fill('status:failed endpoint:/orders/2');
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
    await expect(search.inputValue()).resolves.toBe('status:failed endpoint:/orders/2');

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
    await expect.poll(() => rows.count()).toBe(3);
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

/** A GET with exactly these headers (fetch would add its own accept-encoding and decode the body). */
function rawGet(url: string, headers: Record<string, string>) {
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }>(
    (resolve, reject) => {
      http
        .get(url, { headers }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
          );
        })
        .on('error', reject);
    },
  );
}

describe('the dashboard as served', () => {
  it('serves its page at every view path with a strict policy, and its assets compressed as the browser accepts', async () => {
    for (const view of ['/', '/executions/some-id?mode=live', '/issues/iss_x', '/services', '/settings']) {
      const page = await rawGet(`${base}${view}`, {});
      expect(page.status, view).toBe(200);
      expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
      const csp = String(page.headers['content-security-policy']);
      expect(csp).toContain("default-src 'self'");
      expect(csp).toContain("object-src 'none'");
      expect(csp).not.toContain('unsafe-inline');
      expect(page.body.toString()).toContain('/assets/app.js');
    }
    const plain = await rawGet(`${base}/assets/app.js`, {});
    expect(plain.status).toBe(200);
    expect(plain.headers['content-encoding']).toBeUndefined();
    const br = await rawGet(`${base}/assets/app.js`, { 'accept-encoding': 'br, gzip' });
    expect(br.headers['content-encoding']).toBe('br');
    // A cache between must not give one encoding to a browser that asked for another.
    expect(String(br.headers.vary)).toMatch(/accept-encoding/i);
    expect(brotliDecompressSync(br.body).equals(plain.body)).toBe(true);
    const gz = await rawGet(`${base}/assets/app.css`, { 'accept-encoding': 'gzip' });
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(gz.body).equals((await rawGet(`${base}/assets/app.css`, {})).body)).toBe(true);
    // The script and the styles as a browser gets them: well under the issue's 150 KB for a first load.
    expect(br.body.length + gz.body.length).toBeLessThan(150_000);
  });
});

/** A workspace made over the API: its owner's session token and its test key. */
async function signupOverApi(
  email: string,
): Promise<{ token: string; testKey: string; prefix: string; last4: string }> {
  const res = await fetch(`${base}/api/auth/signup`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password: 'long enough password' }),
  });
  expect(res.status).toBe(201);
  const a = (await res.json()) as {
    session: { token: string };
    testKey: { key: string; prefix: string; last4: string };
  };
  return { token: a.session.token, testKey: a.testKey.key, prefix: a.testKey.prefix, last4: a.testKey.last4 };
}

async function signIn(page: Page, email: string): Promise<void> {
  await page.goto(`${base}/login`);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill('long enough password');
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('navigation', { name: 'Main' }).waitFor();
}

interface Focused {
  tag: string;
  id: string;
  text: string;
  href: string;
}

/**
 * The element that has the keyboard's focus. (The page's code is given as text: this project's TypeScript has no
 * DOM types outside the dashboard.)
 */
const focused = (page: Page) =>
  page.evaluate<Focused>(`(() => {
    const el = document.activeElement;
    return {
      tag: el ? el.tagName.toLowerCase() : '',
      id: el?.id ?? '',
      text: el?.textContent?.trim() ?? '',
      href: el?.getAttribute('href') ?? '',
    };
  })()`);

/** Presses Tab until `match` holds for the focused element (at most `max` times); fails if it never does. */
async function tabTo(page: Page, match: (f: Focused) => boolean, max = 40) {
  for (let i = 0; i < max; i++) {
    await page.keyboard.press('Tab');
    if (match(await focused(page))) return;
  }
  throw new Error(`no element matched after ${max} tabs; focus is on ${JSON.stringify(await focused(page))}`);
}

describe('the dashboard, away from sign-up', () => {
  it('names the test key in the empty state; pages, sorts and filters; a member sees what a member may do; a 429 is waited out; it works with the keyboard alone', async () => {
    const ownerEmail = `owner-${Date.now()}@example.com`;
    const owner = await signupOverApi(ownerEmail);
    const asOwner = (method: string, url: string, body?: unknown) =>
      fetch(`${base}${url}`, {
        method,
        headers: { authorization: `Bearer ${owner.token}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    const page = await browser.newPage({ viewport: { width: 1100, height: 720 } });
    const errors = consoleErrors(page);
    await signIn(page, ownerEmail);

    // The empty state away from sign-up: the test key by prefix and last 4, never in full, and the way to Settings.
    const empty = page.getByRole('region', { name: 'No executions yet' });
    await empty.waitFor();
    const text = (await empty.textContent()) ?? '';
    expect(text).toContain(`${owner.prefix}…${owner.last4}`);
    expect(text).not.toContain(owner.testKey);
    expect(await empty.getByRole('link', { name: 'Settings' }).count()).toBe(1);

    // 60 executions in the last minutes, their durations (1…60 ms) not in the order of their times; two kinds of
    // failure (two issues): a RangeError twice, then a SyntaxError once, last.
    const now = Date.now();
    const executions = Array.from({ length: 60 }, (_, i) => ({
      executionId: `page-${String(i).padStart(2, '0')}`,
      endpoint: `/items/${i}`,
      method: 'GET',
      startedAt: now - 120_000 + i * 1000,
      durationMs: ((i * 37) % 60) + 1,
      statusCode: i === 5 || i === 6 || i === 8 ? 500 : 200,
      ...(i === 5 || i === 6 ? { exception: { type: 'RangeError', message: 'page out of range' } } : {}),
      ...(i === 8 ? { exception: { type: 'SyntaxError', message: 'bad cursor' } } : {}),
    }));
    const res = await fetch(`${base}/api/ingest`, {
      method: 'POST',
      headers: { authorization: `Bearer ${owner.testKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ resource: { service: 'catalog' }, executions }),
    });
    expect(res.status).toBe(202);
    await stack.service.pipeline!.drained();

    // Paging: 50 on the first page, the other 10 on the second, the page in the URL, the back button.
    const rows = page.locator('table tbody tr');
    await page.goto(`${base}/executions?range=1h`);
    await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(50);
    await page.getByRole('button', { name: 'Next' }).click();
    await page.waitForURL(/page=2/);
    await expect.poll(() => rows.count()).toBe(10);
    expect(await page.getByRole('button', { name: 'Next' }).isDisabled()).toBe(true);
    await page.goBack();
    await expect.poll(() => rows.count()).toBe(50);

    // Sorting: slowest first, then fastest first, each in the URL.
    await page.getByLabel('Sort').selectOption('-durationMs');
    await page.waitForURL(/sort=-durationMs/);
    await expect.poll(() => rows.first().textContent()).toContain('/items/47');
    await page.getByLabel('Sort').selectOption('durationMs');
    await page.waitForURL(/sort=durationMs/);
    await expect.poll(() => rows.first().textContent()).toContain('/items/0');

    // A range with nothing in it, in a workspace that has data: not the empty state, but where the latest one is.
    await page.goto(
      `${base}/executions?from=${new Date(now - 10 * 86_400_000).toISOString()}&to=${new Date(now - 9 * 86_400_000).toISOString()}`,
    );
    await page.getByText(/No executions in this range\. The latest was at/).waitFor();
    expect(await empty.count()).toBe(0);
    await page.getByRole('button', { name: 'show from an hour before it' }).click();
    await page.waitForURL((u) => u.searchParams.has('from') && !u.searchParams.has('to'));
    await expect.poll(() => rows.count()).toBe(50);
    // The range goes along to the other view over time.
    await expect(
      page
        .getByRole('navigation', { name: 'Main' })
        .getByRole('link', { name: 'Services' })
        .getAttribute('href'),
    ).resolves.toMatch(/^\/services\?from=[^&]+$/);

    // Issues: the assignee filter.
    const issues = (await (await asOwner('GET', '/api/issues?status=open')).json()) as {
      data: { id: string; title: string }[];
    };
    expect(issues.data).toHaveLength(2);
    const me = (await (await asOwner('GET', '/api/auth/me')).json()) as { user: { id: string } };
    const mine = issues.data.find((i) => i.title.startsWith('RangeError'))!;
    expect((await asOwner('PATCH', `/api/issues/${mine.id}`, { assignee: me.user.id })).status).toBe(200);
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Issues' }).click();
    await expect.poll(() => rows.count()).toBe(2);
    await page.getByLabel('Assigned to').selectOption({ label: ownerEmail });
    await page.waitForURL(/assignee=/);
    await expect.poll(() => rows.count()).toBe(1);
    await expect(rows.first().textContent()).resolves.toContain('RangeError');
    await page.getByLabel('Assigned to').selectOption('none');
    await expect.poll(() => rows.first().textContent()).toContain('SyntaxError');
    expect(await rows.count()).toBe(1);
    // Sorted: by last seen (the default), the SyntaxError first; by occurrences, the RangeError (two) first.
    await page.getByLabel('Assigned to').selectOption('');
    await expect.poll(() => rows.count()).toBe(2);
    await expect(rows.first().textContent()).resolves.toContain('SyntaxError');
    await page.getByLabel('Sort').selectOption('-occurrences');
    await page.waitForURL(/sort=-occurrences/);
    await expect.poll(() => rows.first().textContent()).toContain('RangeError');
    await expect.poll(() => page.getByRole('link', { name: /^Open 2$/ }).count()).toBe(1);

    // The services chart is drawn with the data: the requests line's colour is on the canvas.
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Services' }).click();
    await page.getByRole('region', { name: 'Requests', exact: true }).locator('canvas').first().waitFor();
    // Pixels of #2754c5, the requests series' stroke (antialiased ones near it).
    const drawn = await page.evaluate<number>(`(() => {
      const c = document.querySelector('section[aria-label="Requests"] canvas');
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 0; i < d.length; i += 4)
        if (Math.abs(d[i] - 0x27) < 24 && Math.abs(d[i + 1] - 0x54) < 24 && Math.abs(d[i + 2] - 0xc5) < 24) n++;
      return n;
    })()`);
    expect(drawn).toBeGreaterThan(10);
    // An endpoint's link lists that endpoint's executions (its template's prefix and method, quoted into the search).
    await page
      .getByRole('table', { name: 'Top endpoints' })
      .getByRole('link', { name: 'GET /items/:id' })
      .click();
    await page.waitForURL(/\/executions\?q=/);
    await expect(page.getByRole('searchbox', { name: 'Search' }).inputValue()).resolves.toBe(
      'service:"catalog" endpoint:"/items/*" method:GET',
    );
    await expect.poll(() => rows.count()).toBe(50);

    // A plain member: sees the keys and the members, not the controls only owners and admins may use.
    const memberEmail = `member-${Date.now()}@example.com`;
    const added = await asOwner('POST', '/api/workspace/members', {
      email: memberEmail,
      password: 'long enough password',
      role: 'member',
    });
    expect(added.status).toBe(201);
    const member = await browser.newPage({ viewport: { width: 1100, height: 720 } });
    const memberErrors = consoleErrors(member);
    await signIn(member, memberEmail);
    await member.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Settings' }).click();
    await member.getByText("Only owners and admins see and change the workspace's settings.").waitFor();
    await expect.poll(() => member.getByRole('table', { name: 'Keys' }).locator('tbody tr').count()).toBe(1);
    expect(await member.getByRole('button', { name: 'Create key' }).count()).toBe(0);
    expect(await member.getByRole('button', { name: /^Revoke/ }).count()).toBe(0);
    expect(await member.getByRole('button', { name: 'Save settings' }).count()).toBe(0);
    expect(await member.getByRole('button', { name: 'Add member' }).count()).toBe(0);
    await expect
      .poll(() => member.getByRole('table', { name: 'Members' }).locator('tbody tr').count())
      .toBe(2);
    expect(await member.getByRole('button', { name: /^Remove/ }).count()).toBe(0);

    // A 429 (the session's read budget spent for real: requests keep spending it while the view asks): the page
    // says so, waits its retry-after, and shows the view once the spending stops.
    // (The spending asks the cheapest read there is, from 16 connections of this process under the member's
    // session: the page's own six connections, at a loaded machine's latency, spent it no faster than it refills,
    // and the 429 never came. The view is the issues list, whose seven requests cannot all find a token.)
    const memberSession = (await member.context().cookies()).find((c) => c.name === 'svc_session')!.value;
    let burning = true;
    const burn = async () => {
      while (burning) {
        const res = await fetch(`${base}/api/auth/me`, {
          headers: { authorization: `Bearer ${memberSession}` },
        });
        await res.arrayBuffer();
      }
    };
    const burners = Array.from({ length: 16 }, burn);
    await expect
      .poll(
        async () =>
          (await fetch(`${base}/api/auth/me`, { headers: { authorization: `Bearer ${memberSession}` } }))
            .status,
      )
      .toBe(429);
    await member.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Issues' }).click();
    await member
      .getByRole('status')
      .filter({ hasText: /Too many requests: trying again in \d+ s/ })
      .waitFor();
    burning = false;
    await Promise.all(burners);
    await expect.poll(() => member.locator('table tbody tr').count()).toBe(2);
    await expect.poll(() => member.getByRole('link', { name: /^Open 2$/ }).count()).toBe(1);
    expect(
      await member
        .getByRole('status')
        .filter({ hasText: /Too many requests/ })
        .count(),
    ).toBe(0);
    // The browser's own line for each 429 of the budget spent above is expected; nothing else.
    // A session that ends mid-use (here: logged out elsewhere): the next view goes to sign-in, then comes back.
    const session = (await member.context().cookies()).find((c) => c.name === 'svc_session')!.value;
    const out = await fetch(`${base}/api/auth/logout`, {
      method: 'POST',
      headers: { authorization: `Bearer ${session}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(out.status).toBe(204);
    await member.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Executions' }).click();
    await member.waitForURL(/\/login\?next=%2Fexecutions/);
    await member.getByLabel('Email').fill(memberEmail);
    await member.getByLabel('Password').fill('long enough password');
    await member.getByRole('button', { name: 'Log in' }).click();
    await member.waitForURL((u) => u.pathname === '/executions');
    await expect.poll(() => member.locator('table tbody tr').count()).toBe(50);
    // The browser's own lines for the 429s of the budget spent above, and the 401 of the ended session, are
    // expected; nothing else.
    expect(memberErrors.filter((e) => !/status of 429/.test(e) && !/status of 401.*\/api\//.test(e))).toEqual(
      [],
    );
    await member.close();

    // The keyboard alone: to the search box, a query, to the first result, its page.
    await page.goto(`${base}/executions?range=1h`);
    await expect.poll(() => rows.count()).toBe(50);
    await tabTo(page, (f) => f.id === 'search');
    await page.keyboard.type('status:failed');
    await page.keyboard.press('Enter');
    await page.waitForURL(/q=status%3Afailed/);
    await expect.poll(() => rows.count()).toBe(3);
    await tabTo(page, (f) => f.tag === 'a' && f.href.startsWith('/executions/page-'));
    const target = (await focused(page)).href;
    await page.keyboard.press('Enter');
    await page.waitForURL((u) => u.pathname === target);
    // On its issue's page, Resolve by the keyboard.
    await tabTo(page, (f) => f.tag === 'a' && f.href.startsWith('/issues/'));
    await page.keyboard.press('Enter');
    await page.waitForURL(/\/issues\/iss_/);
    await page.getByRole('button', { name: 'Resolve' }).waitFor();
    await tabTo(page, (f) => f.tag === 'button' && f.text === 'Resolve');
    await page.keyboard.press('Enter');
    await page.getByRole('button', { name: 'Reopen' }).waitFor();

    // Every page at 360 px: nothing wider than the screen (wide tables scroll inside their own box).
    await page.setViewportSize({ width: 360, height: 740 });
    for (const view of [
      '/executions?range=1h',
      page.url().slice(base.length),
      '/issues',
      '/services',
      '/settings',
    ]) {
      await page.goto(`${base}${view}`);
      await page.locator('main h1').waitFor();
      await page.waitForLoadState('networkidle');
      expect(await page.evaluate('document.documentElement.scrollWidth'), view).toBeLessThanOrEqual(360);
    }
    expect(errors).toEqual([]);
    await page.close();
  });
});
