/**
 * The console with awkward, realistic data — long and unicode key names, many keys and rows, refused rows,
 * a dropped stream — at 390, 1280 and 1920 px, and the rough edges a new user reported. keyrelay
 * runs in this process on a real socket with real SQLite stores; the browser is real Chromium.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey, revokeKey } from '../src/keys/actions.js';
import type { RequestLogRow } from '../src/types.js';
import { ensureConsoleBuilt, findChromium, launchBrowser } from './helpers/browser.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { makeLogRow } from './helpers/log-rows.js';
import { layoutAtEveryWidth, shootAllWidths } from './helpers/layout.js';

const chromium = findChromium();
// Never skipped: without Chromium this fails, as the README's test section says (apt-get install chromium).
if (!chromium) throw new Error('console-ux.e2e: /usr/bin/chromium is missing (apt-get install chromium)');

const LONG_NAME = 'production-batch-summariser-for-the-nightly-customer-digest-eu-west-2-replica';
const UNICODE_NAME = 'Équipe données — 数据团队 🚀 análisis';

describe('console with long names, many rows and every state', () => {
  let h: Harness;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let account: { accountId: string; keyId: string; key: string };
  let limitedKey = '';
  let chatRowId = '';
  const email = 'long-names@example.com';
  const pageErrors: string[] = [];

  async function logIn(p: Page): Promise<void> {
    const r = await p.request.post(`${h.url}/api/console/login`, {
      data: { email, password: 'correct horse battery' },
      headers: { origin: h.url },
    });
    expect(r.status()).toBe(200);
  }

  beforeAll(async () => {
    await ensureConsoleBuilt();
    h = await startHarness();
    account = await h.newUser(email);
    const { configStore, bus, logStore } = h.kr.services;
    const deps = { store: configStore, bus };
    const named: string[] = [];
    for (const name of [LONG_NAME, UNICODE_NAME]) {
      const made = await createKey(deps, {
        accountId: account.accountId,
        name,
        limits: {
          allowed_providers: ['openai'],
          allowed_models: ['gpt-4o*', 'o3-mini', 'gpt-4.1-nano'],
          rate_limit_rpm: 600,
          budget_usd: 250,
          budget_period: 'month',
        },
      });
      named.push(made.view.id);
      limitedKey ||= made.key;
    }
    for (let i = 0; i < 12; i++) await createKey(deps, { accountId: account.accountId, name: `worker-${i}` });
    const now = Date.now();
    const rows: RequestLogRow[] = [];
    for (let i = 0; i < 60; i++) {
      rows.push(
        makeLogRow({
          at: now - 60_000 - i * 30_000,
          account_id: account.accountId,
          key_id: [account.keyId, ...named][i % 3]!,
          provider: i % 2 ? 'anthropic' : 'openai',
          path: i % 2 ? '/v1/messages' : '/v1/chat/completions',
          model: i % 11 === 5 ? null : i % 2 ? 'claude-3-7-sonnet-20250219' : 'gpt-4o-mini-2024-07-18',
          cost_usd: i % 5 === 0 ? null : 0.000123,
          status: i % 7 === 3 ? 403 : 200,
          outcome: i % 7 === 3 ? 'refused' : 'ok',
          error_code: i % 7 === 3 ? 'proxy_key_forbidden' : null,
          latency_ms: 123456.7,
          end_user: `end-user-${i}@customer.example`,
          session: `session-${i}`,
        }),
      );
    }
    await logStore.insertBatch(rows);
    browser = await launchBrowser();
    context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    page = await context.newPage();
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    await logIn(page);
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  it('keys: every action stays on screen beside its key name, at every width', async () => {
    await page.goto(`${h.url}/keys`);
    await page.getByRole('button', { name: `Revoke ${LONG_NAME}` }).waitFor();
    await shootAllWidths(page, 'ux-keys');
    expect(await layoutAtEveryWidth(page, 'table tbody tr', '.key-name', 'button')).toEqual({});
  });

  it('requests: every column is visible at 1280 px with Claude models and refusal badges', async () => {
    await page.goto(`${h.url}/requests`);
    await page.locator('table.requests-table tbody tr.clickable').first().waitFor();
    await shootAllWidths(page, 'ux-requests');
    expect(await layoutAtEveryWidth(page, 'table.requests-table tbody tr', '.row-link', 'a')).toEqual({});
  });

  it('uses the width of a wide screen', async () => {
    await page.setViewportSize({ width: 1920, height: 900 });
    await page.goto(`${h.url}/requests`);
    await page.locator('table.requests-table').waitFor();
    const right = await page.locator('.content').evaluate((el) => el.getBoundingClientRect().right);
    expect(right).toBeGreaterThan(1800);
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  it('shows a refused row with its reason, and a dropped stream as cut mid-stream with the client IP', async () => {
    await page.setViewportSize({ width: 1280, height: 800 });
    const call = async (
      provider: 'openai' | 'anthropic',
      key: string,
      extra: Record<string, string> = {},
    ) => {
      const res = await request(
        `${h.url}/api/proxy/${provider}${provider === 'openai' ? '/v1/chat/completions' : '/v1/messages'}`,
        {
          method: 'POST',
          headers: {
            'proxy-api-key': key,
            'content-type': 'application/json',
            authorization: 'Bearer sk-x',
            'x-api-key': 'sk-ant-x',
            ...extra,
          },
          body: JSON.stringify({ model: 'claude-haiku-4-5', max_tokens: 8, messages: [], stream: true }),
        },
      );
      const id = String(res.headers['x-keyrelay-request-id']);
      await res.body.text().catch(() => '');
      return { id, status: res.statusCode };
    };
    const refused = await call('anthropic', limitedKey);
    expect(refused.status).toBe(403);
    const { configStore, bus } = h.kr.services;
    const gone = await createKey({ store: configStore, bus }, { accountId: account.accountId, name: 'gone' });
    await revokeKey({ store: configStore, bus }, { orgId: account.accountId }, gone.view.id);
    const revoked = await call('openai', gone.key);
    expect(revoked.status).toBe(401);
    const dropped = await call('openai', account.key, { 'x-fake-drop-after-events': '2' });
    expect(dropped.status).toBe(200);
    await h.flushLog();

    await page.goto(`${h.url}/requests`);
    // Refused before its body was read: no model, and no path pretending to be one.
    const revokedRow = page.locator(`table.requests-table tbody tr:has(a[href="/requests/${revoked.id}"])`);
    await revokedRow.waitFor();
    expect((await revokedRow.locator('.c-model').textContent())?.trim()).toBe('—');
    const droppedRow = page.locator(`table.requests-table tbody tr:has(a[href="/requests/${dropped.id}"])`);
    expect(await droppedRow.locator('[data-error-code]').textContent()).toBe('cut mid-stream');
    await shootAllWidths(page, 'ux-requests-refused-dropped');

    await page.goto(`${h.url}/requests/${refused.id}`);
    await page
      .getByTestId('refusal-reason')
      .getByText('Provider anthropic is not allowed for this key.')
      .waitFor();
    expect(await page.getByText('turned off').count()).toBe(0);
    await page.getByTestId('res-body-missing').getByText('keyrelay answered 403 itself').waitFor();
    await shootAllWidths(page, 'ux-detail-refused');

    await page.goto(`${h.url}/requests/${revoked.id}`);
    await page.getByTestId('refusal-reason').getByText('revoked').waitFor();
    await page.getByText('Not read: keyrelay refused the request before reading its body.').waitFor();
    expect(await page.getByText('turned off').count()).toBe(0);

    await page.goto(`${h.url}/requests/${dropped.id}`);
    await page.getByText('The provider closed the connection mid-response').first().waitFor();
    expect(await page.locator('.detail-meta').textContent()).not.toContain('unreachable');
    expect(await page.content()).toContain('127.0.0.1');
    await shootAllWidths(page, 'ux-detail-dropped');
  });

  it('usage: filters by key, provider and model, takes a custom range, and explains what it shows', async () => {
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.goto(`${h.url}/usage?range=24h`);
    await page.getByRole('heading', { name: 'By model' }).waitFor();
    await page.locator('.chart-card svg.recharts-surface').nth(3).waitFor();
    // The four charts' time axes start at the same offset in their cards.
    const offsets = await page.locator('.chart-card').evaluateAll((cards) =>
      cards.map((c) => {
        const axis = c.querySelector('.recharts-xAxis');
        return axis ? Math.round(axis.getBoundingClientRect().left - c.getBoundingClientRect().left) : null;
      }),
    );
    expect(offsets).toHaveLength(4);
    expect(new Set(offsets).size, JSON.stringify(offsets)).toBe(1);

    const byModel = page.locator('.breakdown[aria-label="By model"]');
    const noModel = byModel.getByText('(no model)');
    await noModel.waitFor();
    expect(await noModel.evaluate((el) => el.closest('a'))).toBeNull();
    const byKey = (await page.locator('.breakdown[aria-label="By key"]').textContent()) ?? '';
    expect(byKey).toMatch(/\+ \d+ unpriced/);
    expect(byKey).not.toMatch(/\+\d+\?/);
    await shootAllWidths(page, 'ux-usage');
    expect(await layoutAtEveryWidth(page, '.breakdown tbody tr', 'td.stack-title', 'a')).toEqual({});

    await page.getByLabel('Provider').selectOption('anthropic');
    await page.waitForURL(/provider=anthropic/);
    await byModel.getByText('claude-3-7-sonnet-20250219').waitFor();
    await page.waitForFunction(
      () =>
        !document.querySelector('.breakdown[aria-label="By model"]')?.textContent?.includes('gpt-4o-mini'),
    );
    const longKey = await page.locator('#u-key option').filter({ hasText: LONG_NAME }).getAttribute('value');
    await page.getByLabel('Key', { exact: true }).selectOption(longKey);
    await page.waitForURL(/key_id=/);

    await page.getByRole('tab', { name: 'Custom' }).click();
    const from = new Date(Date.now() - 2 * 3600_000);
    const pad = (n: number) => String(n).padStart(2, '0');
    const local = (d: Date) =>
      `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
    await page.getByLabel('From').fill(local(from));
    await page.getByRole('button', { name: 'Apply range' }).click();
    await page.waitForURL(/range=custom.*from=/);
    await byModel.getByText('claude-3-7-sonnet-20250219').waitFor();
    await shootAllWidths(page, 'ux-usage-filtered');

    // The breakdown links into the request log with the same range and filters.
    await byModel.getByRole('link', { name: 'claude-3-7-sonnet-20250219' }).click();
    await page.waitForURL(/\/requests\?.*range=custom/);
    expect(new URL(page.url()).searchParams.get('provider')).toBe('anthropic');
    await page.getByLabel('From').waitFor();
    const rows = page.locator('table.requests-table tbody tr.clickable');
    await rows.first().waitFor();
    for (const model of await rows.locator('.c-model').allTextContents()) expect(model).toContain('claude');
  });

  it('shows bodies as a chat beside the raw JSON, tool calls and images included', async () => {
    const row = makeLogRow({
      account_id: account.accountId,
      key_id: account.keyId,
      at: Date.now() - 10_000,
      request_body: JSON.stringify({
        model: 'gpt-5-mini',
        stream: true,
        messages: [
          { role: 'system', content: 'Be brief.' },
          {
            role: 'user',
            content: [
              { type: 'text', text: 'What is in this picture?' },
              { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
            ],
          },
          {
            role: 'assistant',
            content: null,
            tool_calls: [
              { id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '{"q":"cat"}' } },
            ],
          },
          { role: 'tool', tool_call_id: 'call_1', content: 'a tabby cat' },
        ],
      }),
      response_body:
        ['A', ' tabby', ' cat.']
          .map((t) => `data: ${JSON.stringify({ choices: [{ delta: { content: t } }] })}\n\n`)
          .join('') + 'data: [DONE]\n\n',
      response_body_truncated: false,
    });
    await h.kr.services.logStore.insertBatch([row]);
    chatRowId = row.id;
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.goto(`${h.url}/requests/${row.id}`);
    const reqChat = page.getByTestId('req-body-chat');
    await reqChat.getByText('What is in this picture?').waitFor();
    await reqChat.getByText('[image not kept in the log]').waitFor();
    expect(await reqChat.locator('[data-part=tool-call]').textContent()).toContain('lookup');
    expect(await reqChat.locator('[data-part=tool-result]').textContent()).toContain('a tabby cat');
    await page.getByTestId('res-body-chat').getByText('A tabby cat.').waitFor();
    // Narrow card: Chat or Raw, one at a time.
    await page.getByRole('tablist', { name: 'Request body view' }).getByRole('tab', { name: 'Raw' }).click();
    await page.getByTestId('req-body-raw').locator('pre').waitFor();
    expect(await reqChat.isVisible()).toBe(false);
    await shootAllWidths(page, 'ux-detail-chat');
    // Wide card: both at once, side by side.
    await page.setViewportSize({ width: 1920, height: 900 });
    await page.waitForTimeout(300);
    expect(await reqChat.isVisible()).toBe(true);
    expect(await page.getByTestId('req-body-raw').locator('pre').isVisible()).toBe(true);
    const [chatBox, rawBox] = await page
      .locator('#req-body-pane-panel > .pane')
      .evaluateAll((els) => els.map((e) => e.getBoundingClientRect().left));
    expect(rawBox!).toBeGreaterThan(chatBox! + 300);
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  it('requests: search finds a row by words in its stored body', async () => {
    await page.goto(`${h.url}/requests`);
    await page.locator('table.requests-table tbody tr.clickable').first().waitFor();
    await page.getByLabel('Search').fill('tabby cat');
    await page.getByLabel('Search').press('Enter');
    await page.waitForURL(/q=tabby/);
    const rows = page.locator('table.requests-table tbody tr.clickable');
    await page.waitForFunction(
      () => document.querySelectorAll('table.requests-table tbody tr.clickable').length === 1,
    );
    expect(await rows.locator('a.row-link').getAttribute('href')).toBe(`/requests/${chatRowId}`);
    await shootAllWidths(page, 'ux-requests-search');
    await page.getByRole('button', { name: 'Clear filters' }).click();
  });

  it('requests: optional columns, chosen once and remembered, and auto-refresh', async () => {
    await page.goto(`${h.url}/requests`);
    await page.locator('table.requests-table tbody tr.clickable').first().waitFor();
    await page.getByRole('button', { name: 'Columns' }).click();
    for (const name of ['End user', 'Session', 'Properties', 'TTFB'])
      await page.getByRole('group', { name: 'Optional columns' }).getByLabel(name).check();
    await page.keyboard.press('Escape');
    await page.reload();
    await page.locator('table.requests-table th', { hasText: 'End user' }).waitFor();
    // The header shows while the page's rows are still loading: wait for the rows, not just the header.
    await page.locator('table.requests-table tbody tr.clickable').first().waitFor();
    expect(await page.locator('table.requests-table tbody .c-end_user').allTextContents()).toContain(
      'end-user-0@customer.example',
    );
    expect(await page.locator('table.requests-table thead th').allTextContents()).toEqual(
      expect.arrayContaining(['Session', 'Properties', 'TTFB']),
    );
    await shootAllWidths(page, 'ux-requests-all-columns');
    // With every column on, the card scrolls sideways rather than squeeze identifiers to a few letters, so
    // its cells may lie past its edge; nothing else may be wrong (test/console-filters.e2e checks no clipping).
    const problems = await layoutAtEveryWidth(page, 'table.requests-table tbody tr', '.row-link', 'a');
    const unexpected = Object.entries(problems)
      .map(([w, ps]) => [w, ps.filter((p) => !/table scrolls sideways|a cell is cut off/.test(p))] as const)
      .filter(([, ps]) => ps.length > 0);
    expect(unexpected).toEqual([]);

    await page.getByLabel('Auto-refresh').check();
    const fresh = makeLogRow({
      account_id: account.accountId,
      key_id: account.keyId,
      at: Date.now(),
      model: 'gpt-auto-refresh-probe',
    });
    await h.kr.services.logStore.insertBatch([fresh]);
    await page.locator(`a[href="/requests/${fresh.id}"]`).waitFor({ timeout: 15_000 });
    await page.getByLabel('Auto-refresh').uncheck();
  });

  it('loads without script errors', () => {
    expect(pageErrors).toEqual([]);
  });
});
