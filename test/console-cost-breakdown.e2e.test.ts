/**
 * The request detail shows how a cost was made: each part with its quantity and rate, the long-context
 * tier, the tool fees (priced, billed as tokens only, or without a price), and a partial cost marked as
 * such in the detail and in the request table. Real traffic through the Anthropic SDK, real Chromium.
 */
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ensureConsoleBuilt,
  findChromium,
  launchBrowser,
  signedInPage,
  VIEWPORTS,
} from './helpers/browser.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';

if (!findChromium())
  throw new Error('console-cost-breakdown.e2e: /usr/bin/chromium is missing (apt-get install chromium)');

/** Outside the repository: screenshots are looked at, never committed. */
const SHOTS = join(tmpdir(), 'keyrelay-screenshots');

async function shoot(page: Page, name: string): Promise<void> {
  mkdirSync(SHOTS, { recursive: true });
  for (const vp of [VIEWPORTS.laptop, VIEWPORTS.phone]) {
    await page.setViewportSize(vp);
    await page.waitForTimeout(250);
    await page.screenshot({ path: join(SHOTS, `${name}-${vp.width}.png`), fullPage: true });
    // The breakdown alone, at a size that can be read.
    await page
      .getByTestId('cost-breakdown')
      .locator('xpath=ancestor::section[1]')
      .screenshot({ path: join(SHOTS, `${name}-table-${vp.width}.png`) });
  }
  // Dark mode too: the breakdown uses the console's own table styles.
  await page.emulateMedia({ colorScheme: 'dark' });
  await page
    .getByTestId('cost-breakdown')
    .locator('xpath=ancestor::section[1]')
    .screenshot({ path: join(SHOTS, `${name}-table-dark-${VIEWPORTS.phone.width}.png`) });
  await page.emulateMedia({ colorScheme: 'light' });
  await page.setViewportSize(VIEWPORTS.laptop);
}

describe('the cost breakdown in the request detail', () => {
  let h: Harness;
  let browser: Browser;
  let page: Page;
  const ids: Record<string, string> = {};
  const email = 'costs@example.com';

  beforeAll(async () => {
    await ensureConsoleBuilt();
    h = await startHarness();
    const user = await h.newUser(email);
    // Sonnet 4.5 is the Claude model the price library still prices in tiers past 200k tokens (4.6 no longer);
    // by its dotted name, which the library matches too, as the SDK warns about the dashed one being retired.
    const TIERED_SONNET = 'claude-sonnet-4.5';
    const client = new Anthropic({
      apiKey: 'sk-ant-test-breakdown',
      baseURL: `${h.url}/api/proxy/anthropic`,
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': user.key },
    });
    const ask = async (
      name: string,
      tools: Anthropic.Messages.ToolUnion[],
      headers: Record<string, string>,
    ) => {
      const { response } = await client.messages
        .create(
          { model: TIERED_SONNET, max_tokens: 64, messages: [{ role: 'user', content: name }], tools },
          { headers },
        )
        .withResponse();
      ids[name] = response.headers.get('x-keyrelay-request-id')!;
    };
    await ask(
      'long',
      [
        { type: 'web_search_20250305', name: 'web_search' },
        { type: 'web_fetch_20250910', name: 'web_fetch' },
      ],
      { 'x-fake-tool-calls': '2', 'x-fake-usage': JSON.stringify({ input_tokens: 240_000 }) },
    );
    await ask('code', [{ type: 'code_execution_20250825', name: 'code_execution' }], {});
    await h.flushLog();
    browser = await launchBrowser();
    page = await signedInPage(browser, h.url, email, VIEWPORTS.laptop);
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  it('lists each part with its rate, the tier past 200k tokens and the tool fees', async () => {
    await page.goto(`${h.url}/requests/${ids.long}`);
    const table = page.getByTestId('cost-breakdown');
    await table.waitFor();
    const rows = await table.locator('tbody tr').allInnerTexts();
    const row = (label: string) => rows.find((r) => r.startsWith(label)) ?? '';
    expect(row('Input *')).toContain('$6 / 1M');
    expect(await page.getByTestId('cost-tier').innerText()).toMatch(/240,015 input tokens passed 200,000/);
    expect(row('Output *')).toContain('$22.5 / 1M');
    expect(row('Web searches')).toMatch(/2\s+\$10 \/ 1K\s+\$0\.02/);
    expect(row('Web fetches')).toMatch(/2\s+\$0 each\s+\$0\.00/);
    expect(await page.getByTestId('detail-price-source').innerText()).toMatch(/^Priced with genai-prices@/);
    await shoot(page, 'cost-breakdown-tier');
  });

  it('marks a partial cost, naming the fee without a price, in the detail and in the table', async () => {
    await page.goto(`${h.url}/requests/${ids.code}`);
    await page.getByTestId('cost-breakdown').waitFor();
    expect(await page.getByTestId('detail-cost').innerText()).toMatch(/^\$[\d.]+\s*partial$/);
    expect(await page.getByTestId('detail-price-source').innerText()).toMatch(
      /^At least this much: genai-prices@\S+ has no price for code_execution_containers ×1/,
    );
    const missing = page
      .getByTestId('cost-breakdown')
      .locator('tr', { hasText: 'Code execution containers' });
    expect(await missing.innerText()).toMatch(/no price\s+not priced/);
    await shoot(page, 'cost-breakdown-partial');

    await page.goto(`${h.url}/requests`);
    const cost = page.locator('table.requests-table tbody tr.clickable td.c-cost');
    await expect.poll(() => cost.count()).toBe(2);
    const texts = await cost.allInnerTexts();
    expect(texts.filter((t) => t.endsWith('+'))).toHaveLength(1);
    expect(await cost.first().getAttribute('title')).toMatch(/^partial: /);

    // Totals say how many of their calls are partial: the sum is a lower bound.
    await page.goto(`${h.url}/usage`);
    await page.getByText('1 partial').first().waitFor();
    mkdirSync(SHOTS, { recursive: true });
    for (const vp of [VIEWPORTS.laptop, VIEWPORTS.phone]) {
      await page.setViewportSize(vp);
      await page.waitForTimeout(250);
      await page.screenshot({ path: join(SHOTS, `usage-partial-${vp.width}.png`), fullPage: true });
    }
  });
});
