/**
 * Service keys and audit retention in a real browser: an admin makes a service key on the Keys page, a
 * member neither sees one nor is offered one, the key calls through the official SDK and keeps working once
 * its creator is removed; the owner sets how long the audit log keeps entries and the retention job drops
 * the older ones. Screenshots at 1280 and 390 px go to test-results/screenshots.
 */
import OpenAI from 'openai';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRetention } from '../src/log/retention.js';
import {
  ensureConsoleBuilt,
  findChromium,
  launchBrowser,
  screenshotBothWidths,
  signedInPage,
} from './helpers/browser.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';

if (!findChromium()) throw new Error('console-service-keys.e2e: /usr/bin/chromium is missing');

const DAY = 86_400_000;

describe('service keys and audit retention', () => {
  let h: Harness;
  let browser: Browser;
  let owner: Page;
  let admin: Page;
  let member: Page;
  let acme = '';
  let adminDefaultKey = '';
  let serviceKey = '';

  const chat = (key: string) =>
    new OpenAI({
      apiKey: 'sk-fake',
      baseURL: `${h.url}/api/proxy/openai/v1`,
      defaultHeaders: { 'proxy-api-key': key },
      maxRetries: 0,
    }).chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });

  /** A page signed in with Acme picked in the organization switcher. */
  async function inAcme(email: string): Promise<Page> {
    const page = await signedInPage(browser, h.url, email);
    await page.goto(`${h.url}/`);
    await page.evaluate((id) => localStorage.setItem('keyrelay.org', id), acme);
    return page;
  }

  beforeAll(async () => {
    await ensureConsoleBuilt();
    h = await startHarness();
    browser = await launchBrowser();
    const o = await h.newUser('owner@acme.test');
    const a = await h.newUser('admin@acme.test');
    const m = await h.newUser('member@acme.test');
    const store = h.kr.services.configStore;
    acme = (await store.createOrg({ id: 'acme-org', name: 'Acme', owner_id: o.accountId })).id;
    await store.setMember(acme, a.accountId, 'admin');
    await store.setMember(acme, m.accountId, 'member');
    const held = await h.kr.services.configStore.createKey({
      id: 'admin-held',
      account_id: a.accountId,
      org_id: acme,
      name: 'admin laptop',
      hash: 'x'.repeat(64),
      hint: 'kr_…',
    });
    adminDefaultKey = held.id;
    owner = await inAcme('owner@acme.test');
    admin = await inAcme('admin@acme.test');
    member = await inAcme('member@acme.test');
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  it('an admin creates a service key on the Keys page; it is listed as one and calls through the SDK', async () => {
    await admin.goto(`${h.url}/keys`);
    await admin.locator('[data-key-id]').first().waitFor();
    await admin.getByRole('button', { name: 'Create key' }).first().click();
    await admin.getByLabel('Name', { exact: true }).fill('ci pipeline');
    await admin.getByLabel('Service key').check();
    await screenshotBothWidths(admin, 'keys-create-service');
    await admin.getByRole('button', { name: 'Create key' }).last().click();
    serviceKey = (await admin.getByTestId('full-key').textContent())!;
    expect(serviceKey).toMatch(/^kr_/);
    await admin.getByRole('dialog', { name: 'Key created' }).getByRole('button', { name: 'Done' }).click();
    const row = admin.locator('[data-key-id]', { hasText: 'ci pipeline' });
    await row.getByText('service key').waitFor();
    expect(
      await admin.locator('[data-key-id]', { hasText: 'admin laptop' }).getByText('service key').count(),
    ).toBe(0);
    await screenshotBothWidths(admin, 'keys-service');
    const answer = await chat(serviceKey);
    expect(answer.choices.length).toBeGreaterThan(0);
  });

  it('a member neither sees service keys nor is offered one', async () => {
    await member.goto(`${h.url}/keys`);
    await member.getByText('No keys yet').waitFor();
    await member.waitForLoadState('networkidle');
    // The dialog asks for the caller's role when it opens: the choice is decided once that answer is in.
    const orgs = member.waitForResponse((r) => r.url().endsWith('/api/console/orgs'));
    await member.getByRole('button', { name: 'Create key' }).first().click();
    await orgs;
    await member.getByLabel('Name', { exact: true }).waitFor();
    await member.waitForTimeout(300);
    expect(await member.getByLabel('Service key').count()).toBe(0);
    await member.getByRole('button', { name: 'Cancel' }).click();
    expect(await member.getByText('ci pipeline').count()).toBe(0);
    // Nor through the API.
    const status = await member.evaluate(async (org) => {
      const r = await fetch('/api/console/keys', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-keyrelay-org': org },
        body: JSON.stringify({ name: 'sneaky', service: true }),
      });
      return r.status;
    }, acme);
    expect(status).toBe(403);
  });

  it('removing its creator revokes what they hold, and the service key keeps working', async () => {
    await owner.goto(`${h.url}/team`);
    await owner.getByRole('button', { name: 'Remove admin@acme.test' }).click();
    await owner.getByRole('dialog').getByRole('button', { name: 'Remove member' }).click();
    await owner.locator('[data-member="admin@acme.test"]').waitFor({ state: 'detached' });
    expect((await h.kr.services.configStore.getKey(adminDefaultKey))?.revoked_at).not.toBeNull();
    const again = await chat(serviceKey);
    expect(again.choices.length).toBeGreaterThan(0);
    await owner.goto(`${h.url}/keys`);
    await owner.locator('[data-key-id]', { hasText: 'ci pipeline' }).getByText('service key').waitFor();
  });

  it('the owner sets the audit retention; the admin reads it; the retention job drops older entries', async () => {
    const store = h.kr.services.configStore;
    const old = {
      id: '00000000000000000000000000',
      org_id: acme,
      at: new Date(Date.now() - 40 * DAY).toISOString(),
      actor_id: null,
      actor_email: null,
      action: 'sign_in_failed',
      target: null,
      ip: '192.0.2.1',
      user_agent: null,
      before: null,
      after: { email: 'old@acme.test' },
    };
    await store.appendAudit(old);
    await owner.goto(`${h.url}/audit`);
    await owner.locator('[data-action="sign_in_failed"]').waitFor();
    const field = owner.getByLabel('Keep audit entries for');
    await expect.poll(() => field.isEnabled()).toBe(true);
    await field.fill('30');
    const put = owner.waitForRequest((r) => r.method() === 'PUT' && r.url().endsWith('/audit/retention'));
    await owner.getByRole('button', { name: 'Save' }).click();
    expect((await put).postDataJSON()).toEqual({ retention_days: 30 });
    await owner.getByText('Saved. Entries older than 30 days are deleted within the hour.').waitFor();
    await screenshotBothWidths(owner, 'audit-retention');
    await owner.reload();
    await expect.poll(() => owner.getByLabel('Keep audit entries for').inputValue()).toBe('30');

    // The server's hourly job, run now.
    const job = startRetention(h.kr.services.logStore, store, { retentionDays: 0 }, (e) => {
      throw e;
    });
    await job.runOnce();
    job.stop();
    await owner.reload();
    await owner.locator('[data-action="org.audit_retention"]').waitFor();
    expect(await owner.locator('[data-action="sign_in_failed"]').count()).toBe(0);

    // Another admin reads it but is not offered the field.
    const other = await h.newUser('admin2@acme.test');
    await store.setMember(acme, other.accountId, 'admin');
    const admin2 = await inAcme('admin2@acme.test');
    await admin2.goto(`${h.url}/audit`);
    await admin2
      .getByText('Entries older than 30 days are deleted within the hour. Only an owner changes this.')
      .waitFor();
    expect(await admin2.getByLabel('Keep audit entries for').count()).toBe(0);
  });
});
