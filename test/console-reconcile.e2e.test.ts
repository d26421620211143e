/**
 * The Provider bills page in a real browser: the install's owner sees keyrelay beside each provider's bill
 * (fake cost reports at the configured origins), the drift and its reasons, and a provider whose report
 * failed; the tokens beside the usage report, by model and by API key, and a key id linked to a
 * credential from the page; another account is told the page is the owner's. Screenshots at 1280 and
 * 390 px.
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeCostApi, type FakeCostApi } from './fakes/cost-reports.js';
import {
  ensureConsoleBuilt,
  findChromium,
  launchBrowser,
  screenshotBothWidths,
  signedInPage,
} from './helpers/browser.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { makeLogRow } from './helpers/log-rows.js';

const chromium = findChromium();
if (!chromium)
  throw new Error('console-reconcile.e2e: /usr/bin/chromium is missing (apt-get install chromium)');

const OPENAI_ADMIN = 'sk-admin-e2eOpenAI000000000000';
const ANTHROPIC_ADMIN = 'sk-ant-admin01-e2eAnthropic0000000';
const DAY = '2026-11-19';
// A credential's keyed fingerprint as keyrelay makes them: 32 hex digits.
const FP = '3f9a1c07e25b48d6a0c4e1f27b9d8a63';

describe('the Provider bills page', () => {
  let h: Harness;
  let browser: Browser;
  let openaiBill: FakeCostApi;
  let anthropicBill: FakeCostApi;

  beforeAll(async () => {
    await ensureConsoleBuilt();
    openaiBill = await startFakeCostApi('openai', OPENAI_ADMIN);
    anthropicBill = await startFakeCostApi('anthropic', ANTHROPIC_ADMIN);
    h = await startHarness(
      {
        KEYRELAY_OPENAI_UPSTREAM: openaiBill.url,
        KEYRELAY_ANTHROPIC_UPSTREAM: anthropicBill.url,
        OPENAI_ADMIN_KEY: OPENAI_ADMIN,
        ANTHROPIC_ADMIN_KEY: ANTHROPIC_ADMIN,
      },
      { costReportFetch: { attempts: 2, backoffMs: 10 } },
    );
    openaiBill.forwardTo = h.openai.url;
    anthropicBill.forwardTo = h.anthropic.url;
    await h.newUser('owner@example.com');
    await h.newUser('member@example.com');
    const at = Date.parse(`${DAY}T12:00:00.000Z`);
    await h.kr.services.logStore.insertBatch(
      [
        makeLogRow({ at, model: 'gpt-4o-mini', cost_usd: 1.5 }),
        makeLogRow({ at: at + 1, model: 'gpt-4o', cost_usd: 2 }),
        makeLogRow({
          at: at + 2,
          model: 'gpt-9',
          cost_usd: null,
          price_source: 'unpriced: no price for gpt-9',
        }),
        makeLogRow({ at: at + 3, provider: 'anthropic', model: 'claude-sonnet-4-20250514', cost_usd: 0.4 }),
      ].map((r) => ({ ...r, credential_fingerprint: FP })),
    );
    // makeLogRow: 120 input tokens (100 cached), 45 output.
    openaiBill.usage.set(DAY, [
      {
        model: 'gpt-4o-mini-2024-07-18',
        api_key_id: 'key_e2eProd',
        requests: 1,
        input_tokens: 120,
        cache_read_tokens: 100,
        output_tokens: 45,
      },
      {
        model: 'gpt-4o-2024-08-06',
        api_key_id: 'key_e2eProd',
        requests: 1,
        input_tokens: 120,
        cache_read_tokens: 100,
        output_tokens: 45,
      },
      {
        model: 'gpt-4o-2024-08-06',
        api_key_id: 'key_e2eLaptop',
        requests: 3,
        input_tokens: 9000,
        cache_read_tokens: 0,
        output_tokens: 1500,
      },
      {
        model: 'gpt-9',
        api_key_id: 'key_e2eProd',
        requests: 1,
        input_tokens: 120,
        cache_read_tokens: 100,
        output_tokens: 45,
      },
    ]);
    openaiBill.bills.set(DAY, [
      { model: 'gpt-4o-mini-2024-07-18', item: 'gpt-4o-mini-2024-07-18, input', usd: 1.5 },
      { model: 'gpt-4o-2024-08-06', item: 'gpt-4o-2024-08-06, input', usd: 2.75 },
      { model: 'gpt-9', item: 'gpt-9, input', usd: 0.3 },
      { model: null, item: 'web search tool calls', usd: 0.05 },
    ]);
    anthropicBill.fault = { status: 500, message: 'Internal server error' };
    browser = await launchBrowser();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await h?.close();
    await openaiBill?.close();
    await anthropicBill?.close();
  });

  it("shows the owner each provider's drift by model, with its reasons, and a failed report", async () => {
    const page = await signedInPage(browser, h.url, 'owner@example.com');
    await page.goto(`${h.url}/settings`);
    await page.getByRole('link', { name: 'Open the comparison' }).click();
    await page.waitForURL(/\/reconcile$/);
    await page.getByLabel('Day').fill(DAY);
    await page.waitForURL(new RegExp(`/reconcile\\?day=${DAY}$`));
    const openai = page.getByRole('region', { name: 'OpenAI' });
    await expect.poll(() => openai.locator('.reconcile-head').getByText('Drift').count()).toBe(1);
    const gpt4o = openai.getByRole('row').filter({ has: page.locator('code', { hasText: /^gpt-4o$/ }) });
    await expect.poll(() => gpt4o.textContent()).toContain('+$0.7500');
    expect(await gpt4o.textContent()).toContain('did not pass through keyrelay');
    const gpt9 = openai.getByRole('row').filter({ hasText: 'gpt-9' });
    expect(await gpt9.textContent()).toContain('unpriced');
    expect(await gpt9.textContent()).not.toContain('$0.00');
    expect(await openai.getByRole('row').filter({ hasText: 'Not tied to a model' }).textContent()).toContain(
      'tied to no model',
    );
    const anthropic = page.getByRole('region', { name: 'Anthropic' });
    expect(await anthropic.getByRole('alert').textContent()).toContain(
      "Anthropic's cost report failed after 2 tries: HTTP 500: Internal server error",
    );
    // Tokens: the laptop key's calls never went through keyrelay.
    const tokens = openai.getByRole('table', { name: 'OpenAI: tokens, keyrelay beside the usage report' });
    expect(await tokens.getByRole('row').filter({ hasText: 'Input' }).textContent()).toContain('+9,000');
    expect(await gpt4o.textContent()).toContain('key_e2eLaptop');
    const keys = openai.getByRole('table', { name: 'OpenAI: tokens by API key' });
    const laptop = keys.getByRole('row').filter({ hasText: 'key_e2eLaptop' });
    expect(await laptop.textContent()).toContain('traffic that did not go through keyrelay');
    // The owner links the production key id to the credential keyrelay saw; it then agrees.
    const prod = keys.getByRole('row').filter({ hasText: 'key_e2eProd' });
    await prod.getByRole('button', { name: 'Link key_e2eProd' }).click();
    await expect.poll(() => prod.getByRole('button', { name: 'Unlink key_e2eProd' }).count()).toBe(1);
    expect(await prod.textContent()).toContain('Agrees');
    expect(await prod.textContent()).toContain(FP.slice(0, 12));
    expect(await page.content()).not.toContain(OPENAI_ADMIN);
    await screenshotBothWidths(page, 'reconcile');
  });

  it('tells another account the page is the owner’s, and shows it no link', async () => {
    const page = await signedInPage(browser, h.url, 'member@example.com');
    await page.goto(`${h.url}/settings`);
    await page.getByRole('heading', { name: 'Change password' }).waitFor();
    expect(await page.getByRole('link', { name: 'Open the comparison' }).count()).toBe(0);
    await page.goto(`${h.url}/reconcile?day=${DAY}`);
    await page.getByText("Only this keyrelay's owner sees the providers' bills").waitFor();
  });
});
