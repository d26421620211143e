/**
 * Alerts in a real browser: an owner adds a budget rule on the Alerts page, a call crosses it, the delivery
 * reaches a receiver started here and shows in the page's delivery log; a refused URL shows the server's
 * reason in the form; turning a rule off and deleting it. Screenshots at 1280 and 390 px go to
 * test-results/screenshots.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
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

if (!findChromium()) throw new Error('console-alerts.e2e: /usr/bin/chromium is missing');

describe('the Alerts page', () => {
  let h: Harness;
  let browser: Browser;
  let page: Page;
  let receiver: Server;
  let hookUrl = '';
  const got: string[] = [];
  let user: { key: string; accountId: string };

  beforeAll(async () => {
    await ensureConsoleBuilt();
    receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        got.push(body);
        res.end('ok');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    h = await startHarness({}, { alerts: { intervalMs: 3_600_000, retryDelaysMs: [50], timeoutMs: 1_000 } });
    user = await h.newUser('alerts-owner@example.com');
    browser = await launchBrowser();
    page = await signedInPage(browser, h.url, 'alerts-owner@example.com');
  });
  afterAll(async () => {
    await browser?.close();
    await h?.close();
    await new Promise<void>((r) => receiver.close(() => r()));
  });

  async function addRule(name: string, url: string) {
    await page.getByLabel('Name').fill(name);
    await page.getByLabel('Budget (USD)').fill('0.000001');
    await page.getByLabel('Thresholds (%)').fill('100');
    await page.getByLabel('Webhook URL').fill(url);
    await page.getByRole('button', { name: 'Add rule' }).click();
  }

  it('shows why a private URL is refused, then adds a rule and lists its delivery', async () => {
    await page.goto(`${h.url}/alerts`);
    await page.getByRole('heading', { name: 'Alerts' }).waitFor();
    await page.getByText('No alert rules').waitFor();
    await addRule('Monthly budget', hookUrl);
    await expect
      .poll(() => page.getByRole('alert').textContent(), { timeout: 10_000 })
      .toMatch(/loopback or private address/);

    await h.kr.services.configStore.setSetting('alerts_allow_private_targets', 'true');
    await page.getByRole('button', { name: 'Add rule' }).click();
    const row = page.locator('tr[data-rule="Monthly budget"]');
    await row.waitFor();
    expect(await row.textContent()).toContain('whsec_');

    await new OpenAI({
      apiKey: 'sk-test',
      baseURL: `${h.url}/api/proxy/openai/v1`,
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': user.key },
    }).chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
    await h.flushLog();
    await h.kr.services.alerts.runOnce();
    await expect.poll(() => got.length, { timeout: 10_000 }).toBe(1);

    await expect
      .poll(
        async () => {
          await page.reload();
          await page.getByRole('heading', { name: 'Deliveries' }).waitFor();
          return page.locator('tr[data-state="delivered"]').count();
        },
        { timeout: 15_000 },
      )
      .toBe(1);
    const delivered = await page.locator('tr[data-state="delivered"]').textContent();
    expect(delivered).toContain('Monthly budget');
    expect(delivered).toContain('200');
    await screenshotBothWidths(page, 'alerts');
  });

  it('turns a rule off and deletes it', async () => {
    await page.goto(`${h.url}/alerts`);
    const row = page.locator('tr[data-rule="Monthly budget"]');
    await row.getByRole('button', { name: 'Turn off' }).click();
    await row.getByText('(off)').waitFor();
    const rules = await h.kr.services.configStore.listAlertRules(user.accountId);
    expect(rules.map((r) => r.enabled)).toEqual([false]);
    await row.getByRole('button', { name: 'Delete' }).click();
    await page.getByText('No alert rules').waitFor();
    expect(await h.kr.services.configStore.listAlertRules(user.accountId)).toEqual([]);
  });
});
