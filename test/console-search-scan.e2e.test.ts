/**
 * The Requests page with the log's search index off (KEYRELAY_LOG_SEARCH=false): each page of a search reads
 * a bounded window of the newest rows, so a first page can be empty and still have more to read. The page
 * must say so and offer to search older rows, not claim that nothing matches. Real Chromium, real SQLite.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ensureConsoleBuilt,
  findChromium,
  launchBrowser,
  screenshotBothWidths,
  signedInPage,
} from './helpers/browser.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { makeLogRow } from './helpers/log-rows.js';

if (!findChromium())
  throw new Error('console-search-scan.e2e: /usr/bin/chromium is missing (apt-get install chromium)');

describe('Requests search without the index', () => {
  let h: Harness;
  let browser: Browser;
  let page: Page;
  const email = 'scan@example.com';

  beforeAll(async () => {
    await ensureConsoleBuilt();
    h = await startHarness({ KEYRELAY_LOG_SEARCH: 'false' }, { logSearch: { scanRows: 5 } });
    const account = await h.newUser(email);
    const now = Date.now();
    // The one match is the oldest of 12 rows: three windows of five newer rows lie in front of it.
    await h.kr.services.logStore.insertBatch(
      Array.from({ length: 12 }, (_, i) =>
        makeLogRow({
          at: now - 60_000 - i * 1_000,
          account_id: account.accountId,
          key_id: account.keyId,
          session: i === 11 ? 'needle-ibis' : `session-${i}`,
        }),
      ),
    );
    browser = await launchBrowser();
    page = await signedInPage(browser, h.url, email, { width: 1280, height: 800 });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  it('says the newest rows hold no match and searches older ones on request, until it finds it', async () => {
    await page.goto(`${h.url}/requests?q=ibis`);
    await page.getByText('No matches in the newest requests searched so far.').waitFor();
    expect(await page.getByText('No requests match these filters').count()).toBe(0);
    await screenshotBothWidths(page, 'requests-search-scan');
    const older = page.getByRole('button', { name: 'Search older requests' });
    for (
      let i = 0;
      i < 5 && (await page.locator('table.requests-table tbody tr.clickable').count()) === 0;
      i++
    ) {
      await older.click();
      await page.waitForFunction(() => !document.querySelector('.load-more button[disabled]'));
    }
    await expect.poll(() => page.locator('table.requests-table tbody tr.clickable').count()).toBe(1);
    await page.getByText('end of log').waitFor();
  });
});
