/**
 * Limits per member in a real browser: the owner of an organization opens a member's Limits on the Team
 * page, sets a hard budget and an rpm across their keys, and sees the spend against it; the member sees
 * their own budget on their Keys page; calls with the official SDK across two of the member's keys stop at
 * the member's rpm. Screenshots at 1280 and 390 px go to /tmp/keyrelay-member-limits-shots.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey } from '../src/keys/actions.js';
import { ensureConsoleBuilt, findChromium, launchBrowser, VIEWPORTS } from './helpers/browser.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';

if (!findChromium()) throw new Error('console-member-limits.e2e: /usr/bin/chromium is missing');

const SHOTS = '/tmp/keyrelay-member-limits-shots';
const PASSWORD = 'correct horse battery';
/** Where the console keeps the organization it is in (web/src/api.ts). */
const ORG_STORAGE = 'keyrelay.org';

async function shoot(page: Page, name: string): Promise<void> {
  mkdirSync(SHOTS, { recursive: true });
  const original = page.viewportSize();
  for (const vp of [VIEWPORTS.laptop, VIEWPORTS.phone]) {
    await page.setViewportSize(vp);
    await page.waitForTimeout(200);
    await page.screenshot({ path: join(SHOTS, `${name}-${vp.width}.png`), fullPage: true });
  }
  if (original) await page.setViewportSize(original);
}

async function signup(page: Page, base: string, email: string): Promise<string> {
  await page.goto(`${base}/signup`);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Create account' }).click();
  await page.getByTestId('full-key').waitFor();
  return page.evaluate(async () => {
    const r = await fetch('/api/console/me');
    return ((await r.json()) as { account: { id: string } }).account.id;
  });
}

describe('limits per member on the Team page', () => {
  let h: Harness;
  let browser: Browser;
  let owner: Page;
  let dev: Page;
  let org = '';
  let devId = '';

  beforeAll(async () => {
    await ensureConsoleBuilt();
    h = await startHarness();
    browser = await launchBrowser();
    owner = await (await browser.newContext({ viewport: VIEWPORTS.laptop })).newPage();
    dev = await (await browser.newContext({ viewport: VIEWPORTS.laptop })).newPage();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  it('the owner sets a member’s rpm and hard budget in the dialog; the member sees theirs; calls across keys stop', async () => {
    await signup(owner, h.url, 'owner@limits.test');
    devId = await signup(dev, h.url, 'dev@limits.test');
    await owner.goto(`${h.url}/team`);
    await owner.getByLabel('Name').fill('Limits Co');
    await owner.getByRole('button', { name: 'Create', exact: true }).click();
    await owner.getByRole('heading', { name: 'Limits Co' }).waitFor();
    org = (
      (await owner.evaluate(async () => (await fetch('/api/console/orgs')).json())) as {
        orgs: { id: string; name: string }[];
      }
    ).orgs.find((o) => o.name === 'Limits Co')!.id;
    await h.kr.services.configStore.setMember(org, devId, 'member');
    const deps = { store: h.kr.services.configStore, bus: h.kr.services.bus };
    const keys = [
      await createKey(deps, { accountId: devId, orgId: org, name: 'laptop' }),
      await createKey(deps, { accountId: devId, orgId: org, name: 'agent' }),
    ];
    const c = (k: string) =>
      new OpenAI({
        apiKey: 'sk-fake',
        baseURL: `${h.url}/api/proxy/openai/v1`,
        defaultHeaders: { 'proxy-api-key': k },
        maxRetries: 0,
      });
    const call = (k: string) =>
      c(k)
        .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
        .then(
          () => 'ok' as const,
          (e: unknown) => (e instanceof OpenAI.APIError ? e : Promise.reject(e as Error)),
        );
    expect(await call(keys[0]!.key)).toBe('ok');

    await owner.reload();
    const row = owner.locator('[data-member="dev@limits.test"]');
    await row.waitFor();
    expect(await row.getByText('None').count()).toBe(1);
    await owner.getByRole('button', { name: 'Limits of dev@limits.test' }).click();
    const dialog = owner.getByRole('dialog', { name: 'Limits for dev@limits.test' });
    await dialog.getByLabel('Requests per minute').waitFor();
    // Only what a member's limits have: no providers, models, tokens per minute or end-user caps.
    expect(await dialog.getByLabel('Tokens per minute').count()).toBe(0);
    expect(await dialog.getByText('Providers').count()).toBe(0);
    await dialog.getByLabel('Requests per minute').fill('3');
    await dialog.getByLabel('Budget (USD)').fill('25');
    await dialog.getByLabel('Budget period').selectOption('day');
    await dialog.getByLabel('Budget mode').selectOption('hard');
    await shoot(owner, 'team-member-limits-dialog');
    await dialog.getByRole('button', { name: 'Save limits' }).click();
    await dialog.waitFor({ state: 'detached' });
    await row.getByText('3 rpm · $25/day (hard)').waitFor();

    // The member's calls across both keys: one made above, before the limits; three more fit the minute.
    const got: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await call(keys[i % 2]!.key);
      got.push(r === 'ok' ? r : `${r.status}: ${r.message}`);
    }
    expect(got.slice(0, 3)).toEqual(['ok', 'ok', 'ok']);
    expect(got[3]).toMatch(/^429: /);
    expect(got[3]).toContain("Limit: 3 requests across this member's keys per minute.");

    // Opened again: the fields hold the limits, and the meter the spend of both keys.
    await h.flushLog();
    await owner.getByRole('button', { name: 'Limits of dev@limits.test' }).click();
    await dialog.getByLabel('Requests per minute').waitFor();
    expect(await dialog.getByLabel('Requests per minute').inputValue()).toBe('3');
    const meter = dialog.getByTestId('budget-meter');
    await meter.waitFor();
    expect(await meter.textContent()).toContain('of $25/day (hard)');
    await shoot(owner, 'team-member-limits-dialog-spent');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await shoot(owner, 'team-member-limits');

    // The member sees their own on the Keys page of the organization.
    await dev.evaluate(([name, id]) => localStorage.setItem(name, id), [ORG_STORAGE, org] as const);
    await dev.goto(`${h.url}/keys`);
    const note = dev.getByTestId('member-limits');
    await note.waitFor();
    expect(await note.textContent()).toContain('3 requests per minute');
    expect(await note.getByTestId('budget-meter').textContent()).toContain('of $25/day (hard)');
    // A member has no Limits action on the Team page.
    await dev.goto(`${h.url}/team`);
    await dev.getByRole('heading', { name: 'Limits Co' }).waitFor();
    expect(await dev.getByRole('button', { name: /^Limits of / }).count()).toBe(0);
    await dev.goto(`${h.url}/keys`);
    await note.waitFor();
    await shoot(dev, 'keys-member-limits');
  });
});
