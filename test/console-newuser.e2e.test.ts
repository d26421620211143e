/**
 * What a new user tripped over, each in a real browser against a fresh install: the console
 * opens on sign-up, says and enforces the server's password rule, shows the server's wait after failed
 * logins, validates beside the field, and keeps keys, tabs and messages readable on a phone.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureConsoleBuilt, findChromium, launchBrowser } from './helpers/browser.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { shootAllWidths } from './helpers/layout.js';

const chromium = findChromium();
// Never skipped: without Chromium this fails, as the README's test section says (apt-get install chromium).
if (!chromium)
  throw new Error('console-newuser.e2e: /usr/bin/chromium is missing (apt-get install chromium)');

const EMAIL = 'new@example.com';
const PASSWORD = 'ten chars!';

/** Whether `inner` lies wholly inside the viewport and does not overlap `other`. */
async function clearOf(page: Page, inner: string, other: string): Promise<string | null> {
  return page.evaluate(
    ({ inner, other }) => {
      const a = document.querySelector(inner);
      const b = document.querySelector(other);
      if (!a || !b) return 'missing element';
      const ra = a.getBoundingClientRect();
      const rb = b.getBoundingClientRect();
      const el = a as HTMLElement;
      if (el.scrollWidth > el.clientWidth + 1) return `text clipped: ${el.scrollWidth} > ${el.clientWidth}`;
      const overlap = ra.left < rb.right && rb.left < ra.right && ra.top < rb.bottom && rb.top < ra.bottom;
      if (overlap) return 'overlaps';
      if (ra.right > document.documentElement.clientWidth + 1) return 'off screen';
      return null;
    },
    { inner, other },
  );
}

