/**
 * Sign-up no longer tells whether an address has an account, so the console is where the
 * owner learns of an attempt on theirs: at the next sign-in, once. Driven in a real browser: the person who
 * tried is told to log in instead, the owner sees the attempt after logging in, and an account created by
 * sign-up whose first sign-in happens on the login page still gets its default key shown.
 */
import type { Browser, BrowserContext } from 'playwright-core';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureConsoleBuilt, findChromium, launchBrowser, SCREENSHOT_DIR } from './helpers/browser.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';

const chromium = findChromium();
// Never skipped: without Chromium this fails, as the README's test section says (apt-get install chromium).
if (!chromium)
  throw new Error('console-signup-notice.e2e: /usr/bin/chromium is missing (apt-get install chromium)');

const OWNER = 'owner@example.com';
const PASSWORD = 'owner password 1';

describe('sign-up attempts on a taken address, in the console', () => {
  let h: Harness;
  let browser: Browser;
  const contexts: BrowserContext[] = [];
  const freshPage = async () => {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    contexts.push(ctx);
    return ctx.newPage();
  };

  beforeAll(async () => {
    await ensureConsoleBuilt();
    h = await startHarness();
    browser = await launchBrowser();
  }, 60_000);

  afterAll(async () => {
    for (const c of contexts) await c.close();
    await browser?.close();
    await h?.close();
  });

  it('shows the default key at the first sign-in, also when that happens on the login page', async () => {
    // Signed up elsewhere (another tab, a script): sign-up opens no session and returns no key.
    const res = await request(`${h.url}/api/console/signup`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: OWNER, password: PASSWORD }),
    });
    expect(res.statusCode).toBe(202);
    await res.body.dump();

    const page = await freshPage();
    await page.goto(`${h.url}/login`);
    await page.getByLabel('Email').fill(OWNER);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Log in' }).click();
    const key = await page.getByTestId('full-key').textContent();
    expect(key).toMatch(/kr_[0-9A-Za-z]{49}/);
  });

  it('tells the person signing up to log in, and the owner of the attempt at their next sign-in, once', async () => {
    const intruder = await freshPage();
    await intruder.goto(`${h.url}/signup`);
    await intruder.getByLabel('Email').fill(OWNER);
    await intruder.getByLabel('Password').fill('somebody else 22');
    await intruder.getByRole('button', { name: 'Create account' }).click();
    await intruder.getByText('already has an account').waitFor();
    expect(new URL(intruder.url()).pathname).toBe('/signup');

    const owner = await freshPage();
    await owner.goto(`${h.url}/login`);
    await owner.getByLabel('Email').fill(OWNER);
    await owner.getByLabel('Password').fill(PASSWORD);
    await owner.getByRole('button', { name: 'Log in' }).click();
    const notice = owner.getByTestId('signup-notices');
    await notice.waitFor();
    expect(await notice.textContent()).toContain('Someone tried to sign up with your email address');
    // The key was shown at the first sign-in; this one reveals nothing.
    expect(await owner.getByTestId('full-key').count()).toBe(0);
    await owner.screenshot({ path: `${SCREENSHOT_DIR}/signup-notice-1280.png` });
    await notice.getByRole('button', { name: 'Dismiss' }).click();
    await notice.waitFor({ state: 'detached' });

    // Told once: the next sign-in has nothing to say.
    const again = await freshPage();
    await again.goto(`${h.url}/login`);
    await again.getByLabel('Email').fill(OWNER);
    await again.getByLabel('Password').fill(PASSWORD);
    await again.getByRole('button', { name: 'Log in' }).click();
    await again.getByRole('link', { name: 'Keys' }).first().waitFor();
    expect(await again.getByTestId('signup-notices').count()).toBe(0);
  });
});
