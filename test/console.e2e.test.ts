/**
 * The console in a real browser, driven the way a new user uses it: sign up, copy the default key, call
 * keyrelay with the official SDKs, find those calls in the log, open one, look at usage, revoke the key and
 * watch the SDK get refused. keyrelay runs as its CLI does (`serve` in a child process) against fake
 * upstreams. Screenshots of every page at 1280 and 390 px go to test-results/screenshots/.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { calcPrice } from '@pydantic/genai-prices';
import OpenAI from 'openai';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatCost, formatNumber } from '../web/src/lib/format.js';
import {
  DEFAULT_ANTHROPIC_USAGE,
  DEFAULT_OPENAI_USAGE,
  startFakeAnthropic,
  startFakeOpenAI,
} from './fakes/index.js';
import type { FakeUpstream } from './fakes/index.js';
import { FAKE_BATCH_ANTHROPIC_MODEL, FAKE_BATCH_FAILED, FAKE_BATCH_LINES } from './fakes/batches.js';
import {
  ensureConsoleBuilt,
  findChromium,
  launchBrowser,
  screenshotBothWidths,
  VIEWPORTS,
} from './helpers/browser.js';
import { freePort, startServeProcess, stopServeProcess, type ServeProcess } from './helpers/process.js';

const EMAIL = 'ada@example.com';
const PASSWORD = 'correct horse battery staple';
const NEW_PASSWORD = 'a different long passphrase';
const OPENAI_MODEL = 'gpt-4o-mini';
const ANTHROPIC_MODEL = 'claude-3-5-haiku-latest';

async function waitFor<T>(
  what: string,
  fn: () => Promise<T | null | undefined | false>,
  timeoutMs = 15_000,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < until) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      lastError = e;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(
    `timed out waiting for ${what}${lastError instanceof Error ? `: ${lastError.message}` : ''}`,
  );
}

function expectedCost(
  provider: 'openai' | 'anthropic',
  model: string,
  u: { input: number; output: number; cacheRead: number; cacheWrite: number },
): number {
  const usage: Record<string, number> = { input_tokens: u.input, output_tokens: u.output };
  if (u.cacheRead > 0) usage.cache_read_tokens = u.cacheRead;
  if (u.cacheWrite > 0) usage.cache_write_tokens = u.cacheWrite;
  const price = calcPrice(usage, model, { providerId: provider });
  if (!price) throw new Error(`genai-prices has no price for ${model}`);
  return price.total_price;
}

// input_tokens counts every prompt token, cache reads and writes included.
const EXPECTED = {
  openai: {
    input: DEFAULT_OPENAI_USAGE.prompt_tokens,
    output: DEFAULT_OPENAI_USAGE.completion_tokens,
    cacheRead: DEFAULT_OPENAI_USAGE.cached_tokens ?? 0,
    cacheWrite: 0,
  },
  anthropic: {
    input:
      DEFAULT_ANTHROPIC_USAGE.input_tokens +
      (DEFAULT_ANTHROPIC_USAGE.cache_read_input_tokens ?? 0) +
      (DEFAULT_ANTHROPIC_USAGE.cache_creation_input_tokens ?? 0),
    output: DEFAULT_ANTHROPIC_USAGE.output_tokens,
    cacheRead: DEFAULT_ANTHROPIC_USAGE.cache_read_input_tokens ?? 0,
    cacheWrite: DEFAULT_ANTHROPIC_USAGE.cache_creation_input_tokens ?? 0,
  },
};

/** The parts of a key row's limits summary, e.g. ['OpenAI only', '60 rpm']. */
/** The row's limits as summarized; a budget by its amount (its spend so far is test/console-keys.e2e's). */
async function limitParts(row: Locator): Promise<string[]> {
  // A meter reads "<used> of <limit>": the limit is what was set.
  const parts = await row.locator('.limit-part, .budget-label').allTextContents();
  return parts.map((p) => p.replace(/^(\$[\d.]+|[\d,]+) of /, ''));
}

