/** Headless Chromium for browser tests (the system package, driven by playwright-core). */
import { existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';

const CHROMIUM_PATHS = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'];

export function findChromium(): string | null {
  return CHROMIUM_PATHS.find((p) => existsSync(p)) ?? null;
}

export async function launchBrowser(): Promise<Browser> {
  const executablePath = findChromium();
  if (!executablePath) throw new Error(`No Chromium found (looked in ${CHROMIUM_PATHS.join(', ')})`);
  return chromium.launch({
    executablePath,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
}

export const VIEWPORTS = {
  laptop: { width: 1280, height: 800 },
  phone: { width: 390, height: 844 },
} as const;

export const SCREENSHOT_DIR = join(process.cwd(), 'test-results', 'screenshots');

/**
 * Saves the page at both widths as `<name>-1280.png` and `<name>-390.png`, then restores the original
 * viewport. Full-page shots, so what is below the fold gets looked at too.
 */
export async function screenshotBothWidths(page: Page, name: string): Promise<string[]> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const original = page.viewportSize();
  const files: string[] = [];
  for (const vp of [VIEWPORTS.laptop, VIEWPORTS.phone]) {
    await page.setViewportSize(vp);
    // Let ResizeObserver-driven layout (charts) settle at the new width.
    await page.waitForTimeout(250);
    const file = join(SCREENSHOT_DIR, `${name}-${vp.width}.png`);
    await page.screenshot({ path: file, fullPage: true });
    files.push(file);
  }
  if (original) await page.setViewportSize(original);
  return files;
}

function newestMtime(path: string): number {
  const st = statSync(path);
  if (!st.isDirectory()) return path.endsWith('.test.ts') ? 0 : st.mtimeMs;
  return Math.max(0, ...readdirSync(path).map((f) => newestMtime(join(path, f))));
}

/**
 * Builds the console into web/dist when it is missing or older than its sources, so a browser test never
 * runs against a stale (or, on a fresh checkout, absent) build.
 */
export async function ensureConsoleBuilt(root = process.cwd()): Promise<void> {
  const index = join(root, 'web', 'dist', 'index.html');
  const sources = ['web/src', 'web/index.html', 'web/vite.config.ts', 'web/public'].map((p) => join(root, p));
  const newest = Math.max(...sources.filter((p) => existsSync(p)).map(newestMtime));
  if (existsSync(index) && statSync(index).mtimeMs >= newest) return;
  const { build } = await import('vite');
  await build({ configFile: join(root, 'web', 'vite.config.ts'), logLevel: 'warn' });
}

/** A new page signed in to the console at `url` as `email` (with the tests' password) through the login API. */
export async function signedInPage(
  browser: Browser,
  url: string,
  email: string,
  viewport: { width: number; height: number } = VIEWPORTS.laptop,
): Promise<Page> {
  const page = await (await browser.newContext({ viewport })).newPage();
  const r = await page.request.post(`${url}/api/console/login`, {
    data: { email, password: 'correct horse battery' },
    headers: { origin: url },
  });
  if (r.status() !== 200) throw new Error(`console login as ${email} answered ${r.status()}`);
  return page;
}
