/**
 * A key's caps per end user in the console's Limits dialog, in real Chromium against keyrelay with SQLite:
 * set, saved as the PATCH the console API takes, summarised in the key list, and enforced on the next call
 * through the OpenAI SDK; cleared again from the same dialog.
 */
import OpenAI from 'openai';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureConsoleBuilt, findChromium, launchBrowser, signedInPage } from './helpers/browser.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';

if (!findChromium())
  throw new Error('console-end-user-caps.e2e: /usr/bin/chromium is missing (apt-get install chromium)');

const SHOTS = process.env.KR_SHOTS_DIR; // set to a /tmp folder to keep screenshots for looking at

describe('caps per end user in the Limits dialog', () => {
  let h: Harness;
  let browser: Browser;
  let page: Page;
  let user: { accountId: string; keyId: string; key: string };
  const email = 'end-user-caps@example.com';

  beforeAll(async () => {
    await ensureConsoleBuilt();
    h = await startHarness();
    user = await h.newUser(email);
    browser = await launchBrowser();
    page = await signedInPage(browser, h.url, email, { width: 1280, height: 900 });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  it('sets an rpm and a hard daily budget per end user, shows them, enforces them, and clears them', async () => {
    await page.goto(`${h.url}/keys`);
    const row = page.locator(`tr[data-key-id="${user.keyId}"]`);
    await row.getByRole('button', { name: /^Limits for / }).click();
    const dialog = page.getByRole('dialog', { name: /Limits for/ });
    await dialog.getByLabel('Calls per minute per end user').fill('2');
    await dialog.getByLabel('Budget per end user (USD)').fill('3');
    await dialog.getByLabel('Period of the budget per end user').selectOption('day');
    await dialog.getByLabel('Mode of the budget per end user').selectOption('hard');
    await dialog.getByText('Hard: reserved per request').waitFor();
    if (SHOTS) {
      for (const width of [1280, 390]) {
        await page.setViewportSize({ width, height: 900 });
        await page.screenshot({ path: `${SHOTS}/end-user-caps-${width}.png`, fullPage: true });
      }
      await page.setViewportSize({ width: 1280, height: 900 });
    }
    const patch = page.waitForRequest((r) => r.method() === 'PATCH');
    await dialog.getByRole('button', { name: 'Save limits' }).click();
    expect((await patch).postDataJSON()).toEqual({
      user_rate_limit_rpm: 2,
      user_budget_mode: 'hard',
      user_budget_usd: 3,
      user_budget_period: 'day',
    });
    await dialog.waitFor({ state: 'detached' });
    await row.getByText('2 rpm per end user').waitFor();
    await row.getByText('$3/day per end user (hard)').waitFor();
    expect(await h.kr.services.configStore.getKey(user.keyId)).toMatchObject({
      user_rate_limit_rpm: 2,
      user_budget_usd: 3,
      user_budget_period: 'day',
      user_budget_mode: 'hard',
    });

    // Enforced on the next calls: the third from one end user is refused, another end user is not.
    const c = new OpenAI({
      apiKey: 'sk-test-caps',
      baseURL: `${h.url}/api/proxy/openai/v1`,
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': user.key },
    });
    const ask = (who: string) =>
      c.chat.completions.create(
        { model: 'gpt-4o-mini', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] },
        { headers: { 'proxy-user': who } },
      );
    await ask('ann');
    await ask('ann');
    await expect(ask('ann')).rejects.toMatchObject({ status: 429 });
    await ask('ben');

    await row.getByRole('button', { name: /^Limits for / }).click();
    expect(await dialog.getByLabel('Calls per minute per end user').inputValue()).toBe('2');
    await dialog.getByLabel('Calls per minute per end user').fill('');
    await dialog.getByLabel('Budget per end user (USD)').fill('');
    const cleared = page.waitForRequest((r) => r.method() === 'PATCH');
    await dialog.getByRole('button', { name: 'Save limits' }).click();
    expect((await cleared).postDataJSON()).toEqual({ user_rate_limit_rpm: null, user_budget_usd: null });
    await dialog.waitFor({ state: 'detached' });
    await expect(ask('ann')).resolves.toBeDefined();
  });
});
