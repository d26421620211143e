/**
 * The Keys page a demanding user watches, in real Chromium against keyrelay on a real socket with SQLite:
 * a budget part-spent as spent / budget with a bar and its reset in words, a rolled pair told apart, revoked
 * keys apart and hideable, rpm and tpm headroom with when it frees, "Last used" catching up without a reload, and long names that squeeze nothing.
 */
import OpenAI from 'openai';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey, revokeKey, rollKey } from '../src/keys/actions.js';
import { ensureConsoleBuilt, findChromium, launchBrowser, signedInPage } from './helpers/browser.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { layoutAtEveryWidth } from './helpers/layout.js';
import { startEarlyInAMinute } from './helpers/minute.js';
import { makeLogRow } from './helpers/log-rows.js';

if (!findChromium())
  throw new Error('console-keys.e2e: /usr/bin/chromium is missing (apt-get install chromium)');

const SHOTS = process.env.KR_SHOTS_DIR; // set to a /tmp folder to keep screenshots for looking at
const LONG_NAME = 'n'.repeat(40) + '-' + 'm'.repeat(59); // 100 characters, few break points

describe('the Keys page', () => {
  let h: Harness;
  let browser: Browser;
  let page: Page;
  let user: { accountId: string; keyId: string; key: string };
  let cappedId = '';
  let paced = { id: '', key: '' };
  const email = 'keys-page@example.com';

  beforeAll(async () => {
    await ensureConsoleBuilt();
    h = await startHarness();
    user = await h.newUser(email);
    const { configStore, bus, logStore } = h.kr.services;
    const deps = { store: configStore, bus };
    const capped = await createKey(deps, {
      accountId: user.accountId,
      name: 'capped',
      limits: { budget_usd: 0.01, budget_period: 'day', budget_mode: 'hard', rate_limit_rpm: 60 },
    });
    cappedId = capped.view.id;
    const now = Date.now();
    await logStore.insertBatch([
      makeLogRow({ account_id: user.accountId, key_id: cappedId, at: now - 2_000, cost_usd: 0.005 }),
      makeLogRow({ account_id: user.accountId, key_id: cappedId, at: now - 1_000, cost_usd: 0.0028 }),
    ]);
    await createKey(deps, { accountId: user.accountId, name: LONG_NAME });
    const doomed = await createKey(deps, { accountId: user.accountId, name: 'revoke-me' });
    await revokeKey(deps, { orgId: user.accountId }, doomed.view.id);
    const rolling = await createKey(deps, { accountId: user.accountId, name: 'rolling' });
    await rollKey(deps, { orgId: user.accountId }, rolling.view.id, 3600);
    const pacedKey = await createKey(deps, {
      accountId: user.accountId,
      name: 'paced',
      limits: { rate_limit_rpm: 3, rate_limit_tpm: 100_000 },
    });
    paced = { id: pacedKey.view.id, key: pacedKey.key };
    browser = await launchBrowser();
    page = await signedInPage(browser, h.url, email, { width: 1280, height: 900 });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  const row = (id: string) => page.locator(`tr[data-key-id="${id}"]`);
  const rowNamed = (name: string) => page.locator('table.keys-table tbody tr', { hasText: name });

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

  it('shows a part-spent budget as spent of budget, a bar, and when it resets', async () => {
    await page.goto(`${h.url}/keys`);
    const meter = row(cappedId).getByTestId('budget-meter');
    await meter.waitFor();
    const text = (await meter.textContent()) ?? '';
    expect(text).toContain('$0.0078 of $0.01/day (hard)');
    expect(text).toMatch(/resets in (\d+ h( \d+ min)?|\d+ min( \d+ s)?|\d+ s)$/);
    const bar = row(cappedId).getByRole('meter', { name: /Budget spent/ });
    expect(await bar.getAttribute('aria-valuenow')).toBe('0.0078');
    expect(await bar.getAttribute('aria-valuemax')).toBe('0.01');
    const fill = await bar.evaluate((el) => {
      const inner = el.firstElementChild!.getBoundingClientRect().width;
      return inner / el.getBoundingClientRect().width;
    });
    expect(fill).toBeGreaterThan(0.7);
    expect(fill).toBeLessThan(0.85);
    await shoot('keys-budget');
    // The key's Limits dialog says the same above its fields.
    await page.getByRole('button', { name: 'Limits for capped' }).click();
    const dialog = page.getByRole('dialog', { name: /Limits for/ });
    await expect(dialog.getByTestId('budget-meter').textContent()).resolves.toMatch(
      /^\$0\.0078 of \$0\.01\/day \(hard\).*resets in /,
    );
    await shoot('keys-limits-dialog');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
  });

  it('shows rpm and tpm headroom: used in the last minute, a bar, and when it frees', async () => {
    const client = new OpenAI({
      apiKey: 'sk-test-keys-page',
      baseURL: `${h.url}/api/proxy/openai/v1`,
      maxRetries: 0,
      defaultHeaders: {
        'proxy-api-key': paced.key,
        'x-fake-usage': '{"prompt_tokens":900,"completion_tokens":100}',
      },
    });
    const call = () =>
      client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
    await startEarlyInAMinute();
    for (let i = 0; i < 3; i++) await call();
    const refused = await call().then(
      () => null,
      (err: unknown) => err as { status: number; headers: Headers },
    );
    expect(refused?.status).toBe(429);
    const retryAfter = Number(refused!.headers.get('retry-after'));
    const shownAt = Date.now();
    await page.goto(`${h.url}/keys`);
    const rpm = row(paced.id).getByTestId('rpm-meter');
    await rpm.waitFor();
    const text = (await rpm.textContent()) ?? '';
    expect(text).toMatch(/^3 of 3 rpmfull, next in (\d+ min( \d+ s)?|\d+ s)$/);
    // The wait shown is the refusal's retry-after, give or take the seconds between them.
    const [, min, sec] = /next in (?:(\d+) min)? ?(?:(\d+) s)?$/.exec(text)!;
    const shown = Number(min ?? 0) * 60 + Number(sec ?? 0);
    expect(Math.abs(shown + (Date.now() - shownAt) / 1000 - retryAfter)).toBeLessThanOrEqual(3);
    const bar = row(paced.id).getByRole('meter', { name: /Requests in the last minute/ });
    expect([await bar.getAttribute('aria-valuenow'), await bar.getAttribute('aria-valuemax')]).toEqual([
      '3',
      '3',
    ]);
    await expect(row(paced.id).getByTestId('tpm-meter').textContent()).resolves.toMatch(
      /^3,000 of 100,000 tpmall free in (\d+ min( \d+ s)?|\d+ s)$/,
    );
    // The bare "3 rpm" of the summary gives way to the meter.
    expect(await row(paced.id).getByText('3 rpm', { exact: true }).count()).toBe(0);
    expect(await layoutAtEveryWidth(page, 'table.keys-table tbody tr', '.key-name', 'button')).toEqual({});
    await page.setViewportSize({ width: 1280, height: 900 });
    await shoot('keys-rates');
    await page.getByRole('button', { name: 'Limits for paced' }).click();
    const dialog = page.getByRole('dialog', { name: /Limits for/ });
    await expect(dialog.getByTestId('rpm-meter').textContent()).resolves.toMatch(/^3 of 3 rpmfull, next in /);
    await expect(dialog.getByTestId('tpm-meter').textContent()).resolves.toMatch(/^3,000 of 100,000 tpm/);
    await dialog.getByRole('button', { name: 'Cancel' }).click();
  }, 120_000);

  it('keeps "No limits" on one line and a revoked key’s name apart from its hint', async () => {
    for (const width of [390, 1280, 1920]) {
      await page.setViewportSize({ width, height: 900 });
      const none = rowNamed('revoke-me').getByText('No limits');
      const lines = await none.evaluate((el) => el.getClientRects().length);
      expect([width, lines]).toEqual([width, 1]);
      const apart = await rowNamed('revoke-me').evaluate((tr) => {
        const name = tr.querySelector('.key-name')!.getBoundingClientRect();
        const hint = tr.querySelector('.key-hint')!.getBoundingClientRect();
        return hint.top >= name.bottom - 1 || hint.left >= name.right + 4;
      });
      expect([width, apart]).toEqual([width, true]);
    }
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it('tells a rolled pair apart and offers no second roll of the old key', async () => {
    await page.goto(`${h.url}/keys`);
    const rolled = rowNamed('rolling');
    // The page's first load can outlast expect.poll's one second on a busy machine; a locator waits longer.
    await rolled.nth(1).waitFor();
    expect(await rolled.count()).toBe(2);
    await rolled.getByText('old key, being replaced').waitFor();
    await rolled.getByText('new key').waitFor();
    const old = rolled.filter({ hasText: 'old key, being replaced' });
    expect(await old.getByRole('button', { name: 'Roll rolling' }).count()).toBe(0);
    const fresh = rolled.filter({ hasText: 'new key' });
    expect(await fresh.getByRole('button', { name: 'Roll rolling' }).count()).toBe(1);
  });

  it('hides revoked keys on request, and remembers it', async () => {
    await page.goto(`${h.url}/keys`);
    await rowNamed('revoke-me').waitFor();
    await page.getByLabel(/Show revoked keys \(1\)/).uncheck();
    await rowNamed('revoke-me').waitFor({ state: 'detached' });
    await page.reload();
    await row(cappedId).waitFor();
    expect(await rowNamed('revoke-me').count()).toBe(0);
    await page.getByLabel(/Show revoked keys \(1\)/).check();
    await rowNamed('revoke-me').waitFor();
  });

  it('keeps a 100-character name from squeezing the other columns, at every width', async () => {
    await page.goto(`${h.url}/keys`);
    await rowNamed(LONG_NAME).waitFor();
    expect(await layoutAtEveryWidth(page, 'table.keys-table tbody tr', '.key-name', 'button')).toEqual({});
    await page.setViewportSize({ width: 1280, height: 900 });
    const widths = await page.evaluate(() =>
      Array.from(document.querySelectorAll('table.keys-table thead th')).map(
        (th) => th.getBoundingClientRect().width,
      ),
    );
    // Name is bounded; Limits (with the budget meter) and Status keep room for their content.
    expect(widths[0]).toBeLessThan(380);
    expect(widths[1]).toBeGreaterThan(200);
  });

  it('updates "Last used" after calls, without a reload', async () => {
    await page.goto(`${h.url}/keys`);
    const used = row(user.keyId).locator('.used-cell > span').first();
    await expect(used.textContent()).resolves.toBe('never');
    const client = new OpenAI({
      apiKey: 'sk-test-keys-page',
      baseURL: `${h.url}/api/proxy/openai/v1`,
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': user.key },
    });
    for (let i = 0; i < 3; i++)
      await client.chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'hi' }],
      });
    await expect.poll(() => used.textContent(), { timeout: 60_000, interval: 1_000 }).not.toBe('never');
  }, 90_000);
});
