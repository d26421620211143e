/**
 * The request log's and usage's filters and search as a user types them, in real Chromium against keyrelay
 * on a real socket with SQLite: model names by any part, a property by its name alone and in any case,
 * search operators and over-long searches said in words, and every identifier of a request's detail page
 * leading to the list filtered by it.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RequestLogRow } from '../src/types.js';
import { ensureConsoleBuilt, findChromium, launchBrowser, signedInPage } from './helpers/browser.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { makeLogRow } from './helpers/log-rows.js';
import { WIDTHS } from './helpers/layout.js';

if (!findChromium())
  throw new Error('console-filters.e2e: /usr/bin/chromium is missing (apt-get install chromium)');

const SHOTS = process.env.KR_SHOTS_DIR; // set to a /tmp folder to keep screenshots for looking at

describe('filters that find', () => {
  let h: Harness;
  let browser: Browser;
  let page: Page;
  let user: { accountId: string; keyId: string };
  let detailId = '';
  const email = 'filters@example.com';

  beforeAll(async () => {
    await ensureConsoleBuilt();
    h = await startHarness();
    user = await h.newUser(email);
    const now = Date.now();
    const rows: RequestLogRow[] = [];
    for (let i = 0; i < 12; i++) {
      rows.push(
        makeLogRow({
          at: now - 60_000 - i * 60_000,
          account_id: user.accountId,
          key_id: user.keyId,
          provider: i % 3 === 0 ? 'openai' : 'anthropic',
          path: i % 3 === 0 ? '/v1/chat/completions' : '/v1/messages',
          model: i % 3 === 0 ? 'gpt-4o-mini' : i % 3 === 1 ? 'claude-haiku-4-5' : 'claude-sonnet-4-6',
          properties: i < 5 ? { team: i % 2 ? 'search' : 'ads' } : { env: 'prod' },
          end_user: `user-${i % 4}@customer.example`,
          session: `checkout-${i % 2}`,
          cost_usd: i === 0 ? 0.0000123 : 0.000123,
          request_body: JSON.stringify({
            messages: [{ role: 'user', content: i % 2 ? 'hello there' : 'world peace' }],
          }),
        }),
      );
    }
    await h.kr.services.logStore.insertBatch(rows);
    detailId = rows[1]!.id;
    browser = await launchBrowser();
    page = await signedInPage(browser, h.url, email, { width: 1280, height: 900 });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  const rowCount = () => page.locator('table.requests-table tbody tr.clickable').count();
  /** The list settles on this many rows (it renders a moment after its answer arrives). */
  const expectRows = (n: number, what = '') =>
    expect.poll(rowCount, { timeout: 15_000, message: `${what} rows` }).toBe(n);
  /** Types into a filter field and waits for the list that the committed filter brings. */
  async function typeFilter(id: string, text: string): Promise<void> {
    const done = page.waitForResponse((res) => res.url().includes('/api/console/requests?'));
    await page.fill(`#${id}`, text);
    await page.press(`#${id}`, 'Enter');
    await done;
  }
  async function shoot(name: string): Promise<void> {
    if (!SHOTS) return;
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      for (const width of [1280, 390]) {
        await page.setViewportSize({ width, height: 900 });
        await page.screenshot({ path: `${SHOTS}/${name}-${width}-${scheme}.png`, fullPage: true });
      }
    }
    await page.emulateMedia({ colorScheme: 'light' });
    await page.setViewportSize({ width: 1280, height: 900 });
  }

  it('finds models by any part of the name, on Requests and on Usage', async () => {
    await page.goto(`${h.url}/requests`);
    await expectRows(12);
    await typeFilter('f-model', 'claude');
    await expectRows(8);
    await typeFilter('f-model', 'SONNET');
    await expectRows(4);

    await page.goto(`${h.url}/usage?range=24h&model=claude`);
    const byModel = page.locator('section[aria-label="By model"]');
    await byModel.getByRole('link', { name: 'claude-haiku-4-5' }).waitFor();
    await expect(byModel.getByText('gpt-4o-mini').count()).resolves.toBe(0);
    await shoot('usage-filtered');
    // A model in the breakdown opens the log for that model exactly.
    await byModel.getByRole('link', { name: 'claude-haiku-4-5' }).click();
    await page.waitForURL(/\/requests\?/);
    await expectRows(4);
  });

  it('filters by a property name alone, compares names in any case, and says what it cannot use', async () => {
    await page.goto(`${h.url}/requests`);
    await typeFilter('f-property', 'team');
    await expectRows(5);
    await typeFilter('f-property', 'TEAM:search');
    await expectRows(2);
    await page.fill('#f-property', ':search');
    await page.press('#f-property', 'Enter');
    await expect(page.locator('#f-property-error').textContent()).resolves.toMatch(
      /property name before the colon/,
    );
  });

  it('searches with OR, takes operators alone as words, and says so when a search is too long', async () => {
    await page.goto(`${h.url}/requests`);
    await expect(page.locator('label[for="f-q"]').textContent()).resolves.toMatch(
      /all words match; OR for either/,
    );
    await typeFilter('f-q', 'hello OR world');
    await expectRows(12);
    await typeFilter('f-q', 'hello AND there');
    await expectRows(6);
    await typeFilter('f-q', 'NOT');
    await expectRows(0);

    await page.fill('#f-q', 'x'.repeat(201));
    await page.press('#f-q', 'Enter');
    const problem = page.locator('#f-q-error');
    await expect(problem.textContent()).resolves.toBe(
      'Search looks for up to 200 characters; this one has 201. Shorten it.',
    );
    // Nothing was sent, so no raw server message and no failing "Try again".
    await expect(page.getByText('Too big').count()).resolves.toBe(0);
    await expect(page.getByRole('button', { name: 'Try again' }).count()).resolves.toBe(0);
    await shoot('search-too-long');
  });

  it('links every identifier of a request to the list filtered by it', async () => {
    await page.goto(`${h.url}/requests/${detailId}`);
    const context = page.locator('.detail-grid');
    await context.getByRole('link', { name: 'user-1@customer.example' }).waitFor();
    await shoot('detail-links');
    const cases: [string, RegExp, number][] = [
      ['user-1@customer.example', /end_user=user-1%40customer\.example/, 3],
      ['checkout-1', /session=checkout-1/, 6],
    ];
    for (const [name, url, rows] of cases) {
      await page.goto(`${h.url}/requests/${detailId}`);
      await context.getByRole('link', { name }).click();
      await page.waitForURL(url);
      await expectRows(rows, name);
      // The filter shows in the bar, and removing it brings every row back.
      const chip = page.locator('.filter-chip', { hasText: name });
      await chip.click();
      await expectRows(12, name);
    }
    await page.goto(`${h.url}/requests/${detailId}`);
    await page.locator('.detail-meta').getByRole('link', { name: 'claude-haiku-4-5' }).click();
    await page.waitForURL(/model=/);
    await expectRows(4);
    await page.goto(`${h.url}/requests/${detailId}`);
    await context.getByRole('link', { name: /^default/ }).click();
    await page.waitForURL(/key_id=/);
    await expectRows(12);
  });

  it('with every optional column on at 1280 px, scrolls sideways rather than clip a model, user or cost', async () => {
    await page.goto(`${h.url}/requests`);
    await page.evaluate(() =>
      localStorage.setItem(
        'keyrelay.requests.columns',
        JSON.stringify(['end_user', 'session', 'properties', 'ttfb']),
      ),
    );
    await page.reload();
    await expectRows(12);
    const clipped = await page.evaluate(() => {
      const out: string[] = [];
      for (const sel of ['.c-model .ellipsis', 'td.c-end_user', 'td.c-session', 'td.c-cost', 'td.c-status']) {
        for (const el of Array.from(
          document.querySelectorAll<HTMLElement>(`table.requests-table tbody ${sel}`),
        ))
          if (el.scrollWidth > el.clientWidth + 1) out.push(`${sel}: ${el.textContent}`);
      }
      return out;
    });
    expect(clipped).toEqual([]);
    const wrap = await page.locator('.requests-wrap').evaluate((el) => el.scrollWidth - el.clientWidth);
    expect(wrap).toBeGreaterThan(0); // the card scrolls; the page does not
    expect(
      await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth),
    ).toBe(0);
    await expect(page.locator('td.c-cost', { hasText: '$0.0000123' }).count()).resolves.toBe(1);
    await shoot('requests-all-columns');
    await page.evaluate(() => localStorage.removeItem('keyrelay.requests.columns'));
  });

  it('keeps the filter bar on screen at every width', async () => {
    await page.goto(
      `${h.url}/requests?end_user=${encodeURIComponent('user-1@customer.example')}&property=team`,
    );
    await page.locator('.filter-chip').waitFor();
    for (const width of WIDTHS) {
      await page.setViewportSize({ width, height: 900 });
      const overflow = await page.evaluate(
        () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
      );
      expect([width, overflow]).toEqual([width, 0]);
    }
    await page.setViewportSize({ width: 1280, height: 900 });
  });
});