const chromium = findChromium();
// Never skipped: without Chromium this fails, as the README's test section says (apt-get install chromium).
if (!chromium) throw new Error('console.e2e: /usr/bin/chromium is missing (apt-get install chromium)');

describe('web console, as a new user uses it', () => {
  let openaiFake: FakeUpstream;
  let anthropicFake: FakeUpstream;
  let kr: ServeProcess | undefined;
  let dataDir: string;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  const pageErrors: string[] = [];
  let key = '';
  let streamedText = '';
  let base = '';

  const sdk = () => ({
    openai: new OpenAI({
      apiKey: 'sk-fake-openai',
      baseURL: `${base}/api/proxy/openai/v1`,
      defaultHeaders: { 'proxy-api-key': key },
      maxRetries: 0,
    }),
    anthropic: new Anthropic({
      apiKey: 'sk-ant-fake',
      baseURL: `${base}/api/proxy/anthropic`,
      defaultHeaders: { 'proxy-api-key': key },
      maxRetries: 0,
    }),
  });

  beforeAll(async () => {
    await ensureConsoleBuilt();
    openaiFake = await startFakeOpenAI();
    anthropicFake = await startFakeAnthropic();
    dataDir = mkdtempSync(join(tmpdir(), 'keyrelay-e2e-'));
    // `keyrelay serve` as a user runs it, on a fresh data dir.
    kr = await startServeProcess({
      KEYRELAY_HOST: '127.0.0.1',
      KEYRELAY_PORT: String(await freePort()),
      KEYRELAY_DATA_DIR: dataDir,
      KEYRELAY_OPENAI_UPSTREAM: openaiFake.url,
      KEYRELAY_ANTHROPIC_UPSTREAM: anthropicFake.url,
    });
    base = kr.url;
    browser = await launchBrowser();
    context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    page = await context.newPage();
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    page.on('console', (m) => {
      if (m.type() === 'error' && !m.text().includes('401'))
        pageErrors.push(`${m.text()} (${m.location().url})`);
    });
  });

  afterAll(async () => {
    await browser?.close();
    if (kr) await stopServeProcess(kr);
    await openaiFake?.close();
    await anthropicFake?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('sends a visitor of a fresh install to sign up (log-in a click away)', async () => {
    await page.goto(`${base}/requests`);
    await page.getByRole('heading', { name: 'Create your account' }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/signup');
    await page.getByRole('link', { name: 'Log in' }).click();
    await page.getByRole('heading', { name: 'Log in to keyrelay' }).waitFor();
    await screenshotBothWidths(page, 'login');

    await page.getByRole('link', { name: 'Create an account' }).click();
    await page.getByRole('heading', { name: 'Create your account' }).waitFor();
    await screenshotBothWidths(page, 'signup');
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create account' }).click();

    key = (await page.getByTestId('full-key').textContent({ timeout: 10_000 })) ?? '';
    expect(key).toMatch(/^kr_[0-9A-Za-z]{49}$/);
    expect(await page.getByText("you won't see this key again").count()).toBe(1);
  });

  it('fills the quickstart with the real base URL and the new key', async () => {
    const snippet = (await page.locator('.quickstart pre').textContent()) ?? '';
    expect(snippet).toContain(`${base}/api/proxy/openai/v1/chat/completions`);
    expect(snippet).toContain(key);
    await page.getByRole('tab', { name: 'Anthropic SDK' }).click();
    const anthropicSnippet = (await page.locator('.quickstart pre').textContent()) ?? '';
    expect(anthropicSnippet).toContain(`baseURL: '${base}/api/proxy/anthropic'`);
    await page.getByRole('tab', { name: 'Tools & env vars' }).click();
    expect(await page.locator('.quickstart pre').textContent()).toContain(
      `ANTHROPIC_CUSTOM_HEADERS="proxy-api-key: ${key}"`,
    );
    await page.getByRole('tab', { name: 'curl' }).click();
    await screenshotBothWidths(page, 'overview-new-key');
  });

  it('shows an empty request log that explains how to make the first call', async () => {
    await page.getByRole('link', { name: 'Requests' }).first().click();
    await page.getByText('No requests yet').waitFor();
    expect(await page.locator('.quickstart pre').textContent()).toContain(key);
    await screenshotBothWidths(page, 'requests-empty');
  });

  it('logs OpenAI and Anthropic SDK calls, streamed and not, with tokens and cost', async () => {
    const { openai, anthropic } = sdk();
    const completion = await openai.chat.completions.create({
      model: OPENAI_MODEL,
      messages: [{ role: 'user', content: 'Hello' }],
    });
    expect(completion.choices[0]?.message.content).toBeTruthy();

    const stream = await openai.chat.completions.create({
      model: OPENAI_MODEL,
      messages: [{ role: 'user', content: 'Stream a hello' }],
      stream: true,
    });
    for await (const chunk of stream) streamedText += chunk.choices[0]?.delta?.content ?? '';
    expect(streamedText.length).toBeGreaterThan(0);

    const message = await anthropic.messages.create({
      model: ANTHROPIC_MODEL,
      max_tokens: 64,
      messages: [{ role: 'user', content: 'Hello' }],
    });
    expect(message.content.length).toBeGreaterThan(0);
    const astream = anthropic.messages.stream({
      model: ANTHROPIC_MODEL,
      max_tokens: 64,
      messages: [{ role: 'user', content: 'Stream a hello' }],
    });
    await astream.finalMessage();

    // The page polls nothing by itself: refresh until the write-behind log has all four rows.
    await page.goto(`${base}/requests`);
    const rows = page.locator('table.requests-table tbody tr.clickable');
    await waitFor('four rows in the request log', async () => {
      if ((await rows.count()) >= 4) return true;
      await page.getByRole('button', { name: 'Refresh' }).click();
      await page.waitForTimeout(300);
      return false;
    });
    expect(await rows.count()).toBe(4);

    const api = await context.request.get(`${base}/api/console/requests`);
    expect(api.ok()).toBe(true);
    const { items } = (await api.json()) as {
      items: {
        id: string;
        provider: 'openai' | 'anthropic';
        model: string;
        stream: boolean;
        input_tokens: number;
        output_tokens: number;
        cost_usd: number | null;
      }[];
    };
    expect(items).toHaveLength(4);
    for (const item of items) {
      const want = EXPECTED[item.provider];
      const model = item.provider === 'openai' ? OPENAI_MODEL : ANTHROPIC_MODEL;
      const cost = expectedCost(item.provider, model, want);
      expect(item.model).toBe(model);
      expect(item.input_tokens).toBe(want.input);
      expect(item.output_tokens).toBe(want.output);
      expect(item.cost_usd).not.toBeNull();
      expect(item.cost_usd!).toBeCloseTo(cost, 12);

      const row = page.locator(`table.requests-table tbody tr:has(a[href="/requests/${item.id}"])`);
      const tokens = (await row.locator('.c-tokens').textContent())?.replace(/\s+/g, ' ').trim();
      expect(tokens).toBe(`${formatNumber(want.input)} / ${formatNumber(want.output)}`);
      expect((await row.locator('.c-cost').textContent())?.trim()).toBe(formatCost(cost));
      expect(await row.locator('.c-model').textContent()).toContain(model);
    }
    expect(items.filter((i) => i.stream)).toHaveLength(2);
    await screenshotBothWidths(page, 'requests');
  });

  it('filters the log through the URL query', async () => {
    await page.getByLabel('Provider').selectOption('anthropic');
    await waitFor('the provider filter in the URL', () =>
      Promise.resolve(page.url().includes('provider=anthropic')),
    );
    const rows = page.locator('table.requests-table tbody tr.clickable');
    await waitFor('two anthropic rows', async () => (await rows.count()) === 2);
    await page.reload();
    await waitFor('the filter to survive a reload', async () => (await rows.count()) === 2);
    expect(await page.getByLabel('Provider').inputValue()).toBe('anthropic');
    await page.getByRole('button', { name: 'Clear filters' }).first().click();
    await waitFor('all four rows again', async () => (await rows.count()) === 4);
  });

  it('opens a streamed request and shows the reassembled answer, usage, cost and redacted headers', async () => {
    const api = await context.request.get(`${base}/api/console/requests?provider=openai`);
    const { items } = (await api.json()) as { items: { id: string; stream: boolean }[] };
    const streamed = items.find((i) => i.stream)!;
    await page.locator(`a[href="/requests/${streamed.id}"]`).click();
    await page.getByRole('heading', { name: /\/v1\/chat\/completions/ }).waitFor();
    expect((await page.getByTestId('reassembled').textContent())?.trim()).toBe(streamedText.trim());
    const cost = expectedCost('openai', OPENAI_MODEL, EXPECTED.openai);
    expect(await page.getByTestId('detail-cost').textContent()).toBe(formatCost(cost));
    const headers = (await page.locator('.headers-grid').textContent()) ?? '';
    expect(headers).not.toContain('sk-fake-openai');
    expect(headers).not.toContain(key);
    await screenshotBothWidths(page, 'request-detail');

    await page.getByRole('tab', { name: 'Raw', exact: true }).last().click();
    await page.getByRole('tab', { name: 'Raw events' }).click();
    expect(await page.locator('#res-body-view-panel pre').textContent()).toContain('data: ');

    // A deep link loads straight into the page (SPA fallback on the server).
    await page.goto(`${base}/requests/${streamed.id}`);
    await page.getByTestId('reassembled').waitFor({ state: 'attached' });
  });

  it('draws usage charts and breakdowns by model and by key', async () => {
    await page.goto(`${base}/usage?range=1h`);
    await page.getByRole('heading', { name: 'By model' }).waitFor({ timeout: 10_000 });
    await waitFor(
      'four charts',
      async () => (await page.locator('.chart-card svg.recharts-surface').count()) >= 4,
    );
    expect(await page.locator('.chart-card[aria-label="Requests"] .chart-summary').textContent()).toContain(
      '4 total',
    );
    const byModel = (await page.locator('.breakdown[aria-label="By model"]').textContent()) ?? '';
    expect(byModel).toContain(OPENAI_MODEL);
    expect(byModel).toContain(ANTHROPIC_MODEL);
    expect(await page.locator('.breakdown[aria-label="By key"]').textContent()).toContain('default');
    await screenshotBothWidths(page, 'usage');
  });

  it('shows each batch with status, counts and cost once its results came through; unpriced calls say so', async () => {
    const { anthropic, openai } = sdk();
    const batch = await anthropic.messages.batches.create({
      requests: [0, 1, 2].map((i) => ({
        custom_id: `request-${i}`,
        params: {
          model: FAKE_BATCH_ANTHROPIC_MODEL,
          max_tokens: 50,
          messages: [{ role: 'user', content: 'hi' }],
        },
      })),
    });
    const panel = page.locator('section[aria-label="Batches"]');
    const row = panel.locator('tr', { hasText: batch.id });
    // The Usage page renders after its chunk loads and its queries answer: wait for the row, then reload.
    await waitFor('the new batch', async () => {
      await page.goto(`${base}/usage?range=1h`);
      return row.waitFor({ timeout: 3000 }).then(
        () => true,
        () => false,
      );
    });
    expect(await row.getByTestId('batch-cost').textContent()).toBe('results not yet fetched');
    expect(await row.textContent()).toContain('in_progress');
    for await (const line of await anthropic.messages.batches.results(batch.id))
      expect(line.custom_id).toBeTruthy();
    const u = DEFAULT_ANTHROPIC_USAGE;
    const perLine = expectedCost('anthropic', FAKE_BATCH_ANTHROPIC_MODEL, EXPECTED.anthropic);
    expect(u.output_tokens).toBe(EXPECTED.anthropic.output);
    const total = (FAKE_BATCH_LINES - FAKE_BATCH_FAILED) * perLine * 0.5;
    await waitFor('the batch cost', async () => {
      await page.goto(`${base}/usage?range=1h`);
      return (await row.getByTestId('batch-cost').textContent({ timeout: 3000 })) === formatCost(total);
    });
    expect(await row.textContent()).toContain('ended');
    expect(await row.textContent()).toContain(`${FAKE_BATCH_LINES - FAKE_BATCH_FAILED} succeeded`);
    await screenshotBothWidths(page, 'usage-batches');

    // DALL·E has no price in the library: the row says unpriced, never $0.
    await openai.images.generate({ model: 'dall-e-3', prompt: 'a cat' });
    await waitFor('the unpriced image row', async () => {
      await page.goto(`${base}/requests?model=dall-e-3`);
      return ((await page.locator('td.c-cost').first().textContent({ timeout: 2000 })) ?? '') === 'unpriced';
    });
  });

  it('no longer shows the full key once the page is reloaded', async () => {
    await page.goto(`${base}/`);
    await page.getByRole('heading', { name: 'Your key' }).waitFor();
    await page.getByRole('link', { name: 'Roll this key' }).waitFor();
    expect(await page.content()).not.toContain(key);
    await screenshotBothWidths(page, 'overview');
  });

  it('creates, renames and rolls a key, showing each new key once, with dialogs that close on Escape', async () => {
    await page.goto(`${base}/keys`);
    await page.getByRole('button', { name: 'Create key' }).click();
    const create = page.getByRole('dialog', { name: 'Create key' });
    await create.waitFor();
    await page.keyboard.press('Escape');
    await create.waitFor({ state: 'hidden' });

    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByLabel('Name', { exact: true }).fill('laptop');
    await create.getByText('Limits (optional)').click();
    await create.getByLabel('Budget (USD)').fill('5');
    await create.getByLabel('Budget period').selectOption('day');
    await create.getByText('Resets at 00:00 UTC').waitFor();
    await screenshotBothWidths(page, 'keys-create-dialog-limits');
    await page.getByLabel('Name', { exact: true }).press('Enter');
    const created =
      (await page.getByRole('dialog', { name: 'Key created' }).getByTestId('full-key').textContent()) ?? '';
    expect(created).toMatch(/^kr_[0-9A-Za-z]{49}$/);
    expect(created).not.toBe(key);
    await page.getByRole('button', { name: 'Done' }).click();
    await page.getByRole('button', { name: 'Rename laptop' }).waitFor();
    expect(await limitParts(page.locator('tr', { hasText: 'laptop' }))).toEqual(['$5/day']);

    await page.getByRole('button', { name: 'Rename laptop' }).click();
    await page.getByLabel('New name for laptop').fill('laptop-2');
    await page.keyboard.press('Enter');
    await page.getByRole('button', { name: 'Roll laptop-2' }).waitFor();

    await page.getByRole('button', { name: 'Roll laptop-2' }).click();
    await page.getByLabel('Old key stops working').selectOption('0');
    await page.getByRole('button', { name: 'Roll key' }).click();
    const rolled =
      (await page.getByRole('dialog', { name: 'Key rolled' }).getByTestId('full-key').textContent()) ?? '';
    expect(rolled).toMatch(/^kr_[0-9A-Za-z]{49}$/);
    expect(rolled).not.toBe(created);
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'hidden' });
    expect(await page.content()).not.toContain(rolled);
    await page.locator('tr', { hasText: 'laptop-2' }).getByText('Expired').waitFor();
    // A roll hands the old key's limits to the new one.
    const rolledRow = page.locator('tr', { hasText: 'laptop-2' }).filter({ hasText: 'Active' });
    expect(await limitParts(rolledRow)).toEqual(['$5/day']);

    // Emptying a field in the Limits dialog removes that limit (PATCH with null), and nothing else.
    await rolledRow.getByRole('button', { name: 'Limits for laptop-2' }).click();
    const dialog = page.getByRole('dialog', { name: 'Limits for “laptop-2”' });
    expect(await dialog.getByLabel('Budget (USD)').inputValue()).toBe('5');
    await dialog.getByLabel('Budget (USD)').fill('');
    const patch = page.waitForRequest((r) => r.method() === 'PATCH');
    await dialog.getByRole('button', { name: 'Save limits' }).click();
    expect((await patch).postDataJSON()).toEqual({ budget_usd: null });
    await dialog.waitFor({ state: 'hidden' });
    await rolledRow.getByText('No limits').waitFor();
  });

  it('sets limits on a key in its Limits dialog, and the SDKs are refused with their own errors', async () => {
    await page.goto(`${base}/keys`);
    await page.getByRole('button', { name: 'Limits for default' }).click();
    const dialog = page.getByRole('dialog', { name: 'Limits for “default”' });
    await dialog.getByText('Changes take effect immediately').waitFor();
    await dialog.getByLabel('OpenAI').check();
    const models = dialog.getByLabel('Models', { exact: true });
    await models.fill('gpt-*-mini');
    await models.press('Enter');
    await dialog.getByRole('alert').getByText('only at the end').waitFor();
    await models.fill('gpt-4o*');
    await models.press('Enter');
    await dialog.getByRole('button', { name: 'Remove gpt-4o*' }).waitFor();
    await models.fill('o1');
    await models.press('Enter');
    await dialog.getByRole('button', { name: 'Remove o1' }).click();
    await dialog.getByLabel('Requests per minute').fill('60');
    await dialog.getByLabel('Budget (USD)').fill('25');
    await dialog.getByText('Resets on the 1st (UTC)').waitFor();
    await screenshotBothWidths(page, 'keys-limits-dialog');

    const patch = page.waitForRequest((r) => r.method() === 'PATCH');
    await dialog.getByRole('button', { name: 'Save limits' }).click();
    expect((await patch).postDataJSON()).toEqual({
      allowed_providers: ['openai'],
      allowed_models: ['gpt-4o*'],
      rate_limit_rpm: 60,
      budget_usd: 25,
      budget_period: 'month',
    });
    await dialog.waitFor({ state: 'hidden' });
    const row = page.locator('tr', { hasText: 'default' });
    await row.locator('.limit-part').first().waitFor();
    expect(await limitParts(row)).toEqual(['OpenAI only', 'gpt-4o*', '60 rpm', '$25/month']);
    await screenshotBothWidths(page, 'keys-limits');

    const { openai, anthropic } = sdk();
    const aErr = await anthropic.messages
      .create({ model: ANTHROPIC_MODEL, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(aErr).toBeInstanceOf(Anthropic.PermissionDeniedError);
    expect(String(aErr)).toContain('proxy_key_forbidden');
    const ask = (model: string) =>
      openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] }).then(
        () => null,
        (e: unknown) => e,
      );
    expect(await ask(OPENAI_MODEL)).toBeNull();
    expect(await ask('gpt-3.5-turbo')).toBeInstanceOf(OpenAI.PermissionDeniedError);

    // The dialog opens with the saved limits, and sends only what changed.
    await row.getByRole('button', { name: 'Limits for default' }).click();
    expect(await dialog.getByLabel('OpenAI').isChecked()).toBe(true);
    expect(await dialog.getByLabel('Anthropic').isChecked()).toBe(false);
    expect(await dialog.getByLabel('Requests per minute').inputValue()).toBe('60');
    await dialog.getByLabel('Requests per minute').fill('1');
    const rpmPatch = page.waitForRequest((r) => r.method() === 'PATCH');
    await dialog.getByRole('button', { name: 'Save limits' }).click();
    expect((await rpmPatch).postDataJSON()).toEqual({ rate_limit_rpm: 1 });
    await row.getByText('1 rpm').waitFor();

    // Whether or not the first call still fits this minute's window, the second cannot.
    await ask(OPENAI_MODEL);
    const rErr = await ask(OPENAI_MODEL);
    expect(rErr).toBeInstanceOf(OpenAI.RateLimitError);
    expect((rErr as InstanceType<typeof OpenAI.RateLimitError>).message).toContain('Rate limit');

    // A key's limits: budget mode, tokens per minute, requests at once, what the rpm counts.
    await row.getByRole('button', { name: 'Limits for default' }).click();
    expect(await dialog.getByLabel('Budget mode').inputValue()).toBe('soft');
    await dialog.getByLabel('Budget mode').selectOption('hard');
    await dialog.getByText('Hard: each request reserves').waitFor();
    // Under a hard budget, what to do with calls keyrelay cannot price: refused unless the key allows them.
    expect(await dialog.getByLabel('Calls keyrelay cannot price').inputValue()).toBe('refuse');
    await dialog.getByLabel('Calls keyrelay cannot price').selectOption('allow');
    await dialog.getByText('let through and count their known cost only').waitFor();
    await dialog.getByLabel('Calls keyrelay cannot price').scrollIntoViewIfNeeded();
    await screenshotBothWidths(page, 'limits-unpriced');
    await dialog.getByLabel('Tokens per minute').fill('90000');
    await dialog.getByLabel('Requests at once').fill('3');
    await dialog.getByLabel('What counts').selectOption('all');
    const morePatch = page.waitForRequest((r) => r.method() === 'PATCH');
    await dialog.getByRole('button', { name: 'Save limits' }).click();
    expect((await morePatch).postDataJSON()).toEqual({
      rate_limit_scope: 'all',
      rate_limit_tpm: 90_000,
      max_concurrent: 3,
      budget_mode: 'hard',
      budget_unpriced: 'allow',
    });
    await row.getByText('$25/month (hard)').waitFor();
    // Plain limits first, then the meters: rpm, tpm, budget.
    expect(await limitParts(row)).toEqual([
      'OpenAI only',
      'gpt-4o*',
      '3 at once',
      '1 rpm',
      '90,000 tpm',
      '$25/month (hard)',
    ]);
  });

  it('finds the refused requests in the log, each with the reason keyrelay gave', async () => {
    await page.goto(`${base}/requests`);
    await page.getByLabel('Status').selectOption({ label: 'Refused' });
    await waitFor('the outcome filter in the URL', () =>
      Promise.resolve(page.url().includes('outcome=refused')),
    );
    const badges = page.locator('table.requests-table tbody .error-code-badge');
    const rows = page.locator('table.requests-table tbody tr.clickable');
    const want = ['forbidden', 'rate limited'];
    // The unfiltered page, still shown while the filtered one loads, holds these rows too: wait for the
    // list in which every row is a refusal (it must come, and stay, whatever order the answers arrive in).
    await waitFor('only refused rows, forbidden and rate-limited among them', async () => {
      const texts = await badges.allTextContents();
      if (want.every((w) => texts.includes(w)) && texts.length === (await rows.count())) return true;
      await page.getByRole('button', { name: 'Refresh' }).click();
      await page.waitForTimeout(300);
      return false;
    });
    const codes = await badges.evaluateAll((els) => els.map((e) => e.getAttribute('data-error-code')));
    expect(new Set(codes)).toEqual(new Set(['proxy_key_forbidden', 'proxy_rate_limited']));
    // Only refusals are listed: every row carries a reason.
    expect(await badges.count()).toBe(await rows.count());
    // Each reason is read whole, not cut by its cell (the status column once clipped "rate limited").
    for (const vp of [VIEWPORTS.laptop, VIEWPORTS.phone]) {
      await page.setViewportSize(vp);
      const clipped = await badges.evaluateAll((els) =>
        els
          .filter((e) => {
            const cell = e.closest('td')!;
            const badge = e.getBoundingClientRect();
            const box = cell.getBoundingClientRect();
            const pad = parseFloat(getComputedStyle(cell).paddingRight);
            return badge.right > box.right - pad + 0.5 || cell.scrollWidth > cell.clientWidth;
          })
          .map((e) => e.textContent),
      );
      expect(clipped, `badges cut off at ${vp.width} px`).toEqual([]);
    }
    await screenshotBothWidths(page, 'requests-refused');

    await page
      .locator('table.requests-table tbody tr.clickable', {
        has: page.locator('[data-error-code=proxy_rate_limited]'),
      })
      .first()
      .locator('a.row-link')
      .click();
    await page.getByText('Refused by keyrelay; nothing was sent upstream.').waitFor();
    await page
      .getByText('The key reached its requests-per-minute, tokens-per-minute or requests-in-flight limit.')
      .waitFor();
    expect(await page.locator('.detail-meta [data-error-code=proxy_rate_limited]').textContent()).toBe(
      'rate limited',
    );
    await screenshotBothWidths(page, 'request-detail-refused');
  });

  it('revokes the key after confirmation, and the SDKs are refused with keyrelay’s message', async () => {
    await page.goto(`${base}/keys`);
    await page.getByRole('button', { name: 'Revoke default' }).waitFor();
    await screenshotBothWidths(page, 'keys');
    await page.getByRole('button', { name: 'Revoke default' }).click();
    const dialog = page.getByRole('dialog', { name: 'Revoke key?' });
    await dialog.waitFor();
    await page.screenshot({ path: 'test-results/screenshots/keys-revoke-dialog-1280.png' });
    await dialog.getByRole('button', { name: 'Revoke key' }).click();
    await page.locator('tr', { hasText: 'default' }).getByText('Revoked').waitFor();
    await screenshotBothWidths(page, 'keys-revoked');

    const { openai, anthropic } = sdk();
    const oErr = await openai.chat.completions
      .create({ model: OPENAI_MODEL, messages: [{ role: 'user', content: 'still there?' }] })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(oErr).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((oErr as InstanceType<typeof OpenAI.AuthenticationError>).message).toContain('revoked');

    const aErr = await anthropic.messages
      .create({
        model: ANTHROPIC_MODEL,
        max_tokens: 8,
        messages: [{ role: 'user', content: 'still there?' }],
      })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(aErr).toBeInstanceOf(Anthropic.AuthenticationError);
    expect((aErr as InstanceType<typeof Anthropic.AuthenticationError>).message).toContain(
      'proxy_key_revoked',
    );
  });

  it('changes the password, logs out, and logs back in with the new one', async () => {
    await page.goto(`${base}/settings`);
    await page.getByLabel('Current password').fill(PASSWORD);
    await page.getByLabel('New password', { exact: true }).fill(NEW_PASSWORD);
    await page.getByLabel('Confirm new password').fill(NEW_PASSWORD);
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.getByText('Password changed').waitFor();
    await screenshotBothWidths(page, 'settings');

    await page.locator('.settings-row').getByRole('button', { name: 'Log out' }).click();
    await page.getByRole('heading', { name: 'Log in to keyrelay' }).waitFor();
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByText('Wrong email or password.').waitFor();
    await page.getByLabel('Password').fill(NEW_PASSWORD);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
  });

  it('loads without script or CSP errors', () => {
    expect(pageErrors, kr?.output()).toEqual([]);
  });
});