describe('a new user on a fresh install', () => {
  let h: Harness;
  let browser: Browser;
  let page: Page;
  const signupCalls: string[] = [];

  beforeAll(async () => {
    await ensureConsoleBuilt();
    h = await startHarness();
    browser = await launchBrowser();
    page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
    page.on('request', (r) => {
      if (r.url().endsWith('/api/console/signup')) signupCalls.push(r.method());
    });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  it('opens on sign-up when no account exists yet', async () => {
    await page.goto(`${h.url}/`);
    await page.getByRole('heading', { name: 'Create your account' }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/signup');
  });

  it('says and enforces the password length the server requires', async () => {
    await page.getByText('At least 10 characters').waitFor();
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByLabel('Password').fill('nine char');
    await page.getByRole('button', { name: 'Create account' }).click();
    const rule = page
      .getByRole('alert')
      .getByText('At least 10 characters, not counting spaces at either end.');
    await rule.waitFor();
    // Ten spaces are no password, here as on the server.
    await page.getByLabel('Password').fill(' '.repeat(10));
    await page.getByRole('button', { name: 'Create account' }).click();
    await rule.waitFor();
    // Nothing is cut off: an over-long passphrase is kept whole and said to be too long.
    await page.getByLabel('Password').fill('p'.repeat(300));
    expect(await page.getByLabel('Password').inputValue()).toHaveLength(300);
    await page.getByRole('alert').getByText('At most 256 characters; this one has 300.').waitFor();
    expect(signupCalls).toEqual([]);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.getByTestId('full-key').waitFor();
    expect(signupCalls).toEqual(['POST']);
  });

  it('shows every quickstart tab whole on a phone', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${h.url}/`);
    const tabs = page.locator('.quickstart [role=tab]');
    await tabs.first().waitFor();
    const off = await tabs.evaluateAll((els) =>
      els
        .filter((el) => {
          const r = el.getBoundingClientRect();
          const box = el.parentElement!.getBoundingClientRect();
          return r.right > Math.min(box.right, document.documentElement.clientWidth) + 1 || r.left < 0;
        })
        .map((el) => el.textContent),
    );
    expect(off).toEqual([]);
    await shootAllWidths(page, 'newuser-overview');
  });

  it('shows a new key whole in the "Key created" dialog, clear of the Copy button', async () => {
    for (const width of [390, 1280]) {
      await page.setViewportSize({ width, height: 844 });
      await page.goto(`${h.url}/keys`);
      await page.getByRole('button', { name: 'Create key' }).click();
      await page.getByLabel('Name', { exact: true }).fill(`laptop-${width}`);
      await page.getByLabel('Name', { exact: true }).press('Enter');
      const dialog = page.getByRole('dialog', { name: 'Key created' });
      await dialog.getByTestId('full-key').waitFor();
      expect(
        await clearOf(page, 'dialog[open] [data-testid=full-key]', 'dialog[open] .copy-btn'),
        `${width}px`,
      ).toBeNull();
      if (width === 390)
        await page.screenshot({ path: 'test-results/screenshots/newuser-key-created-390.png' });
      await dialog.getByRole('button', { name: 'Done' }).click();
    }
  });

  it('refuses an empty rename with a message instead of silently cancelling', async () => {
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.goto(`${h.url}/keys`);
    await page.getByRole('button', { name: 'Rename default' }).click();
    await page.getByLabel('New name for default').fill('   ');
    await page.getByLabel('New name for default').press('Enter');
    await page.getByRole('alert').getByText('A key needs a name').waitFor();
    expect(await page.getByLabel('New name for default').isVisible()).toBe(true);
    await page.getByLabel('New name for default').fill('main');
    await page.getByLabel('New name for main').or(page.getByLabel('New name for default')).press('Enter');
    await page.getByRole('button', { name: 'Rename main' }).waitFor();
  });

  it('flags a malformed property filter beside its field, and the log stays', async () => {
    await page.goto(`${h.url}/requests`);
    await page.getByText('No requests yet').waitFor();
    await page.getByLabel('Property').fill(':search');
    await page.getByLabel('Property').press('Enter');
    await page.getByRole('alert').getByText('property name before the colon').waitFor();
    expect(await page.getByText('Something went wrong').count()).toBe(0);
    // The same from an edited URL.
    await page.goto(`${h.url}/requests?property=${encodeURIComponent(':search')}`);
    await page.getByRole('alert').getByText('property name before the colon').waitFor();
    expect(await page.getByText('Something went wrong').count()).toBe(0);
    await page.getByText('No requests').first().waitFor();
  });

  it('says the passwords do not match only while they do not', async () => {
    await page.goto(`${h.url}/settings`);
    await page.getByText('At least 10 characters.').waitFor();
    await page.getByLabel('Current password').fill(PASSWORD);
    await page.getByLabel('New password', { exact: true }).fill('another passphrase');
    await page.getByLabel('Confirm new password').fill('another passphrasX');
    await page.getByRole('button', { name: 'Change password' }).click();
    const mismatch = page.getByText('The new passwords do not match.');
    await mismatch.waitFor();
    await page.getByLabel('Confirm new password').fill('another passphrase');
    await mismatch.waitFor({ state: 'detached' });
  });

  it('holds every password field to the one rule: no truncation, no false mismatch, no same password', async () => {
    await page.goto(`${h.url}/settings`);
    const passwordCalls: number[] = [];
    const count = (r: { url(): string }) => {
      if (r.url().endsWith('/api/console/password')) passwordCalls.push(1);
    };
    page.on('request', count);
    const long = 'a long passphrase '.repeat(17); // 306 characters
    await page.getByLabel('Current password').fill(PASSWORD);
    await page.getByLabel('New password', { exact: true }).fill(long);
    await page.getByLabel('Confirm new password').fill(long);
    await page.getByRole('alert').getByText(`At most 256 characters; this one has ${long.length}.`).waitFor();
    await page.getByRole('button', { name: 'Change password' }).click();
    expect(await page.getByText('The new passwords do not match.').count()).toBe(0);
    await page.getByLabel('New password', { exact: true }).fill(PASSWORD);
    await page.getByLabel('Confirm new password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.getByRole('alert').getByText('This is your current password; choose another.').waitFor();
    page.off('request', count);
    expect(passwordCalls).toEqual([]);
  });

  it('after too many failed logins, says how long the server asks to wait', async () => {
    await page.goto(`${h.url}/settings`);
    await page.locator('.settings-row').getByRole('button', { name: 'Log out' }).click();
    await page.getByRole('heading', { name: 'Log in to keyrelay' }).waitFor();
    await page.getByLabel('Email').fill(EMAIL);
    let retryAfter = '';
    page.on('response', (r) => {
      if (r.url().endsWith('/api/console/login') && r.status() === 429)
        retryAfter = r.headers()['retry-after'] ?? '';
    });
    for (let i = 0; i < 8 && !retryAfter; i++) {
      await page.getByLabel('Password').fill(`wrong password ${i}`);
      await page.getByRole('button', { name: 'Log in' }).click();
      await page.getByRole('alert').waitFor();
      await page.waitForTimeout(100);
    }
    expect(Number(retryAfter)).toBeGreaterThan(600);
    await page
      .getByRole('alert')
      .getByText(`Try again in ${Math.ceil(Number(retryAfter) / 60)} minutes.`)
      .waitFor();
  });
});
