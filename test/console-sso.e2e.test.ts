/**
 * Single sign-on in a real browser against a real OpenID Connect provider (oidc-provider on 127.0.0.1): the
 * owner sets up the organization's connection on the Team page; a person signs in with "Sign in with SSO",
 * through the provider's own sign-in form, and lands in the console as a new member; a person of another
 * domain is sent back to the login page with the reason; with SSO only, a member's password is refused.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ensureConsoleBuilt,
  findChromium,
  launchBrowser,
  screenshotBothWidths,
  signedInPage,
  VIEWPORTS,
} from './helpers/browser.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { startIdp, type Idp } from './helpers/oidc-idp.js';

if (!findChromium())
  throw new Error('console-sso.e2e: /usr/bin/chromium is missing (apt-get install chromium)');

const PASSWORD = 'correct horse battery';
const SECRET = 'browser-test-client-secret';

describe('single sign-on in the console', () => {
  let h: Harness;
  let idp: Idp;
  let browser: Browser;
  let owner: Page;
  let acme: string;

  const api = async (page: Page, path: string) => {
    const r = await page.request.get(`${h.url}/api/console${path}`);
    return { status: r.status(), json: (await r.json()) as Record<string, unknown> };
  };

  /** From the console's login page, through the provider's sign-in form, back to keyrelay. */
  async function signInWithSso(page: Page, email: string, login: string): Promise<void> {
    await page.goto(`${h.url}/login`);
    await page.getByLabel('Email').fill(email);
    await page.getByRole('button', { name: 'Sign in with SSO' }).click();
    await page.getByRole('heading', { name: 'Example IdP' }).waitFor();
    expect(new URL(page.url()).origin).toBe(idp.issuer);
    await page.getByLabel('Username').fill(login);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in to Example IdP' }).click();
    await page.waitForURL((u) => u.origin === h.url);
  }

  beforeAll(async () => {
    await ensureConsoleBuilt();
    h = await startHarness();
    idp = await startIdp({
      clients: [
        {
          client_id: 'keyrelay',
          client_secret: SECRET,
          redirect_uris: [`${h.url}/api/console/sso/callback`],
        },
      ],
      users: {
        alice: { password: PASSWORD, email: 'alice@acme.test' },
        mallory: { password: PASSWORD, email: 'mallory@elsewhere.test' },
      },
    });
    browser = await launchBrowser();
    await h.newUser('owner@acme.test');
    owner = await signedInPage(browser, h.url, 'owner@acme.test');
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await idp?.close();
    await h?.close();
  });

  it('the owner sets up single sign-on on the Team page; the secret is never shown again', async () => {
    await owner.goto(`${h.url}/team`);
    await owner.getByLabel('Name').fill('Acme');
    await owner.getByRole('button', { name: 'Create', exact: true }).click();
    await owner.getByRole('heading', { name: 'Acme' }).waitFor();
    acme = ((await api(owner, '/orgs')).json.orgs as { id: string; name: string }[]).find(
      (o) => o.name === 'Acme',
    )!.id;
    await owner.getByRole('heading', { name: 'Single sign-on' }).waitFor();
    expect(await owner.getByTestId('sso-redirect-uri').textContent()).toBe(
      `${h.url}/api/console/sso/callback`,
    );
    await owner.getByLabel('Issuer URL').fill(idp.issuer);
    await owner.getByLabel('Client ID').fill('keyrelay');
    await owner.getByLabel('Client secret').fill(SECRET);
    await owner.getByLabel('Email domains').fill('acme.test');
    await owner.getByLabel('Role at first sign-in').selectOption('member');
    await owner.getByRole('button', { name: 'Save single sign-on' }).click();
    await owner.getByText('Single sign-on saved.').waitFor();
    await owner.reload();
    await expect.poll(() => owner.getByLabel('Issuer URL').inputValue()).toBe(idp.issuer);
    expect(await owner.getByLabel('Client secret').inputValue()).toBe('');
    expect(await owner.getByLabel('Client secret').getAttribute('placeholder')).toMatch(/Stored/);
    expect(await owner.content()).not.toContain(SECRET);
    await screenshotBothWidths(owner, 'sso-settings');
  });

  it('a first sign-in through the provider makes a member, signed in to the console', async () => {
    const page = await (await browser.newContext({ viewport: VIEWPORTS.laptop })).newPage();
    await page.goto(`${h.url}/login`);
    await page.getByRole('button', { name: 'Sign in with SSO' }).waitFor();
    await screenshotBothWidths(page, 'login-sso');
    await signInWithSso(page, 'alice@acme.test', 'alice');
    await page.getByRole('link', { name: 'Team' }).first().waitFor();
    expect((await api(page, '/me')).json.account).toMatchObject({ email: 'alice@acme.test' });
    const orgs = (await api(page, '/orgs')).json.orgs as { id: string; role: string }[];
    expect(orgs.find((o) => o.id === acme)).toMatchObject({ role: 'member' });
    const audit = await api(owner, `/orgs/${acme}/audit?actor=alice@acme.test`);
    const actions = (audit.json.entries as { action: string }[]).map((e) => e.action);
    expect(actions).toContain('member.join');
    expect(actions).toContain('sign_in');
  });

  it('a person of another domain is sent back to the login page with the reason', async () => {
    const page = await (await browser.newContext({ viewport: VIEWPORTS.laptop })).newPage();
    await signInWithSso(page, 'alice@acme.test', 'mallory');
    await page.waitForURL(/\/login\?sso_error=domain$/);
    await page.getByTestId('sso-error').waitFor();
    expect(await page.getByTestId('sso-error').textContent()).toMatch(/not one this organization signs in/);
    expect((await api(page, '/me')).status).toBe(401);
    await screenshotBothWidths(page, 'login-sso-error');
  });

  it("with SSO only, a member's password is refused and the page says to use SSO", async () => {
    await owner.goto(`${h.url}/team`);
    await owner.getByLabel(/SSO only/).check();
    await owner.getByRole('button', { name: 'Save single sign-on' }).click();
    await owner.getByText('Single sign-on saved.').waitFor();

    await h.newUser('bob@acme.test');
    const bobId = (await h.kr.services.configStore.getAccountByEmail('bob@acme.test'))!.id;
    await h.kr.services.configStore.setMember(acme, bobId, 'member');
    const page = await (await browser.newContext({ viewport: VIEWPORTS.laptop })).newPage();
    await page.goto(`${h.url}/login`);
    await page.getByLabel('Email').fill('bob@acme.test');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByText(/signs in with single sign-on/).waitFor();
    expect((await api(page, '/me')).status).toBe(401);
  });
});
