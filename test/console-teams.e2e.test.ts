/**
 * Teams in a real browser: an admin makes an organization and invites; the invitee signs up through the
 * link, joins, gets a key; both call with the official SDKs; each sees what their role allows, the member
 * nothing of the admin's (UI and API); removing the member revokes their key. Screenshots of the new pages
 * at 1280 and 390 px go to /tmp/keyrelay-teams-shots.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureConsoleBuilt, findChromium, launchBrowser, VIEWPORTS } from './helpers/browser.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';

if (!findChromium()) throw new Error('console-teams.e2e: /usr/bin/chromium is missing');

const SHOTS = '/tmp/keyrelay-teams-shots';
const PASSWORD = 'correct horse battery';

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

/** A console API call from the page, with its session and the organization header the console sends. */
async function apiFrom(page: Page, path: string, init: { method?: string; org?: string } = {}) {
  return page.evaluate(
    async ({ path, method, org }) => {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (org) headers['x-keyrelay-org'] = org;
      const r = await fetch(`/api/console${path}`, {
        method: method ?? 'GET',
        headers,
        body: method ? '{}' : undefined,
      });
      return { status: r.status, json: (await r.json()) as Record<string, unknown> };
    },
    { path, method: init.method, org: init.org },
  );
}

describe('an admin and a member of one organization', () => {
  let h: Harness;
  let browser: Browser;
  let admin: Page;
  let member: Page;
  let link = '';
  let acme = '';
  let memberKey = '';
  let adminKey = '';

  const openai = (key: string) =>
    new OpenAI({
      apiKey: 'sk-fake',
      baseURL: `${h.url}/api/proxy/openai/v1`,
      defaultHeaders: { 'proxy-api-key': key },
      maxRetries: 0,
    });
  const anthropic = (key: string) =>
    new Anthropic({
      apiKey: 'sk-ant-fake',
      baseURL: `${h.url}/api/proxy/anthropic`,
      defaultHeaders: { 'proxy-api-key': key },
      maxRetries: 0,
    });

  beforeAll(async () => {
    await ensureConsoleBuilt();
    h = await startHarness();
    browser = await launchBrowser();
    admin = await (await browser.newContext({ viewport: VIEWPORTS.laptop })).newPage();
    member = await (await browser.newContext({ viewport: VIEWPORTS.laptop })).newPage();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  it('the admin signs up, makes an organization and an invitation link, shown once', async () => {
    await admin.goto(`${h.url}/signup`);
    await admin.getByLabel('Email').fill('admin@acme.test');
    await admin.getByLabel('Password').fill(PASSWORD);
    await admin.getByRole('button', { name: 'Create account' }).click();
    await admin.getByTestId('full-key').waitFor();
    await admin.goto(`${h.url}/team`);
    await admin.getByRole('heading', { name: 'Personal organization' }).waitFor();
    await admin.getByLabel('Name').fill('Acme');
    await admin.getByRole('button', { name: 'Create', exact: true }).click();
    await admin.getByRole('heading', { name: 'Acme' }).waitFor();
    const orgs = (await apiFrom(admin, '/orgs')).json.orgs as { id: string; name: string }[];
    acme = orgs.find((o) => o.name === 'Acme')!.id;
    await admin.getByRole('button', { name: 'Create invite link' }).click();
    link = (await admin.getByTestId('invite-link').textContent())!;
    expect(link).toMatch(/\/invite#[A-Za-z0-9_-]{43}$/);
    await shoot(admin, 'team-admin');
    // Shown once: after a reload only the pending invitation is listed, not its link.
    await admin.reload();
    await admin.getByText('Member invitation').waitFor();
    expect(await admin.getByTestId('invite-link').count()).toBe(0);
    const created = await admin.getByRole('button', { name: 'Create key' }).count();
    expect(created).toBe(0); // the Team page has no key controls
    await admin.goto(`${h.url}/keys`);
    await admin.getByRole('button', { name: 'Create key' }).first().click();
    await admin.getByLabel('Name', { exact: true }).fill('admin-service');
    await admin.getByLabel('Name', { exact: true }).press('Enter');
    adminKey = (await admin.getByTestId('full-key').textContent())!;
    await admin.getByRole('dialog', { name: 'Key created' }).getByRole('button', { name: 'Done' }).click();
  });

  it('the invitee opens the link, signs up through it, joins and gets a key once', async () => {
    await member.goto(link);
    await member.getByRole('heading', { name: 'Join Acme' }).waitFor();
    expect(new URL(member.url()).hash).toBe('');
    await shoot(member, 'invite-signed-out');
    await member.getByRole('button', { name: 'Sign up to join' }).click();
    await member.getByLabel('Email').fill('dev@acme.test');
    await member.getByLabel('Password').fill(PASSWORD);
    await member.getByRole('button', { name: 'Create account' }).click();
    await member.getByRole('button', { name: 'Join Acme' }).click();
    await member.getByRole('heading', { name: 'You joined Acme' }).waitFor();
    memberKey = (await member.getByTestId('full-key').textContent())!;
    await shoot(member, 'invite-joined');
    await member.getByRole('button', { name: 'Open Acme' }).click();
    await member.waitForURL(`${h.url}/keys`);
    await member.locator('[data-key-id]').first().waitFor();
    // Only the member's own key in Acme.
    expect(await member.locator('[data-key-id]').count()).toBe(1);
    expect(await member.getByText('admin-service').count()).toBe(0);
  });

  it('both call with the official SDKs; each sees the rows their role allows', async () => {
    const chat = await openai(memberKey).chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(chat.choices.length).toBeGreaterThan(0);
    const msg = await anthropic(adminKey).messages.create({
      model: 'claude-3-5-haiku-latest',
      max_tokens: 16,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(msg.content.length).toBeGreaterThan(0);
    await h.flushLog();
    const memberRows = await apiFrom(member, '/requests', { org: acme });
    expect((memberRows.json.items as { provider: string }[]).map((r) => r.provider)).toEqual(['openai']);
    const adminRows = await apiFrom(admin, '/requests', { org: acme });
    expect((adminRows.json.items as { provider: string }[]).map((r) => r.provider).sort()).toEqual([
      'anthropic',
      'openai',
    ]);
    // The console shows the same: the member's Requests page lists one row.
    await member.goto(`${h.url}/requests`);
    await member.getByText('gpt-4o-mini').first().waitFor();
    expect(await member.getByText('claude-3-5-haiku-latest').count()).toBe(0);
    // The member cannot reach the admin's key or its row, nor manage members.
    const adminKeyId = (await apiFrom(admin, '/keys', { org: acme })).json.keys as {
      id: string;
      name: string;
    }[];
    const target = adminKeyId.find((k) => k.name === 'admin-service')!.id;
    expect((await apiFrom(member, `/keys/${target}/revoke`, { method: 'POST', org: acme })).status).toBe(404);
    expect((await apiFrom(member, `/orgs/${acme}/invites`)).status).toBe(403);
    await member.goto(`${h.url}/team`);
    await member.getByRole('heading', { name: 'Acme' }).waitFor();
    expect(await member.getByRole('button', { name: 'Create invite link' }).count()).toBe(0);
    expect(await member.getByRole('button', { name: /^Remove / }).count()).toBe(0);
    await shoot(member, 'team-member');
  });

  it('the admin removes the member; their key stops working at once', async () => {
    await admin.goto(`${h.url}/team`);
    await admin.getByRole('button', { name: 'Remove dev@acme.test' }).click();
    await admin.getByRole('dialog').getByRole('button', { name: 'Remove member' }).click();
    await admin.locator('[data-member="dev@acme.test"]').waitFor({ state: 'detached' });
    const refused = await openai(memberKey)
      .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(refused).toBeInstanceOf(OpenAI.AuthenticationError);
    // The audit log shows it, filtered by action; its export is the same entries as NDJSON.
    await admin.goto(`${h.url}/team`);
    await admin.getByRole('link', { name: 'Audit log' }).click();
    await admin.locator('[data-action="member.remove"]').waitFor();
    await admin.getByLabel('Action').selectOption('member.join');
    await admin.locator('[data-action="member.remove"]').waitFor({ state: 'detached' });
    expect(await admin.locator('[data-action="member.join"]').count()).toBe(1);
    await admin.getByLabel('Action').selectOption('');
    await admin.locator('[data-action="member.remove"]').waitFor();
    await shoot(admin, 'audit');
    const href = await admin.getByRole('link', { name: 'Export NDJSON' }).getAttribute('href');
    const ndjson = await admin.evaluate(async (u) => (await fetch(u!)).text(), href);
    const actions = ndjson
      .trimEnd()
      .split('\n')
      .map((l) => (JSON.parse(l) as { action: string }).action);
    expect(actions).toEqual(
      expect.arrayContaining(['org.create', 'member.invite', 'member.join', 'key.create', 'member.remove']),
    );
    await admin.emulateMedia({ colorScheme: 'dark' });
    await shoot(admin, 'audit-dark');
    await admin.goto(`${h.url}/team`);
    await admin.getByRole('heading', { name: 'Acme' }).waitFor();
    await shoot(admin, 'team-dark');
    await admin.emulateMedia({ colorScheme: 'light' });
    // The member's console falls back to their personal organization.
    await member.goto(`${h.url}/keys`);
    await member.waitForFunction(() => window.localStorage.getItem('keyrelay.org') === null);
  });

  it('the owner closes sign-up to invitations on the Settings page; a stranger is refused', async () => {
    await admin.goto(`${h.url}/settings`);
    const inviteOnly = admin.getByRole('radio', { name: /Invite only/ });
    // Checked once the server took it (the radio shows what applies, not the click).
    await inviteOnly.click();
    await expect.poll(() => inviteOnly.isChecked(), { timeout: 10_000 }).toBe(true);
    await admin.reload();
    await admin.getByRole('heading', { name: 'Sign-up' }).waitFor();
    expect(await admin.getByRole('radio', { name: /Invite only/ }).isChecked()).toBe(true);
    await shoot(admin, 'settings-signup');
    const stranger = await (await browser.newContext({ viewport: VIEWPORTS.laptop })).newPage();
    await stranger.goto(`${h.url}/signup`);
    await stranger.getByLabel('Email').fill('stranger@acme.test');
    await stranger.getByLabel('Password').fill(PASSWORD);
    await stranger.getByRole('button', { name: 'Create account' }).click();
    await stranger.getByRole('alert').waitFor();
    expect(await stranger.getByTestId('full-key').count()).toBe(0);
    // The member, not the install's owner, sees the choice but cannot change it.
    await member.goto(`${h.url}/settings`);
    await member.getByRole('heading', { name: 'Sign-up' }).waitFor();
    expect(await member.getByRole('radio', { name: /Open/ }).isDisabled()).toBe(true);
  });
});
