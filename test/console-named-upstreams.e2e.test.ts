/**
 * A deployment's named upstreams (KEYRELAY_UPSTREAMS) in the console, in a real browser: a key's Limits
 * dialog offers them beside OpenAI and Anthropic, the request log filters and labels their rows.
 */
import OpenAI from 'openai';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOpenRouter } from './fakes/compatible.js';
import type { FakeUpstream } from './fakes/index.js';
import { ensureConsoleBuilt, findChromium, launchBrowser, screenshotBothWidths } from './helpers/browser.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';

const chromium = findChromium();
if (!chromium)
  throw new Error('console-named-upstreams.e2e: /usr/bin/chromium is missing (apt-get install chromium)');

describe('named upstreams in the console', () => {
  let h: Harness;
  let openrouter: FakeUpstream;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    await ensureConsoleBuilt();
    openrouter = await startFakeOpenRouter();
    h = await startHarness({
      KEYRELAY_UPSTREAMS: JSON.stringify({
        openrouter: { shape: 'openai', origin: openrouter.url, kind: 'openrouter' },
      }),
    });
    browser = await launchBrowser();
    page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await h?.close();
    await openrouter?.close();
  });

  it('offers them in a key’s allowlist and in the request log', async () => {
    const me = await h.newUser('routes@example.com');
    const client = new OpenAI({
      baseURL: `${h.url}/api/proxy/openrouter/api/v1`,
      apiKey: 'sk-or-v1-fake',
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': me.key },
    });
    await client.chat.completions.create({
      model: 'anthropic/claude-sonnet-4-5',
      messages: [{ role: 'user', content: 'hi' }],
    });
    await h.flushLog();

    await page.goto(`${h.url}/login`);
    await page.getByLabel('Email').fill('routes@example.com');
    await page.getByLabel('Password').fill('correct horse battery');
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();

    await page.goto(`${h.url}/keys`);
    await page.getByRole('button', { name: 'Limits for default' }).click();
    const dialog = page.getByRole('dialog', { name: 'Limits for “default”' });
    await dialog.getByLabel('openrouter').check();
    await screenshotBothWidths(page, 'limits-named-upstream');
    const patch = page.waitForRequest((r) => r.method() === 'PATCH');
    await dialog.getByRole('button', { name: 'Save limits' }).click();
    expect((await patch).postDataJSON()).toEqual({ allowed_providers: ['openrouter'] });
    await dialog.waitFor({ state: 'hidden' });
    const row = page.locator('tr', { hasText: 'default' });
    await row.getByText('openrouter only').waitFor();

    // The key may use OpenRouter alone now.
    await expect(
      client.chat.completions.create({
        model: 'anthropic/claude-sonnet-4-5',
        messages: [{ role: 'user', content: 'hi' }],
      }),
    ).resolves.toMatchObject({ model: 'anthropic/claude-sonnet-4-5' });

    await page.goto(`${h.url}/requests`);
    await page.getByLabel('Provider').selectOption('openrouter');
    await expect.poll(() => page.url()).toContain('provider=openrouter');
    const cells = page.locator('table.requests-table tbody tr.clickable');
    await expect.poll(() => cells.count()).toBe(2);
    expect(await cells.first().textContent()).toContain('openrouter');
  }, 120_000);
});
