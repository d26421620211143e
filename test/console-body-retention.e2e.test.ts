/**
 * Body retention as an account sets it: on the console's Settings page, "Keep request bodies for N days",
 * stored through the console API, applied by the retention job to that account's rows alone; the request
 * detail page then shows the row without its bodies.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRetention } from '../src/log/retention.js';
import { ensureConsoleBuilt, findChromium, launchBrowser, screenshotBothWidths } from './helpers/browser.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { makeLogRow } from './helpers/log-rows.js';

const chromium = findChromium();
if (!chromium)
  throw new Error('console-body-retention.e2e: /usr/bin/chromium is missing (apt-get install chromium)');

const DAY = 86_400_000;

describe('keeping request bodies for fewer days than the rows', () => {
  let h: Harness;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    await ensureConsoleBuilt();
    h = await startHarness();
    browser = await launchBrowser();
    page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  it('is set on the Settings page and drops only that account’s older bodies', async () => {
    const me = await h.newUser('bodies@example.com');
    const other = await h.newUser('others@example.com');
    const now = Date.now();
    const old = makeLogRow({
      account_id: me.accountId,
      key_id: me.keyId,
      at: now - 3 * DAY,
      request_body: '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"kookaburra"}]}',
    });
    const fresh = makeLogRow({ account_id: me.accountId, key_id: me.keyId, at: now - DAY / 2 });
    const othersOld = makeLogRow({ account_id: other.accountId, key_id: other.keyId, at: now - 3 * DAY });
    await h.kr.services.logStore.insertBatch([old, fresh, othersOld]);

    await page.goto(`${h.url}/login`);
    await page.getByLabel('Email').fill('bodies@example.com');
    await page.getByLabel('Password').fill('correct horse battery');
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await page.goto(`${h.url}/settings`);
    const field = page.getByLabel('Keep request bodies for');
    await expect.poll(() => field.isEnabled()).toBe(true);
    expect(await field.inputValue()).toBe('');
    await field.fill('99999');
    await page.getByText('A whole number of days from 0 to 3,650.').waitFor();
    await field.fill('2');
    const put = page.waitForRequest((r) => r.method() === 'PUT' && r.url().endsWith('/api/console/settings'));
    await page.getByRole('button', { name: 'Save' }).click();
    expect((await put).postDataJSON()).toEqual({ body_retention_days: 2 });
    await page.getByText('Bodies older than 2 days are dropped within the hour.').waitFor();
    await screenshotBothWidths(page, 'settings-body-retention');
    // A reload shows what is stored.
    await page.reload();
    await expect.poll(() => page.getByLabel('Keep request bodies for').inputValue()).toBe('2');

    // The server's hourly job, run now.
    const job = startRetention(
      h.kr.services.logStore,
      h.kr.services.configStore,
      { retentionDays: 30 },
      (e) => {
        throw e;
      },
    );
    await job.runOnce();
    job.stop();
    const logStore = h.kr.services.logStore;
    expect(await logStore.getRequest(me.accountId, old.id)).toMatchObject({
      id: old.id,
      model: old.model,
      request_body: null,
      response_body: null,
    });
    expect((await logStore.getRequest(me.accountId, fresh.id))?.request_body).toBe(fresh.request_body);
    expect((await logStore.getRequest(other.accountId, othersOld.id))?.request_body).toBe(
      othersOld.request_body,
    );

    await page.goto(`${h.url}/requests/${old.id}`);
    await page.getByText(old.model!).first().waitFor();
    expect(await page.getByText('kookaburra').count()).toBe(0);

    // Emptied, bodies are kept as long as the rows again.
    await page.goto(`${h.url}/settings`);
    await expect.poll(() => page.getByLabel('Keep request bodies for').inputValue()).toBe('2');
    await page.getByLabel('Keep request bodies for').fill('');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByText('Bodies are kept as long as their requests.').waitFor();
    expect(await h.kr.services.configStore.getAccountSettings(me.accountId)).toEqual({
      body_retention_days: null,
    });
  }, 120_000);
});
