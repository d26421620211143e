/**
 * The request log's sortable headers, in real Chromium against keyrelay on a real socket with SQLite: time,
 * cost, tokens and latency either way, sorted by the server (so "Load more" continues the same order, never
 * repeating or skipping a row), kept in the address, and reachable on a phone.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RequestLogRow } from '../src/types.js';
import { ensureConsoleBuilt, findChromium, launchBrowser, signedInPage } from './helpers/browser.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { makeLogRow } from './helpers/log-rows.js';
import { checkLayout } from './helpers/layout.js';

if (!findChromium())
  throw new Error('console-sort.e2e: /usr/bin/chromium is missing (apt-get install chromium)');

const SHOTS = process.env.KR_SHOTS_DIR; // set to a /tmp folder to keep screenshots for looking at
const ROWS = 70; // more than a page (50)

describe('sortable request log', () => {
  let h: Harness;
  let browser: Browser;
  let page: Page;
  let rows: RequestLogRow[] = [];
  const email = 'sort@example.com';

  beforeAll(async () => {
    await ensureConsoleBuilt();
    h = await startHarness();
    const user = await h.newUser(email);
    const now = Date.now();
    // Few distinct values, so ties cross the page boundary; some costs unknown.
    rows = Array.from({ length: ROWS }, (_, i) =>
      makeLogRow({
        at: now - 60_000 - i * 1_000,
        account_id: user.accountId,
        key_id: user.keyId,
        cost_usd: i % 9 === 0 ? null : [0.0000123, 0.42, 0.0031, 0.00007][i % 4]!,
        input_tokens: [10, 5000, 300][i % 3]!,
        output_tokens: [7, 70][i % 2]!,
        latency_ms: [812, 45, 30_000, 2_500, 45][i % 5]!,
      }),
    );
    await h.kr.services.logStore.insertBatch(rows);
    browser = await launchBrowser();
    page = await signedInPage(browser, h.url, email, { width: 1280, height: 900 });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  /** Ids of the rows shown, in order (each row's time links to its detail page). */
  const shownIds = () =>
    page.$$eval('table.requests-table tbody .c-time a', (as) =>
      as.map((a) => decodeURIComponent(a.getAttribute('href')!.split('/').pop()!)),
    );

  function expected(value: (r: RequestLogRow) => number | null, dir: 'asc' | 'desc'): string[] {
    const sign = dir === 'asc' ? 1 : -1;
    return [...rows]
      .sort((a, b) => {
        const [x, y] = [value(a), value(b)];
        if (x === null || y === null) return x === y ? sign * (a.id < b.id ? -1 : 1) : x === null ? 1 : -1;
        return x !== y ? sign * (x - y) : sign * (a.id < b.id ? -1 : 1);
      })
      .map((r) => r.id);
  }

  async function loadAll(): Promise<void> {
    const more = page.getByRole('button', { name: 'Load more' });
    await more.click();
    await page.getByText(`${ROWS} requests · end of log`).waitFor();
  }

  it('sorts by cost, tokens, latency and time either way, paging on in the same order', async () => {
    await page.goto(`${h.url}/requests`);
    await page.locator('table.requests-table tbody tr').first().waitFor();
    const cases = [
      { header: 'Cost', param: 'cost', value: (r: RequestLogRow) => r.cost_usd },
      {
        header: 'Tokens in / out',
        param: 'tokens',
        value: (r: RequestLogRow) => r.input_tokens! + r.output_tokens!,
      },
      { header: 'Latency', param: 'latency', value: (r: RequestLogRow) => r.latency_ms },
      { header: 'Time', param: 'time', value: () => 0 },
    ];
    for (const c of cases) {
      for (const dir of ['desc', 'asc'] as const) {
        // A first click sorts largest (newest) first, a second the other way; time starts newest first.
        const clicks = c.param === 'time' ? (dir === 'desc' ? 0 : 1) : 1;
        for (let i = 0; i < clicks; i++)
          await page.getByRole('button', { name: new RegExp(`^${c.header}`) }).click();
        if (c.param === 'time' && dir === 'desc') {
          // Back to newest first: the default, which the address leaves out.
          await page.getByRole('button', { name: /^Cost/ }).click();
          await page.getByRole('button', { name: /^Time/ }).click();
          await expect.poll(() => new URL(page.url()).searchParams.get('sort')).toBeNull();
        } else {
          await expect.poll(() => new URL(page.url()).searchParams.get('sort')).toBe(`${c.param}:${dir}`);
        }
        const want =
          c.param === 'time' ? expected((r) => Date.parse(r.created_at), dir) : expected(c.value, dir);
        await expect.poll(shownIds).toEqual(want.slice(0, 50));
        const th = page.locator(`table.requests-table thead th.c-${c.param === 'time' ? 'time' : c.param}`);
        expect(await th.getAttribute('aria-sort')).toBe(dir === 'asc' ? 'ascending' : 'descending');
        await loadAll();
        expect([c.param, dir, await shownIds()]).toEqual([c.param, dir, want]);
      }
    }
  }, 120_000);

  it('keeps the sort in the address across a reload and a filter, and says the order', async () => {
    await page.goto(`${h.url}/requests?sort=latency:asc`);
    await page.getByText('Every call through keyrelay, fastest first.').waitFor();
    await expect.poll(shownIds).toEqual(expected((r) => r.latency_ms, 'asc').slice(0, 50));
    await page.getByLabel('Model').fill('gpt');
    await expect.poll(() => new URL(page.url()).searchParams.get('model')).toBe('gpt');
    expect(new URL(page.url()).searchParams.get('sort')).toBe('latency:asc');
    // Live follows new rows newest first only.
    expect(await page.getByRole('button', { name: 'Live' }).isDisabled()).toBe(true);
    const bad = await page.request.get(`${h.url}/api/console/requests?sort=price:up`);
    expect(bad.status()).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toContain(
      'Sort by time, cost, tokens, latency, then :asc or :desc',
    );
  });

  it('offers the sort on a phone, above the cards', async () => {
    await page.setViewportSize({ width: 390, height: 900 });
    await page.goto(`${h.url}/requests`);
    const cost = page.getByRole('button', { name: /^Cost/ });
    await cost.waitFor();
    expect(await cost.isVisible()).toBe(true);
    await cost.click();
    await expect.poll(shownIds).toEqual(expected((r) => r.cost_usd, 'desc').slice(0, 50));
    expect(await checkLayout(page, 'table.requests-table tbody tr', '.c-model', '.c-time a')).toEqual([]);
    if (SHOTS) await page.screenshot({ path: `${SHOTS}/requests-sorted-390.png` });
    for (const width of [1280, 1920]) {
      await page.setViewportSize({ width, height: 900 });
      expect(await checkLayout(page, 'table.requests-table tbody tr', '.c-model', '.c-time a')).toEqual([]);
      if (SHOTS) await page.screenshot({ path: `${SHOTS}/requests-sorted-${width}.png` });
    }
  });
});
