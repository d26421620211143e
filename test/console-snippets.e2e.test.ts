/**
 * The console's quickstart snippets, copied from the page as shown and run as a user would paste them:
 * the Node ones with the official SDKs (node on a .mjs file), curl with bash. Against the fakes, through
 * keyrelay; no SDK may warn that a snippet's model is deprecated, and the calls must be priced.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureConsoleBuilt, findChromium, launchBrowser } from './helpers/browser.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { freePort } from './helpers/process.js';

const chromium = findChromium();
// Never skipped: without Chromium this fails, as the README's test section says (apt-get install chromium).
if (!chromium)
  throw new Error('console-snippets.e2e: /usr/bin/chromium is missing (apt-get install chromium)');

// Inside the repository, so `import OpenAI from 'openai'` resolves as it would in a user's project.
const DIR = join(import.meta.dirname, '..', 'test-results', 'snippets');

function run(cmd: string, args: string[], env: Record<string, string>) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(cmd, args, { env: { ...process.env, ...env }, cwd: DIR });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('quickstart snippets, pasted as shown', () => {
  let h: Harness;
  let browser: Browser;
  let page: Page;
  let key = '';
  let accountId = '';
  const env = () => ({
    KEYRELAY_KEY: key,
    OPENAI_API_KEY: 'sk-test-snippet',
    ANTHROPIC_API_KEY: 'sk-ant-snippet',
  });

  beforeAll(async () => {
    await ensureConsoleBuilt();
    mkdirSync(DIR, { recursive: true });
    // A real public URL: the snippets name it, and they must reach this keyrelay.
    const port = await freePort();
    h = await startHarness({ KEYRELAY_PORT: String(port), KEYRELAY_PUBLIC_URL: `http://127.0.0.1:${port}` });
    ({ key, accountId } = await h.newUser('snippets@example.com'));
    browser = await launchBrowser();
    page = await (await browser.newContext()).newPage();
    const login = await page.request.post(`${h.url}/api/console/login`, {
      data: { email: 'snippets@example.com', password: 'correct horse battery' },
      headers: { origin: h.url },
    });
    expect(login.status()).toBe(200);
    await page.goto(`${h.url}/`);
    await page.locator('.quickstart pre').waitFor();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  async function snippet(tab: string, variant?: string): Promise<string> {
    await page.getByRole('tab', { name: tab, exact: true }).click();
    if (variant) await page.getByRole('tab', { name: variant, exact: true }).click();
    return (await page.locator('.quickstart pre').textContent()) ?? '';
  }

  it.each([
    ['OpenAI SDK', 'openai'],
    ['Anthropic SDK', 'anthropic'],
  ] as const)(
    'the %s Node snippet runs with the official SDK, without a deprecation warning',
    async (tab, provider) => {
      const code = await snippet(tab, 'Node');
      const file = join(DIR, `${provider}.mjs`);
      writeFileSync(file, code);
      const r = await run(process.execPath, [file], env());
      expect(r.stderr).not.toMatch(/deprecat/i);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout.trim().length).toBeGreaterThan(0);
      await h.flushLog();
      const [row] = await h.kr.services.logStore.listRecent({ limit: 1, account_id: accountId });
      expect(row).toMatchObject({ provider, status: 200, outcome: 'ok' });
      // A current model genai-prices knows: the call is priced, not "unknown".
      expect(row!.cost_usd).not.toBeNull();
    },
  );

  it('the curl snippets run as shown', async () => {
    for (const [variant, expectText] of [
      ['OpenAI', '"choices"'],
      ['Anthropic', '"content"'],
    ] as const) {
      const code = await snippet('curl', variant);
      const r = await run('bash', ['-c', code], env());
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain(expectText);
    }
  });
});
